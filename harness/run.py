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

from dataclasses import dataclass, fields, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Sequence

from common.registry import did_you_mean
from harness import config as cfg
from harness.autovalues import auto_values
from harness.method_config import foreign_method_options
from harness.task_config import foreign_family_options
from harness.preflight import PreflightError
from harness.seedrun import SeedRun


@dataclass(frozen=True)
class Run:
    """One resolved run: what every entry point uses, the check inspects and the layers below
    read. Each name is looked up here, once (after it, ``common.registry.sealed`` holds in
    tests); what depends on the registries is computed here too."""

    config: cfg.RunConfig  # defaults -> preset -> overrides; paths absolute; seed: the first
    method: Any  # methods.Method (a composition resolved)
    task: Any  # tasks.base.Task with the family options applied
    engine: Any  # harness.rollouts.EngineEntry
    train_set: Any  # tasks.base.TrainSet, or None when it cannot be read (train_problem says)
    train_problem: str | None  # why the training set cannot be read, with the fix
    preset: Any = None  # harness.presets.Preset
    reference: Any = None  # the preset's own config (paths absolute): what "changed" means
    foreign: tuple[str, ...] = ()  # options given for a method, family or engine not this run's
    # each benchmark the one training is evaluated on (--task, then --also-evaluate's): the
    # config a run of it alone would have, its task (None: unknown, the check says) and the
    # name of the training set it would choose (or why none)
    evaluated: tuple[tuple[cfg.RunConfig, Any, str], ...] = ()
    # per known benchmark, each seed's SeedRun (folders, checkpoints, settings hash), named by
    # the training set chosen (or, unreadable, by the one the settings name)
    files: tuple[tuple, ...] = ()
    seeds: tuple[int, ...] = (0,)
    force: bool = False  # rerun stored seeds
    rerun_stale: bool = False  # rerun stored seeds made by other code than this tree
    allow_mixed_code: bool = False  # pool stored seeds of other code (footnoted)
    purpose: str = "run"  # "run" (RL, evaluated), "sft" (the warm start alone)

    @property
    def options(self) -> Any:
        """The method's options object (its own options, this run's values)."""
        return self.config.method.options

    @property
    def family_options(self) -> Any:
        """The task family's options object (this run's values; an empty one for BFCL)."""
        return self.config.task.options

    @property
    def benchmarks(self) -> tuple[cfg.RunConfig, ...]:
        """One config per benchmark evaluated after the one training (``--also-evaluate``)."""
        return tuple(c for c, _, _ in self.evaluated)

    def seed_runs(self, benchmark: int = 0) -> tuple:
        """Each seed's ``SeedRun`` (files, checkpoints, hash) for one benchmark (the first)."""
        return self.files[benchmark] if self.files else ()

    @cached_property
    def demonstrations(self) -> list:
        """The warm start's (prompt, reference answer) pairs (``harness.warmstart.data``)."""
        from harness.warmstart.data import demonstrations

        return demonstrations(self)

    @cached_property
    def warm_start_folder(self) -> Path:
        """Where its warm-started model is cached (named by the demonstrations' content)."""
        from harness.warmstart.cache import folder
        from harness.warmstart.data import content_hash

        return folder(self, content_hash(self.demonstrations))

    @cached_property
    def fingerprint(self) -> str:
        """The code this tree runs (``harness.provenance``), its plugins included."""
        from harness import provenance

        return provenance.current(plugins=self.config.plugins)["fingerprint"]

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
        if (not self.preset.untrained or self.config.warmstart.warm_start
                or self.train_set is None or self.train_set.demonstration is None
                or self.config.training.steps == 0):
            return ""
        return (f"note: preset {self.config.preset} starts from the untrained model, which "
                f"rarely writes the {self.task.family} response layout: its rewards seldom vary "
                "within a group, and a step without that trains nothing (every committed smoke "
                "BFCL run had loss 0 at every step); --warm-start (the smoke-learn "
                "preset) first fine-tunes it on the training set's reference answers")


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
    # options of another method (task family) than the run's: a problem the check lists, not
    # a value
    base = cfg.resolve(preset, {})
    method = overrides.get("method") or base.method.method
    task = str(overrides.get("task") or base.task.task).partition(",")[0].strip()
    names = {k: cfg.aliases().get(k, k) for k in overrides}
    foreign = {**foreign_method_options(method, names.values()),
               **foreign_family_options(task, names.values())}
    config = absolute(cfg.resolve(preset, {k: v for k, v in overrides.items()
                                           if names[k] not in foreign}))
    found = tuple(foreign.values()) + tuple(p for p in [reference_results_problem(
        overrides.get("results_dir"))] if p)
    return of_config(config, seeds, force, purpose, foreign=found, **flags)


