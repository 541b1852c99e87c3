"""Everything a command can find wrong before Ray starts or a model loads, listed together.

A run (``run``, ``sft``, each cell of ``reproduce``) and ``score`` call :func:`preflight`: the
settings (``checks.settings_problems``), options that belong to another method, task family or
engine, schedules that would do nothing, every output folder (proven writable without writing
anything), and every data file the command will read (the training set and the benchmark,
opened and validated). One ``PreflightError`` names every problem with its fix.
"""
from __future__ import annotations

import os
from dataclasses import fields
from pathlib import Path

from harness import config as cfg


class PreflightError(ValueError):
    """Problems found before any work; ``problems`` lists them, each with its fix."""

    def __init__(self, problems: list[str], what: str = "these settings cannot run") -> None:
        self.problems = list(problems)
        super().__init__(f"{what}:\n" + "\n".join(f"  - {p}" for p in self.problems))


def raise_if(problems: list[str], what: str = "these settings cannot run") -> None:
    if problems:
        raise PreflightError(problems, what)


def folder_problem(path: str | Path, flag: str) -> str | None:
    """Why the folder ``path`` could not be created or written (None: it can), found without
    creating or writing anything: the nearest existing ancestor must be a writable folder."""
    p = Path(path).expanduser().absolute()
    probe = p
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe == p and not p.is_dir():
        return f"{flag} {path}: exists and is not a folder; give a folder"
    if not probe.is_dir():
        return f"{flag} {path}: {probe} is a file, so the folder cannot be created; give another"
    if not os.access(probe, os.W_OK | os.X_OK):
        where = "" if probe == p else f" ({probe} is the nearest existing folder)"
        return f"{flag} {path}: not writable{where}; give a folder you can write to"
    return None


def file_problem(path: str | Path, flag: str) -> str | None:
    """Why the file ``path`` could not be written (None: it can)."""
    p = Path(path).expanduser()
    if p.is_dir():
        return f"{flag} {path}: is a folder; give a file name"
    return folder_problem(p.absolute().parent, flag)


def output_problems(config: cfg.RunConfig) -> list[str]:
    """A run writes its results and its checkpoints (and trackers' files under the results)."""
    out = [folder_problem(config.results_dir, "--results-dir"),
           folder_problem(config.checkpoint_dir, "--checkpoint-dir")]
    if config.warmstart.warm_start:  # the warm-started model is cached in the project
        from harness.assets import CACHE_DIR

        problem = folder_problem(CACHE_DIR / "warm-start", "the warm start's cache")
        out.append(problem and problem + " (the warm start is cached there)")
    return [p for p in out if p]


def _changed(config: cfg.RunConfig) -> dict[str, object]:
    """Fields whose value differs from the preset's (what the user set, by flag or API)."""
    reference = cfg.resolve(config.preset, {})
    out = {}
    for name, (section, f) in cfg.all_fields().items():
        # a config made before a plugin registered its options lacks them: their defaults
        ours = getattr(getattr(config, section) if section else config, name, f.default)
        theirs = getattr(getattr(reference, section) if section else reference, name)
        if ours != theirs:
            out[name] = ours
    return out


def method_owners() -> dict[str, list[str]]:
    """Method option name -> the registered methods that read it (CommonOptions: all)."""
    import methods
    from methods.base import CommonOptions

    common = {f.name for f in fields(CommonOptions)}
    out: dict[str, list[str]] = {}
    for name in methods.METHODS.names():
        for cls in methods.METHODS.get(name).options:
            for f in fields(cls):
                if f.name not in common:
                    out.setdefault(f.name, []).append(name)
    return out


def foreign_problems(config: cfg.RunConfig, changed: dict | None = None) -> list[str]:
    """Options set for a method, task family or engine this run does not use: they would do
    nothing, yet (for the result-changing ones) rename the run's folder, so it never pools
    with the same run without them."""
    import methods
    from harness.rollouts import ENGINES

    changed = _changed(config) if changed is None else changed
    out = []
    used = {f.name for cls in methods.get(config.method.method).options for f in fields(cls)}
    for name, owners in method_owners().items():
        if name in changed and name not in used:
            out.append(f"--{name.replace('_', '-')} is an option of {', '.join(owners)}, not of "
                       f"method {config.method.method!r}; drop it (or use one of those methods)")
    out += family_option_problems(config.task.task, set(changed))
    engine = config.rollout.engine
    for name in ENGINES.names():
        if name == engine:
            continue
        for option in ENGINES.get(name).options:
            if option in changed:
                out.append(f"--{option.replace('_', '-')} is an option of --engine {name}, not "
                           f"of --engine {engine}; drop it")
    return out


