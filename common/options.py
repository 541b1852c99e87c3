"""Option classes merged into one: several frozen dataclasses whose fields (each a flag, with
its help in ``metadata``) become the fields of one class that a run's config carries."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence


def option(default: Any, help: str, identity: bool = True, aliases: tuple[str, ...] = (),
           **metadata: Any) -> Any:
    """A config or option field: its default and help text (it becomes a CLI flag).
    ``identity=False``: it does not change results (not part of a result's setting).
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
    """An instance of option class ``cls`` with the values ``options`` carries (its defaults
    for fields ``options`` lacks, e.g. a plugin's, registered after the run's config class was
    made)."""
    return cls(**{f.name: getattr(options, f.name) for f in dataclasses.fields(cls)
                  if hasattr(options, f.name)})


# The field of an open option class that holds the values of options registered after the
# class was made (a plugin's): the class itself is made once and never replaced.
LATER = "later_options"


def open_dataclass(name: str, module: str, classes: Callable[[], Sequence[type]],
                   extra: Sequence[tuple] = ()) -> type:
    """:func:`merged_dataclass` of the option classes registered now (``classes()``), made
    once: options registered afterwards (by a plugin) are read from it as attributes too, their
    values held in its ``later_options`` field (only those that differ from their defaults, by
    name), so that a config of any plugin's run is an instance of this one class. See
    :func:`later_fields`, :func:`with_values`, :func:`section_dict`, :func:`from_section_dict`."""
    hidden = (LATER, "tuple", dataclasses.field(default=(), metadata={
        "help": "values of options registered after this class was made (a plugin's)",
        "identity": False, "hidden": True}))
    cls = merged_dataclass(name, module, classes(), [*extra, hidden])
    cls._option_classes = staticmethod(classes)

    def __getattr__(self, key: str):  # only for names that are not fields of the class
        if key.startswith("__") or key == LATER:
            raise AttributeError(key)
        for k, v in self.__dict__.get(LATER, ()):
            if k == key:
                return v
        for f in later_fields(type(self)):
            if f.name == key:
                return f.default
        raise AttributeError(f"{name} has no option {key!r}")

    cls.__getattr__ = __getattr__
    return cls


def own_fields(cls: type) -> list[dataclasses.Field]:
    """The fields of an open class that are options (not its ``later_options``)."""
    return [f for f in dataclasses.fields(cls) if f.name != LATER]


def later_fields(cls: type) -> list[dataclasses.Field]:
    """Options registered since ``cls`` was made (``open_dataclass``), each once."""
    if not hasattr(cls, "_option_classes"):
        return []
    own = {f.name for f in dataclasses.fields(cls)}
    return [f for f in merged_fields(cls._option_classes()) if f.name not in own]


def option_fields(cls: type) -> list[dataclasses.Field]:
    """Every option an open class's instance reads: its own fields, then those registered
    later."""
    return [*own_fields(cls), *later_fields(cls)]


def with_values(obj: Any, values: dict[str, Any]) -> Any:
    """``dataclasses.replace`` of an open class's instance: fields of its class, and options
    registered later (kept by name, sorted, without those at their defaults). An unknown name
    raises TypeError as ``replace`` would."""
    own = {f.name for f in dataclasses.fields(obj)}
    later = {f.name: f.default for f in later_fields(type(obj))}
    unknown = [k for k in values if k not in own and k not in later]
    if unknown:
        raise TypeError(f"{type(obj).__name__} has no option {unknown[0]!r}")
    mine = {k: v for k, v in values.items() if k in own}
    if any(k in later for k in values):
        merged = {**dict(getattr(obj, LATER, ())), **{k: v for k, v in values.items()
                                                      if k in later}}
        mine[LATER] = tuple(sorted((k, v) for k, v in merged.items() if v != later[k]))
    return dataclasses.replace(obj, **mine)


def section_dict(obj: Any) -> dict[str, Any]:
    """An open class's instance as one flat dict: its fields and the options registered later
    that it sets (a plugin's option at its default is left out: the process may hold plugins
    of other runs, whose options this config does not name)."""
    out = {f.name: getattr(obj, f.name) for f in own_fields(type(obj))}
    out.update(dict(getattr(obj, LATER, ())))
    return out


def with_absent(cls: type, values: dict[str, Any]) -> dict[str, Any]:
    """A stored section's ``values`` with the fields it was written without set to what their
    absence meant (``absent=`` on the field: a default that changed since, e.g. a stored seed
    without ``update_dtype`` ran in float32)."""
    out = dict(values)
    for f in dataclasses.fields(cls):
        if "absent" in f.metadata and f.name not in out:
            out[f.name] = f.metadata["absent"]
    return out


def from_section_dict(cls: type, data: dict[str, Any]) -> Any:
    """The instance :func:`section_dict` made this dict from."""
    own = {f.name for f in own_fields(cls)}
    return with_values(cls(**{k: v for k, v in data.items() if k in own}),
                       {k: v for k, v in data.items() if k not in own})
