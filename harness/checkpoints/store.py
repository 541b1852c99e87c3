"""The Ray Train calls that write and find a seed's checkpoints.

``SeedRun.checkpoints`` (harness/seedrun.py: ``<checkpoint_dir>/<task>/<method>/<model>/
<setting>/seed<k>/``) is the Ray Train storage path of the seed's fit, under a fixed run name:
Ray Train keeps its registry of complete checkpoints there, prunes old ones
(``CheckpointConfig(num_to_keep=...)``) and, when a fit of the same name starts again in the
same storage, resumes it from the latest complete checkpoint. A file beside the run records the
settings' hash, so that checkpoints made with other settings are never resumed.
"""
from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Iterator

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

        from harness import orphan

        with tempfile.TemporaryDirectory(prefix="harness-ckpt-") as tmp:
            write(Path(tmp))
            orphan.check()  # a worker whose job was killed saves nothing
            ray.train.report({"step": step}, checkpoint=ray.train.Checkpoint.from_directory(tmp),
                             checkpoint_dir_name=f"step-{step:06d}")
