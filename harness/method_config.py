"""The method section of a run's config: the method's name and its own options object
(``methods.options_of``: the fields of its option classes, CommonOptions' first), made so that
an option of another method is refused, naming the methods that read it."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import methods
from common.options import option


@dataclass(frozen=True)
class MethodConfig:
    """The advantage strategy and its own options object (``methods.options_of``: the fields
    of its option classes, CommonOptions' first, each declared in its method's file and each a
    flag); an option of another method is refused for it (:func:`method_config`)."""

    method: str = option("gdpo", "advantage strategy from the method registry, or a composition "
                                 "such as a+b (see `harness list`)")
    options: Any = field(default=None, metadata={
        "help": "the method's options object (its defaults when not given)"})

    def __post_init__(self) -> None:
        if self.options is None:  # its defaults; none for a name no registry knows (refused
            # when the run is resolved, with the known names)
            object.__setattr__(self, "options", options_class(self.method)())


def options_class(method: str) -> type:
    """The method's options class; an empty one for a name that is no method (yet)."""
    try:
        return methods.options_of(method)
    except (KeyError, ValueError):
        return NoOptions


@dataclass(frozen=True)
class NoOptions:
    """The options of a method name that resolves to no method: none."""


def method_config(method: str, values: dict[str, Any], base: MethodConfig | None = None
                  ) -> MethodConfig:
    """Method ``method`` with these option values; the values of ``base`` (another config's
    method section) that ``method`` also reads are kept, its other options are defaults. An
    option ``method`` does not read is a ValueError naming the methods that do."""
    cls = options_class(method)
    own = {f.name for f in fields(cls)}
    foreign = foreign_method_options(method, values)
    if foreign:
        raise ValueError("; ".join(foreign.values()))
    kept = {k: getattr(base.options, k) for k in own if base and hasattr(base.options, k)}
    return MethodConfig(method, cls(**{**kept, **{k: v for k, v in values.items()
                                                 if k in own}}))


def foreign_method_options(method: str, names) -> dict[str, str]:
    """The names among ``names`` that are options of other methods than ``method``, each with
    what is wrong (the methods that read it): they would do nothing, yet rename the run's
    folder. None for a name that is no method (the resolution names that instead)."""
    cls = options_class(method)
    if cls is NoOptions:
        return {}
    owners, own = methods.registry.option_owners(), {f.name for f in fields(cls)}
    return {n: f"--{n.replace('_', '-')} is an option of {', '.join(owners[n])}, not of method "
               f"{method!r}; drop it (or use one of those methods)"
            for n in names if n not in own and n in owners}
