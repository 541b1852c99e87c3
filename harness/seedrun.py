"""One seed of one setting, resolved once: its config, where its result and logs go, where its
checkpoints live, and the settings hash both are guarded by.

A seed's launch goes through one ``SeedRun``: ``launch`` makes it from the config, the backend
prepares its checkpoint folder and starts the fit with it, the workers write its files, and
the result is read back from it; nothing on that path derives a folder or a hash again.
"""
from __future__ import annotations

import json
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness.config import RunConfig

SETTINGS_FILE = "settings.json"  # beside a seed's checkpoints: the settings that wrote them
RUN_NAME = "train"  # Ray Train's run name inside the checkpoint folder (fixed: it resumes)
# beside a seed's checkpoints: the code it started under and each resume's (harness.provenance)
PROVENANCE_FILE = "provenance.json"


@dataclass(frozen=True)
class SeedRun:
    config: RunConfig
    folder: Path  # <results>/<task>/<method>/<model>/<setting>
    checkpoints: Path  # <checkpoint_dir>/<task>/<method>/<model>/<setting>/seed<k>
    config_hash: str  # harness.results.config_hash(config)

    @staticmethod
    def of_seed(config: RunConfig, seed: int) -> "SeedRun":
        """Seed ``seed`` of this setting."""
        from dataclasses import replace

        return SeedRun.of(replace(config, seed=seed))

    @staticmethod
    def of(config: RunConfig, train_set=None) -> "SeedRun":
        """``train_set``: the one the run chose (default: the one its settings name)."""
        from harness.results import config_hash, run_dir

        folder = run_dir(config, train_set)
        relative = folder.relative_to(Path(config.results_dir))
        return SeedRun(config, folder,
                       Path(config.checkpoint_dir).resolve() / relative / f"seed{config.seed}",
                       config_hash(config))

    @property
    def result(self) -> Path:
        """The result JSON: written last, it marks the seed as done."""
        return self.folder / f"seed{self.config.seed}.json"

    @property
    def train_log(self) -> Path:
        """The per-step log stored beside the result."""
        return self.result.with_suffix(".train.jsonl")

    @property
    def partial_log(self) -> Path:
        """The per-step log while the seed trains (renamed beside the result when it is
        stored, so a killed run never leaves a new log beside an old result)."""
        return self.result.with_suffix(".train.jsonl.partial")

    # --- checkpoints -------------------------------------------------------------------------
    def prepare_checkpoints(self, fresh: bool = False) -> Path:
        """The checkpoint folder, checked against the settings that wrote it: removed first
        when ``fresh`` (a forced rerun starts from step 0); ValueError when another setting
        made it."""
        if fresh:
            self.clear_checkpoints()
        marker = self.checkpoints / SETTINGS_FILE
        problem = self.checkpoint_problem()
        if problem:  # the preflight's own message: a direct caller that skipped it
            raise ValueError(problem)
        if not marker.is_file():
            self.checkpoints.mkdir(parents=True, exist_ok=True)
            marker.write_text(json.dumps(self._checkpoint_settings()))
        return self.checkpoints

    def _checkpoint_settings(self) -> dict:
        return {"config_hash": self.config_hash, "workers": self.config.training.workers}

    def checkpoint_problem(self) -> str | None:
        """The one message for a checkpoint folder that other settings wrote (None: none, or
        this run's own); ``harness.preflight`` reports it before Ray starts."""
        marker = self.checkpoints / SETTINGS_FILE
        if not marker.is_file():
            return None
        try:
            theirs = json.loads(marker.read_text())
        except (OSError, ValueError):
            theirs = None
        ours = self._checkpoint_settings()
        if theirs == ours:
            return None
        return (f"{self.checkpoints} holds checkpoints of other settings ({theirs}, this "
                f"run's {ours}); delete it, or give another --checkpoint-dir")

    # --- provenance --------------------------------------------------------------------------
    def record_start(self, threads: int | None = None) -> dict:
        """Record this tree's provenance beside the checkpoints: as the seed's start, or, when
        a checkpoint of an earlier start is there to resume from, as one more resume of it
        (``threads``: the torch threads each worker computes with)."""
        from harness import provenance
        from harness.results import atomic_write_json

        now = provenance.current(plugins=self.config.plugins, threads=threads)
        path = self.checkpoints / PROVENANCE_FILE
        if path.is_file() and self.saved_steps():
            record = json.loads(path.read_text())
            record["resumed"] = [*record.get("resumed", []), now]
        else:  # nothing to resume: this is the start
            record = dict(now)
        self.checkpoints.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, record)
        return record

    def provenance(self) -> dict:
        """The code this seed ran under (its start, with any resume under other code named):
        what its result stores; this tree's when no start was recorded (in-process runs)."""
        from harness import provenance

        path = self.checkpoints / PROVENANCE_FILE
        if path.is_file():
            return provenance.effective(json.loads(path.read_text()))
        return provenance.current(plugins=self.config.plugins)

    def clear_checkpoints(self) -> None:
        # Ray Train may still be pruning an old checkpoint in this folder as the fit returns,
        # so one pass can race with it and leave a folder behind: retry until it is gone
        for _ in range(20):
            shutil.rmtree(self.checkpoints, ignore_errors=True)
            if not self.checkpoints.exists():
                return
            time.sleep(0.25)
        try:
            shutil.rmtree(self.checkpoints)
        except OSError as exc:  # the result is stored; a leftover folder costs only disk
            print(f"warning: could not remove the checkpoints in {self.checkpoints}: {exc}",
                  file=sys.stderr)

    def saved_steps(self) -> list[int]:
        """Steps whose checkpoint folders exist (the newest may be incomplete: Ray Train, not
        this list, decides which one is resumed)."""
        run = self.checkpoints / RUN_NAME
        if not run.is_dir():
            return []
        return sorted(int(p.name.split("-")[1]) for p in run.glob("step-*") if p.is_dir()
                      and p.name.split("-")[1].isdigit())
