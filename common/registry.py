"""One small generic registry: names map to objects; unknown names fail loudly.

Every registry in the project (methods, tasks, training sets, presets, benchmarks) is an
instance of :class:`Registry`, so every "unknown name" error looks the same and always lists
the known names with a "did you mean" suggestion.
"""
from __future__ import annotations

import difflib
from contextlib import contextmanager
from typing import Generic, Iterable, Iterator, TypeVar

T = TypeVar("T")

# Set while ``sealed()`` holds: the reads a resolved run's layers must not make.
_SEALED: list[str] = []


class ReadAfterResolution(RuntimeError):
    """A registry was read while ``sealed()`` held: a layer below the resolved run looked a
    name up instead of reading what the run resolved."""


@contextmanager
def sealed(why: str = "the run is resolved"):
    """Registries of names a run's settings give refuse every read inside this block (the
    tests' guard that what runs after ``harness.run.resolve`` reads the ``Run``, not the
    registries)."""
    _SEALED.append(why)
    try:
        yield
    finally:
        _SEALED.pop()


class UnknownNameError(KeyError):
    """Raised for a name no registry entry has; the message lists the known names."""

    def __str__(self) -> str:  # KeyError quotes its argument; we want plain text
        return str(self.args[0])


class DuplicateNameError(ValueError):
    """Raised when a name is registered a second time (``kind``, ``name``: which)."""

    def __init__(self, kind: str, name: str) -> None:
        self.kind, self.name = kind, name
        super().__init__(f"{kind} {name!r} is registered twice")


def close_names(name: str, known: Iterable[str], n: int = 1, cutoff: float = 0.5,
                family: int = 8) -> list[str]:
    """The known names ``name`` probably meant, case-insensitively: the one it spells in
    another case; else, of the names it begins (3 or more characters), those at most two
    characters longer (``smok`` -> ``smoke``, not ``smoke-learn``), or else that whole family
    (``spider`` -> ``spider-dev``, ``spider-dk``, ..., at most ``family``, in order); else the
    ``n`` closest by ``difflib`` (``cutoff``)."""
    by_lower: dict[str, str] = {}
    for k in sorted(known):
        by_lower.setdefault(k.lower(), k)
    key = name.lower()
    if key in by_lower:
        return [by_lower[key]]
    if len(key) >= 3:
        members = [k for low, k in by_lower.items() if low.startswith(key)]
        if members:
            return ([m for m in members if len(m) <= len(key) + 2] or members)[:family]
    return [by_lower[c] for c in difflib.get_close_matches(key, list(by_lower), n=n,
                                                           cutoff=cutoff)]


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """'; did you mean ...?' from :func:`close_names` (``-`` and ``_`` alike, for keywords
    and flags); '' when nothing is close."""
    norm = {k.replace("-", "_"): k for k in known}
    close = close_names(name.lstrip("-").replace("-", "_"), norm, n=2, cutoff=0.6)
    return f"; did you mean {' or '.join(repr(norm[c]) for c in close)}?" if close else ""


class Registry(Generic[T]):
    """A named collection of entries of one kind (``kind`` is used in error messages)."""

    def __init__(self, kind: str, of_settings: bool = True) -> None:
        """``of_settings``: its names come from a run's settings, so ``sealed`` refuses its
        reads (False: from data items, e.g. an instruction's checker, read per item)."""
        self.kind, self.of_settings = kind, of_settings
        self._entries: dict[str, T] = {}
        self.version = 0  # registrations so far: what is derived from it is made once each

    def add(self, name: str, entry: T) -> T:
        if name in self._entries:
            raise DuplicateNameError(self.kind, name)
        self._entries[name] = entry
        self.version += 1
        return entry

    def snapshot(self) -> dict[str, T]:
        """Its entries now, for :meth:`restore` (a plugin that failed to load is undone)."""
        return dict(self._entries)

    def restore(self, entries: dict[str, T]) -> None:
        """Back to a :meth:`snapshot`; what is derived from it is derived again."""
        if entries != self._entries:
            self._entries = dict(entries)
            self.version += 1

    def _read(self, what: str) -> None:
        if _SEALED and self.of_settings:
            raise ReadAfterResolution(f"{self.kind} registry read ({what}) after {_SEALED[-1]}")

    def get(self, name: str) -> T:
        self._read(repr(name))
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownNameError(self.unknown_message(name)) from None

    def unknown_message(self, name: str) -> str:
        known = ", ".join(sorted(self._entries)) or "(none)"
        close = close_names(name, self._entries)
        hint = (f" Did you mean {close[0]!r}?" if len(close) == 1 else
                f" Did you mean one of {', '.join(map(repr, close))}?" if close else "")
        return f"unknown {self.kind} {name!r}.{hint} Known {self.kind}s: {known}"

    def names(self) -> list[str]:
        self._read("names")
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        self._read(f"{name!r} in")
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def items(self) -> list[tuple[str, T]]:
        return [(n, self._entries[n]) for n in self.names()]


def derived(*registries: Registry):
    """Decorate ``fn(*args)`` derived from these registries' entries (the option classes, the
    flags): computed once per state of them, so a resolved run's readers list nothing again."""
    def wrap(fn):
        cache: dict = {}

        def cached(*args):
            state = tuple(r.version for r in registries)
            if cache.get(None) != state:  # something registered since: derive again
                cache.clear()
                cache[None] = state
            if args not in cache:
                cache[args] = fn(*args)
            return cache[args]

        cached.__doc__, cached.__name__, cached.__wrapped__ = fn.__doc__, fn.__name__, fn
        return cached
    return wrap
