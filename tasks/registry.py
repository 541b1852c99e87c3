"""The task and training-set registries (task families add themselves; ``tasks`` imports the
families)."""
from __future__ import annotations

from common.registry import Registry
from tasks.base import Task, TrainSet

TASKS: Registry[Task] = Registry("task")
TRAIN_SETS: Registry[TrainSet] = Registry("training set")
