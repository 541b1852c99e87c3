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


class PluginError(ImportError):
    """A plugin that cannot be loaded: one line naming its file and line, and the fix."""


def _builtin_names() -> set[tuple[str, str]]:
    """(kind, name) of everything registered before the first plugin: the built-ins."""
    import methods
    import tasks

    return {(reg.kind, name) for reg in (methods.METHODS, tasks.TASKS, tasks.TRAIN_SETS)
            for name in reg.names()}


_BUILTIN: set[tuple[str, str]] = set()


def _where(exc: BaseException, path: Path | None) -> str:
    """'FILE:LINE' of the innermost frame in the plugin's own file (else its last frame)."""
    import traceback

    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}"
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if path is not None and Path(f.filename) == path]
    frame = (own or frames or [None])[-1]
    return f"{frame.filename}:{frame.lineno}" if frame else str(path)


def _import(entry: str) -> None:
    from common.registry import DuplicateNameError

    path = Path(entry).resolve() if entry.endswith(".py") else None
    try:
        if path is not None:
            if not path.is_file():
                raise PluginError(f"--plugin {entry}: the file does not exist")
            name = f"harness_plugin_{path.stem}"
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        else:
            try:
                importlib.import_module(entry)
            except ModuleNotFoundError as exc:
                if exc.name != entry.split(".")[0] and exc.name != entry:
                    raise
                raise PluginError(f"--plugin {entry}: no module of that name is importable "
                                  "(give a .py file's path, or install the module)") from None
    except PluginError:
        raise
    except DuplicateNameError as exc:
        builtin = (exc.kind, exc.name) in _BUILTIN
        why = (f"{exc.kind} {exc.name!r} is built-in" if builtin
               else f"{exc.kind} {exc.name!r} is registered twice (another plugin has it)")
        raise PluginError(f"plugin {_where(exc, path)}: {why}; give yours another name") \
            from None
    except SyntaxError as exc:
        raise PluginError(f"plugin {_where(exc, path)}: syntax error: {exc.msg}") from None
    except Exception as exc:
        raise PluginError(f"plugin {_where(exc, path)}: {type(exc).__name__}: {exc}") from None


# what must hold once a plugin registered its names (harness.config adds its flat map of every
# option, which refuses a name used twice); a RuntimeError undoes the plugin
AFTER_LOAD: list = []


def _registries() -> list:
    """Every registry of settings a plugin may add to."""
    from harness.presets import PRESETS
    from methods.compose import ALLOCATIONS, FILTERS, NORMALISERS, WEIGHTINGS
    from methods.registry import METHODS
    from tasks.registry import FAMILY_OPTIONS, TASKS, TRAIN_SETS

    return [METHODS, NORMALISERS, WEIGHTINGS, FILTERS, ALLOCATIONS, TASKS, TRAIN_SETS,
            FAMILY_OPTIONS, PRESETS]


def load_plugins(entries: Iterable[str]) -> None:
    """Import each file or module once (a failure is one ``PluginError`` line naming the
    plugin's file and line). What they register is read from the registries from then on (a
    plugin method's options class is its own; a plugin family's options are the options object
    of its tasks' sections: ``harness.task_config``). Called by the entry points only:
    ``harness.run`` (every run's resolution), the CLI (before its flags are built) and the
    config (``RunConfig.from_dict``: a stored config names its plugins; ``apply_overrides``:
    a method they register is named with them)."""
    for entry in entries:
        if entry in _loaded:
            continue
        if not _BUILTIN:
            _BUILTIN.update(_builtin_names())
        before = {id(r): (r, r.snapshot()) for r in _registries()}
        modules = set(sys.modules)
        try:
            _import(entry)
            try:  # its options must not reuse the name of another option or setting
                for check in AFTER_LOAD:
                    check()
            except RuntimeError as exc:
                raise PluginError(f"plugin {entry}: an option it registers has the name of "
                                  f"another: {exc}; rename the plugin's option (e.g. with its "
                                  "method's name as a prefix)") from None
        except PluginError:
            # undone: what it registered is gone, and loading it again fails the same way
            for registry, entries in before.values():
                registry.restore(entries)
            for name in set(sys.modules) - modules:
                if name.startswith("harness_plugin_"):
                    del sys.modules[name]
            raise
        _loaded.add(entry)


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
