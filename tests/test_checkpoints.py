"""Step checkpoints and resume: a run SIGKILLed mid-training and run again ends with the same
parameters and per-step metrics as an uninterrupted one; a worker killed mid-training is
restarted by Ray Train from the last checkpoint. tiny-random, CPU."""
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.config import resolve

ROOT = Path(__file__).resolve().parent.parent
TOY = str(ROOT / "tests" / "plugins" / "toy_task.py")
TINY = {"model": "tiny-random", "method": "gdpo", "task": "toy", "plugins": (TOY,), "steps": 5,
        "prompts_per_step": 2, "group_size": 4, "max_response_tokens": 12,
        "eval_max_response_tokens": 8, "eval_limit": 4, "lr": 1e-2, "max_prompt_tokens": 4096,
        "save_every": 2}
FLAGS = ["--model", "tiny-random", "--method", "gdpo", "--task", "toy", "--plugin", TOY,
         "--steps", "5", "--prompts-per-step", "2", "--group-size", "4",
         "--max-response-tokens", "12", "--eval-max-response-tokens", "8", "--eval-limit", "4",
         "--lr", "0.01", "--max-prompt-tokens", "4096", "--save-every", "2"]


def run_cli(results: Path, checkpoints: Path, kill_after_rows: int = 0) -> None:
    """``harness run`` in its own session; once its training log has this many rows (0: let it
    finish), SIGKILL the driver's process group (the driver, the GCS and the raylet: Ray starts
    each worker in a group of its own), check that the orphaned training worker exits by itself,
    then kill what is left of the session."""
    cmd = [sys.executable, "-m", "harness", "run", *FLAGS, "--results-dir", str(results),
           "--checkpoint-dir", str(checkpoints)]
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    if not kill_after_rows:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        return
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        logs = list(results.rglob("seed0.train.jsonl.partial"))
        if logs and len(logs[0].read_text().splitlines()) >= kill_after_rows:
            break
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _session_workers(proc.pid):
        time.sleep(0.2)
    left = _session_workers(proc.pid)
    for pid in _session(proc.pid):  # idle orphans (Ray's own actors): not ours to test
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not left, f"training workers outlived their raylet by 30 s: {left}"