def family_option_problems(task: str, given: set[str]) -> list[str]:
    """Options among ``given`` that belong to another task family than ``task``'s."""
    from tasks import TASKS
    from tasks.registry import FAMILY_OPTIONS

    family = TASKS.get(task).family
    return [f"--{f.name.replace('_', '-')} is an option of the {fam} tasks, not of {task!r} "
            f"({family}); drop it"
            for fam in FAMILY_OPTIONS.names() if fam != family
            for f in fields(FAMILY_OPTIONS.get(fam)) if f.name in given]


def schedule_problems(config: cfg.RunConfig) -> list[str]:
    """Periodic work that would never happen within the run's steps."""
    t, out = config.training, []
    for name, every in (("eval_every", t.eval_every), ("save_every", t.save_every)):
        if t.steps > 0 and every > t.steps:
            flag = "--" + name.replace("_", "-")
            out.append(f"{name} ({every}) is larger than steps ({t.steps}): it would never "
                       f"happen; use {flag} {t.steps} or less (0 = off)")
    return out


def data_problems(config: cfg.RunConfig) -> list[str]:
    """Open and validate every data file the run reads: the training set and the benchmark
    (which the workers would first read after the last training step)."""
    from harness import checks
    from harness.assets import MissingAssetError
    from harness.data import get_task, load_eval, load_train

    out: list[str] = []
    try:
        train = load_train(config)
    except (ValueError, FileNotFoundError, MissingAssetError) as exc:
        out.append(f"training set: {exc}")
        train = None
    try:
        if not load_eval(get_task(config), config):
            out.append(f"benchmark {config.task.task!r} has no items")
    except (ValueError, FileNotFoundError, MissingAssetError) as exc:
        out.append(f"benchmark: {exc}")
    if train is not None:
        out += checks.data_problems(config, train)
    return out + checks.task_problems(config)


def evaluation_problems(config: cfg.RunConfig) -> list[str]:
    """``--also-evaluate``'s benchmarks: each known, of the run's family, trained on the same
    set with the same rewards (else one training cannot stand for a run of each), and its
    items readable."""
    from harness import checks
    from harness.assets import MissingAssetError
    from harness.data import choose_train_set, get_task, load_eval
    from tasks import TASKS

    first, *others = cfg.evaluations(config)
    if not others:
        return []
    out: list[str] = []
    ours = get_task(first)
    try:
        train = choose_train_set(first).name
    except ValueError:
        train = None  # data_problems names it
    for other in others:
        name = other.task.task
        if name not in TASKS.names():
            out.append(f"--also-evaluate: unknown task {name!r}; known: "
                       f"{', '.join(TASKS.names())}")
            continue
        task = get_task(other)
        if task.family != ours.family:
            out.append(f"--also-evaluate {name}: a {task.family} task, the run trains for "
                       f"{ours.family} ({ours.name}); evaluate it in a run of its own")
            continue
        try:
            theirs = choose_train_set(other).name
        except ValueError as exc:
            theirs = f"none ({exc})"
        if train is not None and theirs != train:
            out.append(f"--also-evaluate {name}: it trains on {theirs}, {ours.name} on {train}; "
                       "give --train-data to train both on one set, or run them apart")
        if [r.name for r in task.rewards] != [r.name for r in ours.rewards]:
            out.append(f"--also-evaluate {name}: its rewards differ from {ours.name}'s; run it "
                       "apart")
        out += checks.task_problems(other)
        try:
            if not load_eval(task, other):
                out.append(f"benchmark {name!r} has no items")
        except (ValueError, FileNotFoundError, MissingAssetError) as exc:
            out.append(f"benchmark {name!r}: {exc}")
    return out


def run_problems(config: cfg.RunConfig) -> list[str]:
    """Every problem of a run's settings, options, outputs and data, together."""
    import methods
    from harness import checks
    from harness.data import get_task

    get_task(config)  # unknown task names fail here, with the known ones listed
    methods.get(config.method.method)  # unknown methods and bad compositions fail here
    out = checks.settings_problems(config)
    out += foreign_problems(config) + schedule_problems(config) + output_problems(config)
    return out + data_problems(config) + evaluation_problems(config)


def preflight(config: cfg.RunConfig) -> None:
    """Raise ``PreflightError`` naming every problem of this run before any work starts."""
    from harness.plugins import load_plugins

    load_plugins(config.plugins)
    raise_if(run_problems(config))
