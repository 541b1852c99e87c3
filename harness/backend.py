"""Ray Train backend: one TorchTrainer per seed runs ``train_worker`` on N workers.

Ray start-up costs ~30 s, so the whole RL loop of a seed runs inside one ``fit``. Each worker
gets ``cpus // workers`` CPU threads; gloo on CPU, nccl on GPU (Ray Train sets up the process
group, DeepSpeed reuses it).
"""
from __future__ import annotations

import os
import tempfile
import uuid
from pathlib import Path

from harness.config import RunConfig


def _worker_entry(loop_config: dict) -> None:
    import torch

    from harness.progress import ray_bars
    from harness.trainer import train_worker

    torch.set_num_threads(loop_config["threads"])
    train_worker(RunConfig.from_dict(loop_config["config"]), progress_factory=ray_bars)


def start_ray(num_cpus: int | None = None) -> None:
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=num_cpus or os.cpu_count(), include_dashboard=False,
                 log_to_driver=True, configure_logging=True, logging_level="warning")


def train_seed(config: RunConfig) -> Path:
    """Train + evaluate one seed with Ray Train; returns the stored result's path."""
    import ray.train
    from ray.train.torch import TorchConfig, TorchTrainer

    from harness.plugins import load_plugins
    from harness.results import result_path

    load_plugins(config.plugins)  # the driver resolves result paths through the registries too
    t = config.training
    cpus = max(1, (os.cpu_count() or 1) // t.workers)
    storage = tempfile.mkdtemp(prefix="harness-ray-")
    trainer = TorchTrainer(
        _worker_entry,
        train_loop_config={"config": config.to_dict(), "threads": cpus},
        scaling_config=ray.train.ScalingConfig(
            num_workers=t.workers, use_gpu=t.use_gpu, resources_per_worker={"CPU": cpus}),
        torch_config=TorchConfig(backend="nccl" if t.use_gpu else "gloo"),
        # a unique name: reusing one in the same storage would resume the old run
        run_config=ray.train.RunConfig(name=f"harness-{uuid.uuid4().hex[:12]}",
                                       storage_path=storage),
    )
    trainer.fit()
    path = result_path(config)
    if not path.is_file():
        raise RuntimeError(f"training finished but {path} was not written; see the worker logs")
    return path
