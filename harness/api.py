"""The Python entry point: what ``harness run`` does, callable from a notebook.

    from harness import api

    run = api.config(method="mrtpo", task="bfcl", steps=2)       # resolved and checked
    results = api.run(method="gdpo", task="bfcl", seeds=1, preset="smoke", steps=2)
    results[0]["metrics"], results[0]["files"]["train_log"]     # the seed's evaluation, files
    seeds, steps = api.load("runs/bfcl")                         # pandas: one row per seed, step

Keyword fields are the CLI's flags with underscores (``group_size=8`` for ``--group-size 8``),
TRL's names too (``num_generations=8``, ``learning_rate=1e-6``); an unknown one is named with
the field it probably means. ``config`` and ``run`` resolve through the CLI's one resolution
(``harness.run.resolve``) and raise the CLI's ``PreflightError`` from the same check
(``harness.preflight``) before Ray starts; ``run`` skips seeds already stored and returns each
seed's stored result (the contents of its ``seedK.json``) with its ``files`` and ``setting``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from harness import config as cfg


def resolve(method: str, task: str, seeds: Sequence[int] = (0,), preset: str = "smoke",
            force: bool = False, **fields: Any):
    """The checked ``harness.run.Run`` (what ``run`` acts on); ``PreflightError`` lists every
    problem."""
    from harness import run as runs
    from harness.preflight import check

    run = runs.resolve(preset, {**fields, "method": method, "task": task}, seeds, force)
    check(run)
    return run


def config(method: str, task: str, preset: str = "smoke", **fields: Any) -> cfg.RunConfig:
    """The resolved, checked, frozen run config (defaults -> ``preset`` -> ``fields``); paths
    absolute. Raises ``PreflightError`` as ``run`` (and the CLI) would, before anything runs."""
    return resolve(method, task, preset=preset, **fields).config


def run(method: str, task: str, seeds: int | Sequence[int] = 1, preset: str = "smoke",
        force: bool = False, **fields: Any) -> list[dict]:
    """Train and evaluate seeds (``seeds``: a count, 0..N-1, or the seeds themselves) and
    return their stored results in that order, each with ``files`` (result, train_log,
    predictions, folder) and ``setting`` (the folder's name); stored seeds are not rerun
    unless ``force``."""
    from harness.launch import pending_seeds, run_seeds

    counted = isinstance(seeds, int) and not isinstance(seeds, bool)
    chosen = list(range(seeds)) if counted else \
        [] if isinstance(seeds, (str, bytes)) else list(seeds)
    if not chosen or not all(isinstance(s, int) and not isinstance(s, bool) for s in chosen) \
            or min(chosen) < 0 or len(set(chosen)) != len(chosen):
        raise ValueError(f"seeds {seeds!r}: give a count >= 1 (seeds=3: seeds 0, 1, 2) or "
                         "distinct integer seeds >= 0 (seeds=[0, 2])")
    checked = resolve(method, task, chosen, preset, force, **fields)
    run_seeds(checked, pending_seeds(checked), force=force)
    return [with_files(seed_run) for seed_run in checked.seed_runs()]


def with_files(seed_run) -> dict:
    """A seed's stored result with where its files are."""
    from harness.results import load_result

    out = load_result(seed_run.result)
    out["files"] = {"result": str(seed_run.result), "train_log": str(seed_run.train_log),
                    "predictions": str(seed_run.result.with_suffix(".predictions.jsonl")),
                    "folder": str(seed_run.folder)}
    out["setting"] = seed_run.folder.name
    return out


def load(*roots: str | Path):
    """Every stored seed under these folders (a results folder, a task's, one setting's) as
    two pandas DataFrames: ``seeds`` (one row per seed: task, method, model, setting, seed,
    config_hash, fingerprint, its metrics, its files) and ``steps`` (one row per training step
    of each seed, from its ``seedK.train.jsonl``, with the same keys)."""
    import pandas as pd

    from harness import provenance
    from harness.results import load_result, read_train_log

    seeds, steps = [], []
    for root in roots:
        root = Path(root)
        for path in sorted(root.rglob("seed*.json")) if root.is_dir() else [root]:
            if not path.name[4:-5].isdigit():
                continue
            data = load_result(path)
            key = {"task": data["task"], "method": data["method"], "model": data["model"],
                   "setting": path.parent.name, "seed": data["seed"],
                   "config_hash": data.get("config_hash"),
                   "fingerprint": provenance.of_result(data)["fingerprint"]}
            log = path.with_suffix(".train.jsonl")
            seeds.append({**key, **data["metrics"], "result": str(path),
                          "train_log": str(log) if log.is_file() else None})
            if log.is_file():
                steps += [{**key, **row} for row in read_train_log(log)]
    return pd.DataFrame(seeds), pd.DataFrame(steps)
