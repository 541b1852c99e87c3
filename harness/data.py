"""Choosing and sampling a run's examples: the training set, the evaluation subset."""
from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path
from typing import Sequence

from harness.config import RunConfig
from tasks import TASKS, TRAIN_SETS
from tasks.base import Example, Task, TrainSet


def get_task(config: RunConfig) -> Task:
    """The run's task, with its family options (``--sql-*``, ...) applied."""
    return TASKS.get(config.task.task).configured(config.task)


def choose_train_set(config: RunConfig) -> TrainSet:
    """``--train-data`` if given; else the family's published set when ``--data-dir`` holds
    it, else its first set that needs no data folder (the offline generator)."""
    task = TASKS.get(config.task.task)
    if config.task.train_data:
        chosen = TRAIN_SETS.get(config.task.train_data).configured(config.task)
        if chosen.family != task.family:
            raise ValueError(f"training set {chosen.name!r} is for the {chosen.family} family, "
                             f"task {task.name!r} is {task.family}")
        return chosen
    for name in task.train_sets:
        ts = TRAIN_SETS.get(name)
        if ts.found_in(config.task.data_dir):
            return ts.configured(config.task)
    where = (f"--data-dir {config.task.data_dir} holds none of its sets "
             f"({', '.join(task.train_sets)})" if config.task.data_dir else "pass --data-dir")
    raise ValueError(f"task {task.name!r} has no offline training set; {where}")


def offline_train_set(task_name: str) -> str | None:
    """The task's first training set that needs no data folder (its offline default)."""
    for name in TASKS.get(task_name).train_sets:
        if not TRAIN_SETS.get(name).needs_data_dir:
            return name
    return None


def load_train(config: RunConfig) -> list[Example]:
    ts = choose_train_set(config)
    data_dir = Path(config.task.data_dir) if config.task.data_dir else None
    if ts.needs_data_dir and data_dir is None:
        raise ValueError(f"training set {ts.name!r} is read from --data-dir: {ts.help}")
    examples = ts.load(data_dir, config.seed)
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


def load_eval(task: Task, config: RunConfig) -> list[Example]:
    data_dir = Path(config.task.data_dir) if config.task.data_dir else None
    return stratified_subset(task.load_eval(data_dir), config.task.eval_limit,
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
