"""Where a seed's checkpoints live, and the Ray Train calls that write and find them.

``<checkpoint_dir>/<task>/<method>/<model>/<setting>/seed<k>/`` is the Ray Train storage path
of the seed's fit, under a fixed run name: Ray Train keeps its registry of complete checkpoints
there, prunes old ones (``CheckpointConfig(num_to_keep=...)``) and, when a fit of the same name
starts again in the same storage, resumes it from the latest complete checkpoint. A file beside
the run records the settings' hash, so that checkpoints made with other settings are never
resumed.
"""
from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

from harness.config import RunConfig

RUN_NAME = "train"
SETTINGS_FILE = "settings.json"


def seed_folder(config: RunConfig) -> Path:
    from harness.results import run_dir

    relative = run_dir(config).relative_to(Path(config.results_dir))
    return Path(config.checkpoint_dir).resolve() / relative / f"seed{config.seed}"


def prepare(config: RunConfig, fresh: bool = False) -> Path:
    """The seed's storage folder, checked against the settings that wrote it: removed first
    when ``fresh`` (a forced rerun starts from step 0); ValueError when another setting made
    it."""
    from harness.results import config_hash

    folder = seed_folder(config)
    if fresh:
        clear(config)
    marker = folder / SETTINGS_FILE
    ours = {"config_hash": config_hash(config), "workers": config.training.workers}
    if marker.is_file():
        theirs = json.loads(marker.read_text())
        if theirs != ours:
            raise ValueError(f"{folder} holds checkpoints of other settings ({theirs}, ours "
                             f"{ours}); delete it, or rerun with --force to start afresh")
    else:
        folder.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps(ours))
    return folder


def clear(config: RunConfig) -> None:
    shutil.rmtree(seed_folder(config), ignore_errors=True)


def saved_steps(config: RunConfig) -> list[int]:
    """Steps whose checkpoint folders exist for this seed (the newest may be incomplete: Ray
    Train, not this list, decides which one is resumed)."""
    run = seed_folder(config) / RUN_NAME
    if not run.is_dir():
        return []
    return sorted(int(p.name.split("-")[1]) for p in run.glob("step-*") if p.is_dir()
                  and p.name.split("-")[1].isdigit())


class RayCheckpointer:
    """Inside a Ray Train worker: the latest checkpoint to resume from, and saving one."""

    @contextlib.contextmanager
    def latest(self) -> Iterator[Path | None]:
        import ray.train

        checkpoint = ray.train.get_checkpoint()
        if checkpoint is None:
            yield None
            return
        with checkpoint.as_directory() as folder:
            yield Path(folder)

    def save(self, step: int, write) -> None:
        """``write(folder)`` puts this rank's files in a local folder; Ray Train merges every
        rank's into one checkpoint and registers it once all have reported."""
        import ray.train

        with tempfile.TemporaryDirectory(prefix="harness-ckpt-") as tmp:
            write(Path(tmp))
            ray.train.report({"step": step}, checkpoint=ray.train.Checkpoint.from_directory(tmp),
                             checkpoint_dir_name=f"step-{step:06d}")
