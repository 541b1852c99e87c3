"""A module imported on first use, for the commands that never need it.

``torch = lazy("torch", globals())`` at the top of a module: the first attribute read imports
torch and puts the real module in that module's globals, so later reads are plain global
lookups. ``python -m harness --help``, ``list`` and ``compare`` build every method's options
(one flag each) and never touch a tensor: importing torch would cost them seconds.
"""
from __future__ import annotations

import importlib
from typing import Any


class _Lazy:
    def __init__(self, name: str, namespace: dict) -> None:
        self._name, self._namespace = name, namespace

    def _load(self) -> Any:
        module = importlib.import_module(self._name)
        # replace the stand-in wherever it was bound under this name, so it is read only once
        if self._namespace.get(self._name.split(".")[-1]) is self:
            self._namespace[self._name.split(".")[-1]] = module
        return module

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._load(), attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


def lazy(name: str, namespace: dict) -> Any:
    """``name``'s module, imported on first attribute read (see the module docstring)."""
    return _Lazy(name, namespace)
