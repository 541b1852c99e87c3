"""Running seeds of one config: what ``harness run`` does and ``reproduce`` does per cell.

Given a resolved run (``harness.run.Run``, already checked by ``harness.preflight``): skips
stored seeds (refusing ones stored with other settings, naming ones made by other code),
prepares the embedded model once in the driver, starts Ray, trains the warm start when the
setting asks for it (cached), then trains and evaluates each missing seed.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path


def validate(run) -> None:
    """Fail on every problem of the resolved run (``harness.run.Run``: settings, options,
    output folders, model and data) before anything slow starts: ``harness.preflight.check``,
    the check its dry run prints."""
    from harness.preflight import check

    check(run)


def stale_seeds(run) -> dict[int, str]:
    """Stored seeds (of any benchmark of the run) made by other code than this tree's: seed ->
    its fingerprint (``compare`` and the tables refuse to pool them with this code's)."""
    from harness.results import stored_fingerprints

    out: dict[int, str] = {}
    for s, theirs in stored_fingerprints(run.files).values():
        if theirs != run.fingerprint:
            out.setdefault(s, theirs)
    return out


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a seed: its message names what a rerun of the same command resumes."""


def interrupted_text(run) -> str:
    """One line: where the interrupted seed stands and that the same command goes on."""
    steps = run.saved_steps()
    if steps:
        return (f"interrupted: seed {run.config.seed} has checkpoints of steps {steps} in "
                f"{run.checkpoints}; the same command resumes from the latest complete one "
                "(stored seeds are kept)")
    every = run.config.training.save_every
    saving = (f"no checkpoint was saved yet (--save-every {every})" if every else
              "no checkpoint is saved without --save-every N")
    return (f"interrupted: seed {run.config.seed} stored nothing and {saving}; the same "
            "command starts it again (stored seeds are kept)")


def pending_seeds(run, seeds: list[int] | None = None) -> list[int]:
    """The seeds to run (of ``seeds``, default: the run's): those missing a result on any
    benchmark of the run (``--task``, then ``--also-evaluate``'s), or all with ``force``; stored
    ones are checked against the requested settings."""
    from harness.results import check_stored

    wanted = run.seeds if seeds is None else seeds
    if run.force:
        return list(wanted)
    missing: set[int] = set()
    for seed_run in (r for files in run.files for r in files if r.config.seed in wanted):
        if seed_run.result.is_file():
            check_stored(seed_run.config, seed_run.result)
        else:
            missing.add(seed_run.config.seed)
    return [s for s in wanted if s in missing]


def still_missing(run, k: int, force: bool = False):
    """The ``k``-th seed's files (``SeedRun``) with the config its workers train: evaluating
    only the benchmarks it has no result for (a stored result is never replaced without
    --force); all of them when every one is stored or ``force`` (a forced rerun)."""
    files = [each[k] for each in run.files]
    config = replace(run.config, seed=run.seeds[k])
    todo = [r for r in files if force or not r.result.is_file()]
    if not todo or len(todo) == len(files):
        return replace(files[0], config=config)
    names = [r.config.task.task for r in todo]
    return replace(todo[0], config=replace(config, task=replace(
        config.task, task=names[0], also_evaluate=",".join(names[1:]))))


def run_seeds(run, seeds: list[int], log=print, force: bool = False) -> list[Path]:
    """Train and evaluate these seeds of the run (no check of what is stored: see
    ``pending_seeds``); ``force``: evaluate every benchmark again, stored or not."""
    from harness import assets, startup
    from harness.backend import start_ray, train_seed

    config = run.config
    if not seeds:
        return []
    if config.model.model == assets.SMOLLM2_NAME:
        assets.prepare_smollm2()  # once, in the driver, before workers race for it
    startup.mark("model_prepared")
    start_ray(address=config.training.ray_address)
    startup.mark("ray_started")
    if config.warmstart.warm_start:
        from harness.backend import warm_start

        log(f"warm start: {warm_start(run)}")
        startup.mark("warm_start_ready")
    out = []
    for s in seeds:
        seed_run = still_missing(run, run.seeds.index(s), force)  # resolved with the run
        found = seed_run.saved_steps()
        if found:
            log(f"seed {s}: checkpoints of steps {found} found; Ray Train resumes from the "
                "latest complete one")
        try:
            path = train_seed(seed_run.config, seed_run)
        except KeyboardInterrupt:
            raise Interrupted(interrupted_text(seed_run)) from None
        log(f"seed {s}: stored {path}")
        out.append(path)
    return out
