"""Options: frozen-dataclass fields, each a flag with its help in ``metadata``; several option
classes merged into one (a method composed of parts reads each part's options)."""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence


def option(default: Any, help: str, identity: bool = True, aliases: tuple[str, ...] = (),
           **metadata: Any) -> Any:
    """A config or option field: its default and help text (it becomes a CLI flag).
    ``identity=False``: it does not change results (not part of a result's setting).
    ``machine=True``: the machine decides it (``auto``), like its kind: recorded and hashed
    with the seed, but a seed that differs in it alone is the same setting.
    ``aliases``: its former names, still read from flags, overrides and stored configs (a
    renamed field keeps them for one release)."""
    return dataclasses.field(default=default, metadata={"help": help, "identity": identity,
                                                        "aliases": tuple(aliases), **metadata})


def merged_fields(classes: Sequence[type]) -> list[dataclasses.Field]:
    """The fields of these option classes, each name once; a name declared twice must have
    the same default (it is one flag)."""
    seen: dict[str, dataclasses.Field] = {}
    for cls in classes:
        for f in dataclasses.fields(cls):
            if f.name in seen:
                if seen[f.name].default != f.default:
                    raise ValueError(f"option {f.name!r} is declared twice with different "
                                     f"defaults ({seen[f.name].default!r} vs {f.default!r})")
                continue
            seen[f.name] = f
    return list(seen.values())


def merged_dataclass(name: str, module: str, classes: Sequence[type],
                     extra: Sequence[tuple] = ()) -> type:
    """A frozen dataclass with the ``extra`` field specs first, then every field of
    ``classes``. ``module``: where it is bound under ``name`` (so that pickling finds it)."""
    specs = list(extra)
    for f in merged_fields(classes):
        specs.append((f.name, f.type, dataclasses.field(default=f.default,
                                                         metadata=f.metadata)))
    cls = dataclasses.make_dataclass(name, specs, frozen=True)
    cls.__module__, cls.__qualname__ = module, name
    return cls


def values_of(options: Any, cls: type) -> Any:
    """An instance of option class ``cls`` (one part's options) with the values ``options``
    (a composed method's) carries; its defaults for the fields ``options`` lacks."""
    return cls(**{f.name: getattr(options, f.name) for f in dataclasses.fields(cls)
                  if hasattr(options, f.name)})


def with_absent(cls: type, values: dict[str, Any]) -> dict[str, Any]:
    """A stored section's ``values`` with the fields it was written without set to what their
    absence meant (``absent=`` on the field: a default that changed since, e.g. a stored seed
    without ``update_dtype`` ran in float32)."""
    out = dict(values)
    for f in dataclasses.fields(cls):
        if "absent" in f.metadata and f.name not in out:
            out[f.name] = f.metadata["absent"]
    return out
