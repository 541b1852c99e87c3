"""The task and training-set registries (task families add themselves; ``tasks`` imports the
families)."""
from __future__ import annotations

from common.registry import Registry, derived
from tasks.base import Task, TrainSet

TASKS: Registry[Task] = Registry("task")
TRAIN_SETS: Registry[TrainSet] = Registry("training set")
# family -> its run options: a frozen dataclass whose fields become flags (``--sql-timeout``)
# and fields of the run's TaskConfig; ``problems()`` lists what is wrong with its values
FAMILY_OPTIONS: Registry[type] = Registry("task family's options")


@derived(FAMILY_OPTIONS)
def family_classes() -> tuple[type, ...]:
    """Every registered task family's option class (the run's TaskConfig has their fields)."""
    return tuple(FAMILY_OPTIONS.get(f) for f in FAMILY_OPTIONS.names())


def family_options(family: str):
    """Class decorator: register a family's run options."""
    def register(cls: type) -> type:
        FAMILY_OPTIONS.add(family, cls)
        return cls
    return register
