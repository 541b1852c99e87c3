"""A run resolved once: every entry point (``run``, ``sft``, each ``reproduce`` cell, the dry
run, ``harness.api``, the workers) builds its :class:`Run` here and checks that one object with
``harness.preflight.problems``, before Ray starts.

``resolve`` loads the run's plugins, applies defaults -> preset -> overrides (flags or API
keywords, TRL's names too), makes paths absolute, and looks every name up once: the method, the
task with its family options, the rollout engine, the training set and where it is read from,
the benchmarks and each seed's files. Names or values that cannot be resolved raise one
``PreflightError`` listing all of them; what the resolved run would fail on is the check's.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from common.registry import did_you_mean
from harness import config as cfg
from harness.preflight import PreflightError


@dataclass(frozen=True)
class Run:
    """One resolved run: what every entry point uses and the check inspects."""

    config: cfg.RunConfig  # defaults -> preset -> overrides; paths absolute; seed: the first
    method: Any  # methods.Method (a composition resolved)
    task: Any  # tasks.base.Task with the family options applied
    engine: Any  # harness.rollouts.EngineEntry
    train_set: Any  # tasks.base.TrainSet, or None when it cannot be read (train_problem says)
    train_problem: str | None  # why the training set cannot be read, with the fix
    # each benchmark the one training is evaluated on (--task, then --also-evaluate's): the
    # config a run of it alone would have, and its task (an unknown one: left to the check)
    evaluated: tuple[tuple[cfg.RunConfig, Any], ...] = ()
    seeds: tuple[int, ...] = (0,)
    force: bool = False  # rerun stored seeds
    rerun_stale: bool = False  # rerun stored seeds made by other code than this tree
    allow_mixed_code: bool = False  # pool stored seeds of other code (footnoted)
    purpose: str = "run"  # "run" (RL, evaluated), "sft" (the warm start alone)

    @property
    def options(self) -> Any:
        """The method's options object (every registered option, this run's values)."""
        return self.config.method.options()

    @property
    def benchmarks(self) -> tuple[cfg.RunConfig, ...]:
        """One config per benchmark evaluated after the one training (``--also-evaluate``)."""
        return tuple(cfg.evaluations(self.config))

    @property
    def training_line(self) -> str:
        """The run's first line: the training set, where it is read from, and what the run
        trains on it (RL steps, or the warm start's)."""
        ts, c = self.train_set, self.config
        source = ("none" if ts is None else f"{ts.name}, read from {c.task.data_dir}"
                  if ts.needs_data_dir else f"{ts.name} (offline generator)")
        if self.purpose == "sft":
            ws = c.warmstart
            what = (f"a warm start of {ws.warm_start_steps} steps of {ws.warm_start_batch} "
                    "demonstrations")
        else:
            what = (f"{c.training.steps} steps of {c.rollout.prompts_per_step} prompts x "
                    f"{c.rollout.group_size} responses")
        return f"training set: {source}; {what}"

    @property
    def untrained_note(self) -> str:
        """What the run says before it starts when its preset starts from the untrained model
        and a warm start exists for its training set but is not asked for ('' otherwise)."""
        from harness.presets import PRESETS

        preset = PRESETS.get(self.config.preset) if self.config.preset in PRESETS else None
        if (preset is None or not preset.untrained or self.config.warmstart.warm_start
                or self.train_set is None or self.train_set.demonstration is None
                or self.config.training.steps == 0):
            return ""
        return (f"note: preset {self.config.preset} starts from the untrained model, which "
                f"rarely writes the {self.task.family} response layout: its rewards seldom vary "
                "within a group, and a step without that trains nothing (every committed smoke "
                "BFCL run had loss 0 at every step); --warm-start (the smoke-learn "
                "preset) first fine-tunes it on the training set's reference answers")

    def seed_runs(self, benchmark: cfg.RunConfig | None = None) -> list:
        """Each seed's ``SeedRun`` (files, checkpoints, hash) for one benchmark (the first)."""
        from harness.seedrun import SeedRun

        config = benchmark or self.config
        return [SeedRun.of_seed(config, s) for s in self.seeds]


def resolve(preset: str = "smoke", overrides: dict[str, Any] | None = None,
            seeds: Sequence[int] = (0,), force: bool = False, purpose: str = "run",
            **flags: bool) -> Run:
    """The one resolution of a run (see the module's docstring)."""
    overrides = dict(overrides or {})
    plugins(tuple(overrides.get("plugins", ())))
    problems = name_problems(overrides)
    from harness.presets import PRESETS

    if preset not in PRESETS:
        problems.append(PRESETS.unknown_message(preset))
    if problems:
        raise PreflightError(problems)
    config = absolute(cfg.resolve(preset, overrides))
    return of_config(config, seeds, force, purpose, **flags)


def of_config(config: cfg.RunConfig, seeds: Sequence[int] = (0,), force: bool = False,
              purpose: str = "run", rerun_stale: bool = False,
              allow_mixed_code: bool = False) -> Run:
    """A ``Run`` of a config already made (a stored one, a reproduce cell's, a worker's)."""
    import methods
    from harness.checks import type_problems
    from harness.data import choose_train_set
    from harness.rollouts import ENGINES
    from tasks import TASKS

    plugins(config.plugins)
    problems = type_problems(config)  # then no check compares a number that is a string
    method = task = engine = None
    try:
        method = methods.get(config.method.method)
    except (KeyError, ValueError) as exc:
        problems.append(f"--method: {exc}{plugin_hint(config.method.method, config.plugins)}")
    try:
        task = TASKS.get(config.task.task).configured(config.task)
    except KeyError as exc:
        problems.append(f"--task: {exc}")
    try:
        engine = ENGINES.get(config.rollout.engine)
    except KeyError as exc:
        problems.append(f"--engine: {exc}")
    if problems:
        raise PreflightError(problems)
    evaluated = tuple((c, TASKS.get(c.task.task).configured(c.task))
                      for c in cfg.evaluations(config) if c.task.task in TASKS)
    train_set, train_problem = None, None
    try:
        train_set = choose_train_set(config)
    except (KeyError, ValueError) as exc:
        train_problem = f"training set: {exc}"
    return Run(config=config, method=method, task=task, engine=engine, train_set=train_set,
               train_problem=train_problem, evaluated=evaluated, seeds=tuple(seeds), force=force,
               rerun_stale=rerun_stale, allow_mixed_code=allow_mixed_code, purpose=purpose)


def plugins(entries: Sequence[str]) -> None:
    """Load the run's plugins (once each) before any of its names is looked up; a plugin that
    fails is one problem naming its file and line."""
    from harness.plugins import PluginError, load_plugins

    try:
        load_plugins(tuple(entries))
    except PluginError as exc:
        raise PreflightError([str(exc)], "a plugin cannot be loaded") from None


def from_stored(data: dict) -> Run:
    """A worker's ``Run``: the stored config (``harness.results.stored_config``) through the
    same resolution, its plugins loaded first."""
    plugins(tuple(data.get("plugins", ())))
    config = cfg.RunConfig.from_dict(data)
    return of_config(config, (config.seed,))


def absolute(config: cfg.RunConfig) -> cfg.RunConfig:
    """Paths made absolute (workers may start elsewhere); a model name found under
    ``--model-dir`` becomes its folder."""
    from harness.models import EMBEDDED

    m = config.model
    if m.model_dir and m.model not in EMBEDDED and not Path(m.model).expanduser().is_dir():
        config = replace(config, model=replace(m, model=str(Path(m.model_dir).expanduser()
                                                            / m.model)))
    config = replace(config, results_dir=str(Path(config.results_dir).expanduser().resolve()),
                     checkpoint_dir=str(Path(config.checkpoint_dir).expanduser().resolve()))
    if config.task.data_dir:
        config = replace(config, task=replace(config.task, data_dir=str(
            Path(config.task.data_dir).expanduser().resolve())))
    if Path(config.model.model).expanduser().is_dir():
        config = replace(config, model=replace(
            config.model, model=str(Path(config.model.model).expanduser().resolve())))
    return config


def name_problems(overrides: dict[str, Any]) -> list[str]:
    """Keywords that name no config field: each with the field it probably means."""
    known = cfg.all_fields()
    names = set(known) | set(cfg.aliases())
    return [f"unknown setting {key!r}{did_you_mean(key, names)}" for key in overrides
            if key not in names]


def plugin_hint(name: str, plugins: Sequence[str]) -> str:
    """An unknown method may be a plugin's: say how to load one."""
    if "+" in name or plugins:
        return ""
    return (" (a method of your own is registered by a plugin file: --plugin FILE.py, "
            "docs/extending.md)")
