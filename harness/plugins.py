"""User plugins: Python files or modules that register their own methods or tasks.

``--plugin my_methods.py`` imports the file in the driver and in every worker before any
registry is used, so a new advantage strategy or task runs without editing the harness.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Callable, Iterable

_loaded: set[str] = set()
# called after new plugins were imported (harness.config remakes its option sections there)
AFTER_LOAD: list[Callable[[], object]] = []


def load_plugins(entries: Iterable[str]) -> None:
    """Import each file or module once; then the ``AFTER_LOAD`` hooks run (the config classes
    are remade, so that the options the plugins registered are config fields and flags)."""
    new = False
    for entry in entries:
        if entry in _loaded:
            continue
        if entry.endswith(".py"):
            path = Path(entry)
            if not path.is_file():
                raise FileNotFoundError(f"plugin file {path} does not exist")
            name = f"harness_plugin_{path.stem}"
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        else:
            importlib.import_module(entry)
        _loaded.add(entry)
        new = True
    if new:
        for hook in AFTER_LOAD:
            hook()


def files(entries: Iterable[str]) -> list[Path]:
    """The source files of these plugins (a module's file, a package's .py files), for the
    code's fingerprint: a result made by an edited plugin is other code."""
    out: list[Path] = []
    for entry in entries:
        if entry.endswith(".py"):
            out.append(Path(entry).resolve())
            continue
        spec = importlib.util.find_spec(entry)
        if spec is None or spec.origin is None:
            raise ModuleNotFoundError(f"plugin module {entry!r} cannot be found")
        origin = Path(spec.origin).resolve()
        out += sorted(origin.parent.rglob("*.py")) if origin.name == "__init__.py" \
            else [origin]
    return out