def _session(sid: int) -> list[int]:
    """The live processes of this session (field 6 of /proc/PID/stat; zombies left out)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


def _session_workers(sid: int) -> list[int]:
    return [p for p in _session(sid) if "RayTrainWorker" in _cmdline(p)]


def rows(path: Path) -> list[dict]:
    out = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        out.append({k: v for k, v in row.items() if not k.startswith("time/")})
    return out


@pytest.mark.slow
def test_a_killed_run_resumes_to_the_same_checksum_and_metrics(tmp_path):
    run_cli(tmp_path / "plain", tmp_path / "ck-plain")
    plain = next((tmp_path / "plain").rglob("seed0.json"))

    # killed after step 3's row: the checkpoint of step 2 is complete, step 3 is lost
    run_cli(tmp_path / "resumed", tmp_path / "ck", kill_after_rows=3)
    # the orphaned worker stored nothing: the result is the resumed run's
    assert not list((tmp_path / "resumed").rglob("seed0.json"))
    assert list((tmp_path / "ck").rglob("step-000002")), "no checkpoint was kept"
    run_cli(tmp_path / "resumed", tmp_path / "ck")  # the same command again
    resumed = next((tmp_path / "resumed").rglob("seed0.json"))

    a, b = json.loads(plain.read_text()), json.loads(resumed.read_text())
    assert a["train"]["final_param_sha256"] == b["train"]["final_param_sha256"]
    assert rows(plain.with_suffix(".train.jsonl")) == rows(resumed.with_suffix(".train.jsonl"))
    assert [r["step"] for r in rows(resumed.with_suffix(".train.jsonl"))] == [1, 2, 3, 4, 5]
    assert a["metrics"] == b["metrics"]
    # the seed's checkpoints are removed once its result is stored
    assert not list((tmp_path / "ck").rglob("step-*"))


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@pytest.mark.slow
def test_a_killed_worker_is_restarted_from_the_last_checkpoint(tmp_path):
    import threading

    from harness import run as runs
    from harness.backend import start_ray, train_seed

    # resolved as every entry point resolves a run (its plugin loaded first)
    config = runs.resolve("smoke", {**TINY, "workers": 2, "zero_stage": 3, "max_failures": 1,
                                    "results_dir": str(tmp_path / "results"),
                                    "checkpoint_dir": str(tmp_path / "ck")}).config
    start_ray(num_cpus=2)
    killed: list[int] = []

    def kill_one_worker_after_the_checkpoint():
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not killed:
            logs = list((tmp_path / "results").rglob("seed0.train.jsonl.partial"))
            if logs and len(logs[0].read_text().splitlines()) >= 3 \
                    and list((tmp_path / "ck").rglob("step-000002")):
                workers = [p for p in _descendants(os.getpid())
                           if "RayTrainWorker" in _cmdline(p)]
                if workers:
                    os.kill(workers[-1], signal.SIGKILL)
                    killed.append(workers[-1])
            time.sleep(0.2)

    killer = threading.Thread(target=kill_one_worker_after_the_checkpoint, daemon=True)
    killer.start()
    path = train_seed(config)
    killer.join(timeout=1)
    assert killed, "no worker was killed"
    log = rows(path.with_suffix(".train.jsonl"))
    # resumed after step 2: every step once, in order, none lost and none repeated
    assert [r["step"] for r in log] == [1, 2, 3, 4, 5]
    data = json.loads(path.read_text())
    assert data["train"]["steps"] == 5 and data["config"]["training"]["workers"] == 2


def test_checkpoints_of_other_settings_are_never_resumed(tmp_path):
    from dataclasses import replace

    from harness.plugins import load_plugins
    from harness.seedrun import SETTINGS_FILE, SeedRun

    load_plugins((TOY,))
    config = resolve("smoke", {**TINY, "results_dir": str(tmp_path / "r"),
                               "checkpoint_dir": str(tmp_path / "ck")})
    run = SeedRun.of(config)
    folder = run.prepare_checkpoints()
    assert folder == run.checkpoints and folder.is_relative_to(tmp_path / "ck")
    assert SeedRun.of(config).prepare_checkpoints() == folder  # the same settings: resumable
    other = replace(config, training=replace(config.training, lr=0.5))
    assert SeedRun.of(other).checkpoints != folder  # another setting has its own folder anyway
    # a folder whose marker says otherwise (settings edited under the same name) is refused
    (folder / SETTINGS_FILE).write_text(json.dumps({"config_hash": "x", "workers": 1}))
    with pytest.raises(ValueError, match="checkpoints of other settings") as refused:
        run.prepare_checkpoints()
    # one condition, one message: the preflight's, which says the same before Ray starts
    from harness.preflight import checkpoint_problems
    from harness.run import of_config

    assert checkpoint_problems(of_config(config, (config.seed,))) == [str(refused.value)]
    assert "give another --checkpoint-dir" in str(refused.value)
    assert run.prepare_checkpoints(fresh=True) == folder  # --force starts afresh


def test_trainer_state_round_trips_rng_and_sampler(tmp_path):
    import random

    import numpy as np
    import torch

    from harness.checkpoints import state
    from harness.data import PromptSampler

    sampler = PromptSampler(7, seed=3)
    sampler.next(4)
    saved = state.rng_state()
    want = (random.random(), float(np.random.rand()), float(torch.rand(1)))
    state.set_rng_state(saved)
    assert (random.random(), float(np.random.rand()), float(torch.rand(1))) == want
    copy = PromptSampler(7, seed=99)
    copy.queue = list(json.loads(json.dumps(sampler.queue)))
    copy.rng.setstate(state._tupled(json.loads(json.dumps(state._jsonable(sampler.rng.getstate())))))
    assert copy.next(10) == sampler.next(10)
