"""The method registry: names -> :class:`methods.base.Method`, and compositions ``a+b``.

Each method file calls :func:`add` once; ``get("gdpo+saw")`` composes registered presets
(their parts, options, passes and loss terms); :func:`options_of` is a method's options class
(what a run carries), :func:`options_class` every registered method's (the functional API's).
"""
from __future__ import annotations

import functools
from dataclasses import fields, replace
from typing import Optional, Sequence

from common.registry import Registry, derived
from common.options import merged_dataclass
from methods.base import CommonOptions, LossTerm, Method, Parts, Pass
from methods.compose import bind
from methods.stats import CONVENTIONS, Conventions

METHODS: Registry[Method] = Registry("method")


def add(name: str, help: str, source: str, *, options: tuple[type, ...] = (),
        passes: tuple[Pass, ...] = (), loss_terms: tuple[LossTerm, ...] = (),
        pg_term: bool = True, reference: Optional[str] = None, **parts) -> Method:
    """Register a method: its help (Table 8's text), source, options, extra passes, loss
    terms and parts (``normaliser=``, ``weighting=``, ``filter=``, ``allocation=``)."""
    return METHODS.add(name, Method(name, help, source, Parts(**parts), tuple(options),
                                    tuple(passes), tuple(loss_terms), pg_term, reference))


def get(name: str) -> Method:
    """A registered method, or a composition ``a+b+...`` of registered presets, with its parts'
    functions looked up (``Method.bound``)."""
    method = compose(name)
    return replace(method, bound=bind(method.parts))


def compose(name: str) -> Method:
    """``get`` without binding the parts."""
    if "+" not in name:
        return METHODS.get(name)
    names = name.split("+")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"method {name!r} names {', '.join(map(repr, twice))} more than once; "
                         f"give each part once (--method {'+'.join(dict.fromkeys(names))})")
    components = [METHODS.get(part) for part in names]
    parts = components[0].parts
    for prev, comp in zip(components, components[1:]):
        parts = parts.merge(comp.parts, (prev.name, comp.name))

    def union(attr: str) -> tuple:
        out: dict = {}
        for c in components:
            for item in getattr(c, attr):
                out.setdefault(getattr(item, "name", item), item)
        return tuple(out.values())

    return Method(name=name, help=" + ".join(c.help for c in components),
                  source="; ".join(c.source for c in components), parts=parts,
                  options=union("options"), passes=union("passes"),
                  loss_terms=union("loss_terms"),
                  pg_term=any(c.pg_term for c in components),
                  reference=next((c.reference for c in components if c.reference), None))


@derived(METHODS)
def option_classes() -> tuple[type, ...]:
    """CommonOptions, then every registered method's option classes, each once."""
    out: dict[type, None] = {CommonOptions: None}
    for name in METHODS.names():
        for cls in METHODS.get(name).options:
            out[cls] = None
    return tuple(out)


def make_options_class(method: str | None, classes: Sequence[type]) -> type:
    """One method's options object: a frozen dataclass of its option classes' fields
    (CommonOptions' first), with the conventions they name (``conv``). ``method``: whose (a
    registered name or composition; None: every registered method's, the functional API's).
    An instance pickles as its method's name and values, so a process rebuilds it from its
    own registry (``methods.registry.options_of``)."""
    cls = merged_dataclass("MethodOptions", "methods.registry", classes)

    def conv(self) -> Conventions:
        return CONVENTIONS[self.conventions]

    def reduce(self):
        return options_from, (method, {f: getattr(self, f) for f in self.__dataclass_fields__})

    cls.conv, cls.__reduce__, cls.method = property(conv), reduce, method
    return cls


@derived(METHODS)
def options_class() -> type:
    """Every registered method's options in one frozen dataclass (the functional API's
    ``methods.options()``, which names no method); remade when a method registers."""
    return make_options_class(None, option_classes())


@functools.cache  # a registered name's options never change (names are registered once)
def options_of(name: str) -> type:
    """The options class of method ``name`` (a composition too): its option classes' fields,
    CommonOptions' first; what a run's config carries (``MethodConfig.options``), one class per
    name for the process's life, so configs made before and after a plugin registers compare
    equal. Raises as :func:`get` does for an unknown name (and is not cached then)."""
    return make_options_class(name, (CommonOptions, *compose(name).options))


def options_from(method: str | None, values: dict):
    """An options object of ``method`` (None: every registered method's) with these values
    (how one unpickles)."""
    return (options_class() if method is None else options_of(method))(**values)


@derived(METHODS)
def option_owners() -> dict[str, tuple[str, ...]]:
    """Each method option's name -> the registered methods that read it (CommonOptions' left
    out: every method reads them)."""
    common = {f.name for f in fields(CommonOptions)}
    out: dict[str, list[str]] = {}
    for name, method in METHODS.items():
        for f in (f for cls in method.options for f in fields(cls) if f.name not in common):
            out.setdefault(f.name, []).append(name)
    return {k: tuple(v) for k, v in out.items()}
