"""The one check of a resolved run (``harness.run.Run``): everything a command can find wrong
before Ray starts or a model loads, listed together.

Every entry point (``run`` and its dry run, ``sft``, each cell of ``reproduce``, ``harness.api``)
calls :func:`problems` on the same ``Run`` it then acts on, so a dry run prints the verdict the
run acts on: the settings (``checks.settings_problems``), options that belong to another
method, task family or engine, schedules that would do nothing, every output folder (proven
writable with a probe file, created and removed), the model, the training set (the one asked
for, never a stand-in) and the benchmark (opened and validated), and the warm start's data. One
``PreflightError`` names every problem with its fix.
"""
from __future__ import annotations

import os
from dataclasses import fields, replace
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
    """Why the folder ``path`` could not be created or written (None: it can). The nearest
    existing ancestor must be a folder in which a probe file can be created (it is removed at
    once; nothing else is made): permission bits say nothing for root or on a read-only or
    virtual file system (/proc)."""
    import tempfile

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
    where = "" if probe == p else f" ({probe} is the nearest existing folder)"
    try:
        fd, name = tempfile.mkstemp(dir=probe, prefix=".harness-probe-")
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        return (f"{flag} {path}: cannot be written{where}: {exc.strerror or exc}; give a folder "
                "you can write to")
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


def data_problems(run) -> list[str]:
    """Open and validate every data file the run reads: the training set the run resolved
    (never another in its place) and the benchmark (which the workers would first read after
    the last training step); the examples must carry what the method's passes re-read, and the
    warm start needs reference answers that are no benchmark item's."""
    from harness import checks
    from harness.assets import MissingAssetError
    from harness.data import benchmark_items, load_train

    config, out = run.config, []
    train = items = None
    if run.train_problem:
        out.append(run.train_problem)
    else:
        try:
            train = load_train(config)
        except (ValueError, FileNotFoundError, MissingAssetError) as exc:
            out.append(f"training set: {exc}")
    try:  # the whole benchmark: its --eval-limit subset is empty only when it is
        items = benchmark_items(run.task, config)
        if not items:
            out.append(f"benchmark {config.task.task!r} has no items")
    except (ValueError, FileNotFoundError, MissingAssetError) as exc:
        out.append(f"benchmark: {exc}")
    if train is not None:
        if run.purpose == "run":
            out += checks.verifier_info_problems(config, train)
        if config.warmstart.warm_start:
            out += warm_start_problems(run, items)
    return out + checks.task_problems(config)


def warm_start_problems(run, benchmark) -> list[str]:
    """The warm start imitates the training set's reference answers: the set must have them
    in a response layout, and none may be a benchmark item (checked here, not after Ray).
    ``benchmark``: the benchmark's items, read once by the caller (None: they could not be
    read, a problem listed already)."""
    from harness.assets import MissingAssetError
    from harness.warmstart.data import benchmark_items_problem, demonstrations

    try:
        demos = demonstrations(run.config)
    except (ValueError, FileNotFoundError, MissingAssetError) as exc:
        return [f"warm start: {exc}"]
    problem = None if benchmark is None else benchmark_items_problem(run.config, demos,
                                                                     benchmark)
    return [f"warm start: {problem}"] if problem else []


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


def stored_problems(run) -> list[str]:
    """Stored seeds of the run that it would skip: each must have been made with the same
    settings, and (as ``compare`` and the tables refuse) the seeds its summary pools must be
    of one code version, unless the run remakes them (``--rerun-stale``, ``--force``) or pools
    them on purpose (``--allow-mixed-code``)."""
    from harness import provenance
    from harness.results import check_stored, stored_fingerprints, stored_seeds

    if run.train_problem:
        return []
    out = checkpoint_problems(run)
    if run.force:
        return out
    for c in run.benchmarks:
        stored = stored_seeds(c)
        for s in run.seeds:
            if s in stored:
                try:
                    check_stored(replace(c, seed=s), stored[s])
                except ValueError as exc:
                    out.append(str(exc))
    kept = {} if out else {p: f for p, (_, f) in
                           stored_fingerprints(run.config, run.seeds).items()}
    if not kept:
        return out
    wanted = len(run.seeds) * len(run.benchmarks)  # one result per seed and benchmark
    todo = len(kept) < wanted
    ours = provenance.current(plugins=run.config.plugins)["fingerprint"]
    if run.rerun_stale:
        kept = {p: f for p, f in kept.items() if f == ours}
        todo = len(kept) < wanted
    versions = set(kept.values()) | ({ours} if todo else set())
    if len(versions) > 1 and not run.allow_mixed_code:
        other = [f"{p} ({f})" for p, f in kept.items() if f != ours]
        out.append(f"the summary would pool seeds of {len(versions)} code versions (this tree: "
                   f"{ours}; stored by other code: {', '.join(other) or 'none'}), which compare "
                   "and the tables refuse; --rerun-stale remakes the stored ones, "
                   "--allow-mixed-code pools them with a footnote, --force reruns every seed")
    return out


def checkpoint_problems(run) -> list[str]:
    """A seed's checkpoint folder written by other settings (or another number of workers)
    would stop the run when its seed starts, after Ray: refused here instead, with the one
    message ``SeedRun.checkpoint_problem`` gives for it."""
    return [problem for seed_run in run.seed_runs()
            # a forced rerun of a stored seed starts afresh
            if not (run.force and seed_run.result.is_file())
            for problem in [seed_run.checkpoint_problem()] if problem]


def problems(run) -> list[str]:
    """Every problem of a resolved run's settings, options, outputs, model and data, together:
    the verdict its dry run prints and the run acts on."""
    from harness import checks

    config = run.config
    out = checks.settings_problems(config)
    out += foreign_problems(config) + schedule_problems(config) + output_problems(config)
    out += data_problems(run)
    if run.purpose == "run":
        out += evaluation_problems(config) + stored_problems(run)
    return list(dict.fromkeys(out))


def check(run) -> None:
    """Raise ``PreflightError`` naming every problem of this run before any work starts."""
    raise_if(problems(run))
