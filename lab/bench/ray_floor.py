"""Ray's own start-up on this machine, the floor under a run's: ``ray.init`` with the harness's
settings, then a Ray Train ``TorchTrainer`` fit of one worker whose function does nothing but
note the time, marked on the same clock as a run's start-up (``harness.startup``).

``python -m lab.bench.ray_floor OUT.json`` in a fresh process (``bench launch --ray-floor``
runs it after the real run); OUT: the marks, seconds since this process started.
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path


def _empty(loop_config: dict) -> None:
    from harness import startup

    clock = startup.Clock(loop_config["startup"])
    clock.mark("worker_entry")
    Path(loop_config["out"]).write_text(json.dumps(clock.marks))


def main(out: str) -> int:
    from harness import startup
    from harness.backend import start_ray, usable_cpus

    startup.mark("imports")
    start_ray()
    startup.mark("ray_started")
    import ray.train
    from ray.train.torch import TorchConfig, TorchTrainer

    startup.mark("fit_called")
    worker_out = Path(tempfile.mkdtemp(prefix="ray-floor-")) / "marks.json"
    trainer = TorchTrainer(
        _empty, train_loop_config={"startup": startup.handoff(), "out": str(worker_out)},
        scaling_config=ray.train.ScalingConfig(num_workers=1, resources_per_worker={
            "CPU": usable_cpus()}),
        torch_config=TorchConfig(backend="gloo"),
        run_config=ray.train.RunConfig(storage_path=tempfile.mkdtemp(prefix="ray-floor-")))
    trainer.fit()
    marks = json.loads(worker_out.read_text())
    marks["fit_returned"] = time.time() - startup.process_start()
    Path(out).write_text(json.dumps(marks))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
