"""User plugins: Python files or modules that register their own methods or tasks.

``--plugin my_methods.py`` imports the file in the driver and in every worker before any
registry is used, so a new advantage strategy or task runs without editing the harness.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Iterable

_loaded: set[str] = set()


def load_plugins(entries: Iterable[str]) -> None:
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
