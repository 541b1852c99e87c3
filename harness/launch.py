"""Running seeds of one config: what ``harness run`` does and ``reproduce`` does per cell.

Resolves paths to absolute ones (workers may run elsewhere), fails on unknown names and
missing data before anything slow starts, skips stored seeds (refusing ones stored with other
settings), prepares the embedded model once in the driver, starts Ray, trains the warm start
when the setting asks for it (cached), then trains and evaluates each missing seed.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from harness import config as cfg


def absolute(config: cfg.RunConfig) -> cfg.RunConfig:
    """Paths made absolute (workers may start elsewhere); a model name found under
    ``--model-dir`` becomes its folder."""
    from harness.models import EMBEDDED

    m = config.model
    if m.model_dir and m.model not in EMBEDDED and not Path(m.model).expanduser().is_dir():
        config = replace(config, model=replace(m, model=str(Path(m.model_dir).expanduser()
                                                            / m.model)))
    config = replace(config, results_dir=str(Path(config.results_dir).resolve()),
                     checkpoint_dir=str(Path(config.checkpoint_dir).resolve()))
    if config.task.data_dir:
        config = replace(config, task=replace(config.task,
                                              data_dir=str(Path(config.task.data_dir).resolve())))
    if Path(config.model.model).expanduser().is_dir():
        config = replace(config, model=replace(
            config.model, model=str(Path(config.model.model).expanduser().resolve())))
    return config


def validate(config: cfg.RunConfig) -> None:
    """Fail on every problem of the settings, options, output folders and data files before
    anything slow starts (``harness.preflight``): all listed together, each with its fix."""
    from harness.preflight import preflight

    preflight(config)


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
    from harness import assets
    from harness.backend import start_ray, train_seed

    if not seeds:
        return []
    # made again with the config classes as they are now: a config made before a plugin
    # registered its options is of an older class, which pickling to the workers refuses
    config = cfg.RunConfig.from_dict(config.to_dict())
    if config.model.model == assets.SMOLLM2_NAME:
        assets.prepare_smollm2()  # once, in the driver, before workers race for it
    start_ray(address=config.training.ray_address)
    if config.warmstart.warm_start:
        from harness.backend import warm_start

        log(f"warm start: {warm_start(config)}")
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
        path = train_seed(run.config, run)
        log(f"seed {s}: stored {path}")
        out.append(path)
    return out
