"""The task section of a run's config: what is evaluated and trained on, and the task family's
own options object (``tasks.registry.FAMILY_OPTIONS``: one frozen dataclass per family, each
field a flag), made so that an option of another family is refused, naming the family that
reads it. The counterpart of :mod:`harness.method_config` for tasks."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Optional

from common.options import option
from common.registry import derived
from tasks import TASKS
from tasks.registry import FAMILY_OPTIONS


@dataclass(frozen=True)
class NoFamilyOptions:
    """The options of a family that declares none (BFCL), or of a name that is no task."""

    def problems(self) -> list[str]:
        return []


@dataclass(frozen=True)
class TaskConfig:
    """What is evaluated and trained on, and the task family's own options object (its
    fields are flags such as ``--sql-timeout``; another family's are refused for it)."""

    task: str = option("bfcl", "what is evaluated: a benchmark or group from the task registry")
    also_evaluate: str = option("", "more benchmarks to evaluate the same training on, "
                                    "comma-separated, each stored as its own result (same "
                                    "family and training set as --task; --task A,B says the "
                                    "same)", identity=False)
    train_data: Optional[str] = option(None, "training set name; default: the task family's "
                                          "published set if --data-dir has it, else its "
                                          "offline generator")
    data_dir: Optional[str] = option(None, "folder with published data sets (RLLA, Spider, ...)",
                                  identity=False)
    eval_limit: int = option(0, "evaluate a fixed, seeded, category-stratified subset of this "
                                "many items; 0 = all")
    eval_seed: int = option(1234, "seed of the --eval-limit subset (fixed across training "
                                  "seeds)")
    options: Any = field(default=None, metadata={
        "help": "the task family's options object (its defaults when not given)"})

    def __post_init__(self) -> None:
        if self.options is None:  # the family's defaults (none for a name no registry knows:
            # refused when the run is resolved, with the known names)
            object.__setattr__(self, "options", family_class(self.task)())

    def as_dict(self) -> dict[str, Any]:
        """The section as a result stores it: its fields, then its family's options, flat."""
        return {**{f.name: getattr(self, f.name) for f in own_fields()},
                **asdict(self.options)}


def own_fields() -> list:
    """The fields of every task section (not the family's options)."""
    return [f for f in fields(TaskConfig) if f.name != "options"]


@derived(TASKS, FAMILY_OPTIONS)
def family_class(task: str) -> type:
    """The options class of ``task``'s family; an empty one for a family without options or
    a name that is no task (yet)."""
    if task not in TASKS:
        return NoFamilyOptions
    family = TASKS.get(task).family
    return FAMILY_OPTIONS.get(family) if family in FAMILY_OPTIONS else NoFamilyOptions


@derived(FAMILY_OPTIONS)
def family_owners() -> dict[str, str]:
    """Every registered family option -> its family."""
    return {f.name: fam for fam, cls in FAMILY_OPTIONS.items() for f in fields(cls)}


def task_config(values: dict[str, Any], base: TaskConfig | None = None) -> TaskConfig:
    """A task section with these values over ``base``'s (the family options of ``base`` that
    the new task's family also reads are kept). An option of another family is a ValueError
    naming it; for a name that is no task its family options are dropped (the resolution
    names the task instead)."""
    base = base or TaskConfig()
    name = values.get("task", base.task)
    foreign = foreign_family_options(name, values)
    if foreign:
        raise ValueError("; ".join(foreign.values()))
    cls = family_class(name)
    own = {f.name for f in fields(cls)}
    kept = {k: getattr(base.options, k) for k in own if hasattr(base.options, k)}
    mine = {f.name: values.get(f.name, getattr(base, f.name)) for f in own_fields()}
    return TaskConfig(**mine, options=cls(**{**kept, **{k: v for k, v in values.items()
                                                       if k in own}}))


def foreign_family_options(task: str, names) -> dict[str, str]:
    """The names among ``names`` that are options of another family than ``task``'s, each with
    what is wrong: they would do nothing, yet rename the run's folder. None for a name that is
    no task (the resolution names that instead)."""
    if task not in TASKS:
        return {}
    own, family = {f.name for f in fields(family_class(task))}, TASKS.get(task).family
    out = {n: f"--{n.replace('_', '-')} is an option of the {fam} tasks, not of {task!r} "
              f"({family}); drop it"
           for n in names if n not in own and (fam := family_owners().get(n))}
    ignored = TASKS.get(task).ignores
    out.update({n: f"--{n.replace('_', '-')} is read by no part of task {task!r} (it would only "
                   "rename the run's folder); drop it"
                for n in names if n in ignored})
    return out
