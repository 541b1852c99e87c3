"""Running seeds of one config: what ``harness run`` does and ``reproduce`` does per cell.

Given a resolved run (``harness.run.Run``, already checked by ``harness.preflight``): skips
stored seeds (refusing ones stored with other settings, naming ones made by other code),
prepares the embedded model once in the driver, starts Ray, trains the warm start when the
setting asks for it (cached), then trains and evaluates each missing seed.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from harness import config as cfg


def validate(run) -> None:
    """Fail on every problem of the resolved run (``harness.run.Run``: settings, options,
    output folders, model and data) before anything slow starts: ``harness.preflight.check``,
    the check its dry run prints."""
    from harness.preflight import check

    check(run)


def stale_seeds(config: cfg.RunConfig, seeds: list[int]) -> dict[int, str]:
    """Stored seeds (of any benchmark of the run) made by other code than this tree's: seed ->
    its fingerprint (``compare`` and the tables refuse to pool them with this code's)."""
    from harness import provenance
    from harness.results import stored_fingerprints

    ours = provenance.current(plugins=config.plugins)["fingerprint"]
    out: dict[int, str] = {}
    for s, theirs in stored_fingerprints(config, seeds).values():
        if theirs != ours:
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


def pending_seeds(config: cfg.RunConfig, seeds: list[int], force: bool = False) -> list[int]:
    """The seeds to run: those missing a result on any benchmark of the run (``--task``, then
    ``--also-evaluate``'s); stored ones are checked against the requested settings."""
    from harness.results import check_stored, stored_seeds

    missing: set[int] = set()
    for c in cfg.evaluations(config):
        stored = stored_seeds(c)
        for s in seeds:
            if s in stored and not force:
                check_stored(replace(c, seed=s), stored[s])
        missing |= {s for s in seeds if s not in stored}
    return [s for s in seeds if force or s in missing]


def still_missing(config: cfg.RunConfig) -> cfg.RunConfig:
    """A seed's config evaluating only the benchmarks it has no result for (a stored result is
    never replaced without --force); all of them when every one is stored (a forced rerun)."""
    from harness.results import result_path

    todo = [c.task.task for c in cfg.evaluations(config) if not result_path(c).is_file()]
    if not todo or len(todo) == len(cfg.benchmarks(config)):
        return config
    return replace(config, task=replace(config.task, task=todo[0],
                                        also_evaluate=",".join(todo[1:])))


def run_seeds(config: cfg.RunConfig, seeds: list[int], log=print, force: bool = False
              ) -> list[Path]:
    """Train and evaluate these seeds (no check of what is stored: see ``pending_seeds``);
    ``force``: evaluate every benchmark again, stored or not."""
    from harness import assets, startup
    from harness.backend import start_ray, train_seed

    if not seeds:
        return []
    if config.model.model == assets.SMOLLM2_NAME:
        assets.prepare_smollm2()  # once, in the driver, before workers race for it
    startup.mark("model_prepared")
    start_ray(address=config.training.ray_address)
    startup.mark("ray_started")
    if config.warmstart.warm_start:
        from harness.backend import warm_start

        log(f"warm start: {warm_start(config)}")
        startup.mark("warm_start_ready")
    from harness.seedrun import SeedRun

    out = []
    for s in seeds:
        # its folders and settings hash, once
        seed_config = replace(config, seed=s)
        run = SeedRun.of(seed_config if force else still_missing(seed_config))
        found = run.saved_steps()
        if found:
            log(f"seed {s}: checkpoints of steps {found} found; Ray Train resumes from the "
                "latest complete one")
        try:
            path = train_seed(run.config, run)
        except KeyboardInterrupt:
            raise Interrupted(interrupted_text(run)) from None
        log(f"seed {s}: stored {path}")
        out.append(path)
    return out
