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

from pathlib import Path

from common.paths import folder_problem  # in common: the methods' option checks use it too


class PreflightError(ValueError):
    """Problems found before any work; ``problems`` lists them, each with its fix."""

    def __init__(self, problems: list[str], what: str = "these settings cannot run") -> None:
        self.problems = list(problems)
        super().__init__(f"{what}:\n" + "\n".join(f"  - {p}" for p in self.problems))


def raise_if(problems: list[str], what: str = "these settings cannot run") -> None:
    if problems:
        raise PreflightError(problems, what)


def file_problem(path: str | Path, flag: str) -> str | None:
    """Why the file ``path`` could not be written (None: it can)."""
    p = Path(path).expanduser()
    if p.is_dir():
        return f"{flag} {path}: is a folder; give a file name"
    return folder_problem(p.absolute().parent, flag)


def output_problems(run) -> list[str]:
    """A run writes its results and its checkpoints (and trackers' files under the results)."""
    config = run.config
    out = [folder_problem(config.results_dir, "--results-dir"),
           folder_problem(config.checkpoint_dir, "--checkpoint-dir")]
    if config.warmstart.warm_start:  # the warm-started model is cached in the project
        from harness.assets import CACHE_DIR

        problem = folder_problem(CACHE_DIR / "warm-start", "the warm start's cache")
        out.append(problem and problem + " (the warm start is cached there)")
    return [p for p in out if p]


def schedule_problems(run) -> list[str]:
    """Periodic work that would never happen within the run's steps."""
    t, out = run.config.training, []
    for name, every in (("eval_every", t.eval_every), ("save_every", t.save_every)):
        if t.steps > 0 and every > t.steps:
            flag = "--" + name.replace("_", "-")
            out.append(f"{name} ({every}) is larger than steps ({t.steps}): it would never "
                       f"happen; use {flag} {t.steps} or less (0 = off)")
    return out


def data_problems(run) -> list[str]:
    """Open and validate every data file the run reads: the training set the run resolved
    (never another in its place) and each benchmark (which the workers would first read after
    the last training step); the examples must carry what the method's passes re-read, and the
    warm start needs reference answers that are no benchmark item's. ``--also-evaluate``'s
    benchmarks must be of the run's family, trained on the same set with the same rewards (else
    one training cannot stand for a run of each)."""
    from harness import checks
    from harness.assets import MissingAssetError
    from harness.data import benchmark_items, load_train

    out, items, train = [], {}, None
    reading = (ValueError, FileNotFoundError, MissingAssetError)
    if run.train_problem:
        out.append(run.train_problem)
    else:
        try:
            train = load_train(run)
        except reading as exc:
            out.append(f"training set: {exc}")
    _, ours, ours_set = run.evaluated[0]  # the run's own benchmark and training set
    for k, (c, task, train_set) in enumerate(run.evaluated):
        name = c.task.task
        if k and task is None:
            out.append(f"--also-evaluate: {train_set}")  # the resolution's message
            continue
        if k and task.family != ours.family:
            out.append(f"--also-evaluate {name}: a {task.family} task, the run trains for "
                       f"{ours.family} ({ours.name}); evaluate it in a run of its own")
            continue
        if k and train_set != ours_set and not run.train_problem:
            out.append(f"--also-evaluate {name}: it trains on {train_set}, {ours.name} on "
                       f"{ours_set}; give --train-data to train both on one set, or run them "
                       "apart")
        if k and [r.name for r in task.rewards] != [r.name for r in ours.rewards]:
            out.append(f"--also-evaluate {name}: its rewards differ from {ours.name}'s; run it "
                       "apart")
        try:  # the whole benchmark: its --eval-limit subset is empty only when it is
            items[k] = benchmark_items(task, c)
            if not items[k]:
                out.append(f"benchmark {name!r} has no items")
        except reading as exc:
            out.append(f"benchmark {name!r}: {exc}" if k else f"benchmark: {exc}")
        out += checks.task_problems(task, c.task.data_dir)
    if train is not None and run.purpose == "run":
        out += checks.verifier_info_problems(run, train)
    if train is not None and run.config.warmstart.warm_start:
        from harness.warmstart.data import benchmark_items_problem

        try:  # no benchmark items (a problem named above): nothing to compare with
            problem = 0 in items and benchmark_items_problem(run, run.demonstrations, items[0])
        except reading as exc:
            problem = str(exc)
        out += [f"warm start: {problem}"] if problem else []
    return out


def stored_problems(run) -> list[str]:
    """Stored seeds of the run that it would skip: each must have been made with the same
    settings, and (as ``compare`` and the tables refuse) the seeds its summary pools must be
    of one code version, unless the run remakes them (``--rerun-stale``, ``--force``) or pools
    them on purpose (``--allow-mixed-code``)."""
    from harness.results import check_stored, stored_fingerprints

    if run.train_problem:
        return []
    out = checkpoint_problems(run)
    if run.force:
        return out
    for seed_run in (r for files in run.files for r in files):
        if seed_run.result.is_file():
            try:
                check_stored(seed_run.config, seed_run.result)
            except ValueError as exc:
                out.append(str(exc))
    kept = {} if out else {p: f for p, (_, f) in stored_fingerprints(run.files).items()}
    if not kept:
        return out
    wanted = len(run.seeds) * len(run.benchmarks)  # one result per seed and benchmark
    todo = len(kept) < wanted
    ours = run.fingerprint
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
    out = checks.settings_problems(run) + list(run.foreign)
    out += schedule_problems(run) + output_problems(run) + data_problems(run)
    if run.purpose == "run":
        out += stored_problems(run)
    return list(dict.fromkeys(out))


def check(run) -> None:
    """Raise ``PreflightError`` naming every problem of this run before any work starts."""
    raise_if(problems(run))
