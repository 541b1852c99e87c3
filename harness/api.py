"""The Python entry point: what ``python -m harness run`` does, callable from a notebook.

    from harness import api

    cfg = api.config(method="mrtpo", task="bfcl", steps=2)      # resolved, nothing runs
    results = api.run(method="gdpo", task="bfcl", seeds=1, preset="smoke", steps=2)
    results[0]["metrics"]                                       # the seed's evaluation

Keyword fields are the CLI's flags with underscores (``group_size=8`` for ``--group-size 8``).
A run passes the same checks as the CLI before Ray starts (``harness.preflight``: a
``PreflightError`` lists every problem), skips seeds already stored and returns each seed's
stored result (the contents of its ``seedK.json``).
"""
from __future__ import annotations

from typing import Any, Sequence

from harness import config as cfg


def config(method: str, task: str, preset: str = "smoke", **fields: Any) -> cfg.RunConfig:
    """The resolved, frozen run config (defaults -> ``preset`` -> ``fields``); paths absolute."""
    from harness.launch import absolute
    from harness.plugins import load_plugins

    if "plugins" in fields:
        load_plugins(tuple(fields["plugins"]))  # a plugin's method or task must be known
    return absolute(cfg.resolve(preset, {**fields, "method": method, "task": task}))


def run(method: str, task: str, seeds: int | Sequence[int] = 1, preset: str = "smoke",
        force: bool = False, **fields: Any) -> list[dict]:
    """Train and evaluate seeds (``seeds``: a count, 0..N-1, or the seeds themselves) and
    return their stored results in that order; stored seeds are not rerun unless ``force``."""
    from harness.launch import pending_seeds, run_seeds, validate
    from harness.results import load_result
    from harness.seedrun import SeedRun

    chosen = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    if not chosen or min(chosen) < 0 or len(set(chosen)) != len(chosen):
        raise ValueError(f"seeds {seeds!r}: give a count >= 1 or distinct seeds >= 0")
    run_config = config(method, task, preset, **fields)
    validate(run_config)
    run_seeds(run_config, pending_seeds(run_config, chosen, force), force=force)
    return [load_result(SeedRun.of_seed(run_config, s).result) for s in chosen]
