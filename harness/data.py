"""Choosing and sampling a run's examples: the training set, the evaluation subset."""
from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path
from typing import Sequence

from harness.config import RunConfig
from tasks import TASKS, TRAIN_SETS
from tasks.base import Example, Task, TrainSet


def intended_train_set(config: RunConfig) -> TrainSet:
    """The training set a run is for, from its settings alone (no file is read, so a plan can
    name a run's folder on a machine without the data): ``--train-data`` if given; else the
    task's first set in order of preference, passing over the sets read from a data folder
    unless ``--data-dir`` is given or the preset is a paper setting (``Preset.published``)."""
    from harness.presets import published

    task = TASKS.get(config.task.task)
    if config.task.train_data:
        return TRAIN_SETS.get(config.task.train_data).configured(config.task.options)
    wants_published = config.task.data_dir is not None or published(config.preset)
    for name in task.train_sets:
        ts = TRAIN_SETS.get(name)
        if wants_published or not ts.needs_data_dir:
            return ts.configured(config.task.options)
    raise ValueError(f"task {task.name!r} has no offline training set; pass --data-dir")


def choose_train_set(config: RunConfig) -> TrainSet:
    """The training set a run reads (:func:`intended_train_set`), checked to be readable and
    never replaced by another: a ``--data-dir`` must exist and hold it; a paper preset reads
    published data only; an offline generator is read only when asked (``--train-data``) or
    by a smoke preset without ``--data-dir``. ValueError says what is missing and the fix."""
    from harness.presets import published

    task = TASKS.get(config.task.task)
    data_dir = config.task.data_dir
    paper = config.preset if published(config.preset) else None
    if data_dir is not None and not Path(data_dir).expanduser().is_dir():
        what = "is a file" if Path(data_dir).expanduser().exists() else "does not exist"
        raise ValueError(f"--data-dir {data_dir} {what}; give the folder that holds the "
                         "published data sets (layouts: docs/tasks.md)")
    chosen = intended_train_set(config)
    if chosen.family != task.family:
        raise ValueError(f"training set {chosen.name!r} is for the {chosen.family} family, "
                         f"task {task.name!r} is {task.family}")
    if chosen.needs_data_dir and not chosen.found_in(data_dir):
        offline = next((n for n in task.train_sets if not TRAIN_SETS.get(n).needs_data_dir),
                       None)
        raise ValueError(_missing(task, [chosen], data_dir,
                                  None if config.task.train_data else offline, paper))
    if paper and not chosen.needs_data_dir:
        raise ValueError(f"--train-data {chosen.name} is an offline generator and preset "
                         f"{paper!r} trains on published data only; drop --train-data (and "
                         "give --data-dir), or use a smoke preset")
    return chosen


def _missing(task: Task, wanted: Sequence[TrainSet], data_dir: str | None,
             offline: str | None = None, paper: str | None = None) -> str:
    """Why none of ``wanted`` (sets read from --data-dir) can be read, and the fixes;
    ``offline``: the generator that could be asked for instead; ``paper``: the paper preset
    that needs the published set (no generator then)."""
    sets = "; ".join(f"{ts.name}: {ts.help}" for ts in wanted)
    where = (f"--data-dir {data_dir} does not hold it" if data_dir else
             f"preset {paper!r} trains on it and no --data-dir was given" if paper else
             "no --data-dir was given")
    fix = ("put it there or give the folder that holds it (layouts: docs/tasks.md)" if data_dir
           else "give --data-dir DIR holding it (layouts: docs/tasks.md)")
    if offline and not paper:
        fix += f", or pass --train-data {offline} to train on the offline generator"
    return f"task {task.name!r} trains on its published set ({sets}); {where}: {fix}"


def offline_train_set(task_name: str) -> str | None:
    """The task's first training set that needs no data folder (its offline default)."""
    for name in TASKS.get(task_name).train_sets:
        if not TRAIN_SETS.get(name).needs_data_dir:
            return name
    return None


def load_train(run, seed: int | None = None) -> list[Example]:
    """The examples of the training set the run chose (``Run.train_set``), drawn with ``seed``
    (default: the run's)."""
    ts, data_dir = run.train_set, run.config.task.data_dir
    examples = ts.load(Path(data_dir) if data_dir else None,
                       run.config.seed if seed is None else seed)
    if not examples:
        raise ValueError(f"training set {ts.name!r} is empty")
    return examples


def stratified_subset(examples: Sequence[Example], limit: int, seed: int) -> list[Example]:
    """A fixed, seeded subset of ``limit`` items, round-robin over ``metadata['category']`` so
    every category is represented; the original order is kept. ``limit <= 0``: all items."""
    if limit <= 0 or limit >= len(examples):
        return list(examples)
    rng = random.Random(seed)
    by_cat: dict[str, list[int]] = defaultdict(list)
    for i, ex in enumerate(examples):
        by_cat[str(ex.metadata.get("category", ""))].append(i)
    queues = {c: rng.sample(idx, len(idx)) for c, idx in sorted(by_cat.items())}
    chosen: list[int] = []
    while len(chosen) < limit:
        for c in sorted(queues):
            if queues[c] and len(chosen) < limit:
                chosen.append(queues[c].pop())
    return [examples[i] for i in sorted(chosen)]


def benchmark_items(task: Task, config: RunConfig) -> list[Example]:
    """Every item of the run's benchmark (before ``--eval-limit``'s subset)."""
    return task.load_eval(Path(config.task.data_dir) if config.task.data_dir else None)


def load_eval(task: Task, config: RunConfig) -> list[Example]:
    """The items the run evaluates: the benchmark's, or its ``--eval-limit`` subset."""
    return stratified_subset(benchmark_items(task, config), config.task.eval_limit,
                             config.task.eval_seed)


class PromptSampler:
    """Seeded epochs over the training set: every prompt once per epoch, in a new order."""

    def __init__(self, n: int, seed: int) -> None:
        self.n, self.rng, self.queue = n, random.Random(seed), []

    def next(self, count: int) -> list[int]:
        out = []
        while len(out) < count:
            if not self.queue:
                self.queue = self.rng.sample(range(self.n), self.n)
            out.append(self.queue.pop())
        return out