def reference_results_problem(results_dir) -> str | None:
    """A run (``run``, the API) told to store into the results committed with the project,
    which ``reproduce`` alone remakes, all at once on one code version; None otherwise."""
    from common.paths import folder_problem
    from harness.assets import PROJECT_ROOT

    if results_dir is None:
        return None
    if str(results_dir).strip() == "":  # the check's own message (the config makes it absolute)
        return folder_problem(results_dir, "--results-dir")
    reference = PROJECT_ROOT / "results"
    if Path(results_dir).expanduser().absolute().resolve() == reference.resolve():
        return (f"--results-dir {results_dir}: that folder holds the reference results "
                "committed with the project, which ./reproduce.sh remakes; store this run "
                "elsewhere (the default is runs/)")
    return None


def of_config(config: cfg.RunConfig, seeds: Sequence[int] = (0,), force: bool = False,
              purpose: str = "run", rerun_stale: bool = False, allow_mixed_code: bool = False,
              foreign: Sequence[str] = ()) -> Run:
    """A ``Run`` of a config already made (a stored one, a reproduce cell's, a worker's);
    ``foreign``: what ``resolve`` found given for another method than the run's."""
    import methods
    from harness.checks import type_problems
    from harness.data import choose_train_set
    from harness.presets import PRESETS
    from harness.rollouts import ENGINES
    from tasks import TASKS

    plugins(config.plugins)
    config = auto_values(config)  # a config made directly may still say auto
    problems = type_problems(config)  # then no check compares a number that is a string
    found = {}
    for key, flag, get in (("method", "--method", lambda: methods.get(config.method.method)),
                           ("task", "--task", lambda: TASKS.get(config.task.task)),
                           ("engine", "--engine", lambda: ENGINES.get(config.rollout.engine)),
                           ("preset", "--preset", lambda: PRESETS.get(config.preset))):
        try:
            found[key] = get()
        except (KeyError, ValueError) as exc:
            hint = plugin_hint(config.method.method, config.plugins) if key == "method" else ""
            problems.append(f"{flag}: {exc}{hint}")
    if problems:
        raise PreflightError(problems)
    evaluated, files, sets = [], [], []
    for c in cfg.evaluations(config):  # the training set is chosen once per benchmark
        try:
            sets.append((choose_train_set(c), None))
        except (KeyError, ValueError) as exc:
            sets.append((None, str(exc)))
        (ts, why), known = sets[-1], c.task.task in TASKS
        evaluated.append((c, TASKS.get(c.task.task).configured(c.task.options),
                          ts.name if ts else f"none ({why})") if known else
                         (c, None, f"unknown task {c.task.task!r}; known: "
                                   f"{', '.join(TASKS.names())}"))
        try:  # a set that cannot be read is still named by the settings (no data read)
            files += [tuple(SeedRun.of(replace(c, seed=s), ts) for s in seeds)] if known else []
        except (KeyError, ValueError):
            pass  # an unknown --train-data: train_problem names it
    (train_set, why), task = sets[0], evaluated[0][1]  # the run's own (--task's)
    reference = absolute(cfg.resolve(config.preset, {}))
    return Run(config=config, train_set=train_set, train_problem=why and f"training set: {why}",
               task=task, reference=reference,
               foreign=(*foreign, *foreign_options(config, reference)),
               evaluated=tuple(evaluated), files=tuple(files),
               seeds=tuple(seeds), force=force, rerun_stale=rerun_stale,
               allow_mixed_code=allow_mixed_code, purpose=purpose, **{
                   k: found[k] for k in ("method", "engine", "preset")})


def foreign_options(config: cfg.RunConfig, reference) -> tuple[str, ...]:
    """Options set for an engine this run does not use: they would do nothing, yet (for the
    result-changing ones) rename the run's folder, so it never pools with the same run without
    them (another method's or task family's: refused by ``resolve``, a config holds none)."""
    from harness.rollouts import ENGINES

    changed = {name for name, (section, f) in cfg.all_fields().items()
               if section not in ("method", "task") and cfg.field_value(config, section, name)
               != cfg.field_value(reference, section, name)}
    return tuple(f"--{option.replace('_', '-')} is an option of --engine {name}, not of "
                 f"--engine {config.rollout.engine}; drop it" for name, entry in ENGINES.items()
                 if name != config.rollout.engine for option in entry.options
                 if option in changed)


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
