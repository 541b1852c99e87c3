"""The method registry: names -> :class:`methods.base.Method`, and compositions ``a+b``.

Each method file calls :func:`add` once; ``get("gdpo+saw")`` composes registered presets
(their parts, options, passes and loss terms); :func:`options_class` is the dataclass of every
registered option (one object carries them, one flag each).
"""
from __future__ import annotations

from typing import Optional

from dataclasses import replace

from common.registry import Registry, derived
from methods.base import CommonOptions, LossTerm, Method, Parts, Pass, make_options_class
from methods.compose import bind

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
    components = [METHODS.get(part) for part in name.split("+")]
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


def options_class() -> type:
    """``MethodOptions``: every registered option in one frozen dataclass, made once (at first
    use, after the built-in methods registered; a plugin's options are read from it too)."""
    global MethodOptions
    if MethodOptions is type(None):
        MethodOptions = make_options_class("MethodOptions", __name__, option_classes)
    return MethodOptions


MethodOptions: type = type(None)  # bound once, by options_class()
