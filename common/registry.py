"""One small generic registry: names map to objects; unknown names fail loudly.

Every registry in the project (methods, tasks, training sets, presets, benchmarks) is an
instance of :class:`Registry`, so every "unknown name" error looks the same and always lists
the known names with a "did you mean" suggestion.
"""
from __future__ import annotations

import difflib
from typing import Callable, Generic, Iterator, TypeVar

T = TypeVar("T")


class UnknownNameError(KeyError):
    """Raised for a name no registry entry has; the message lists the known names."""

    def __str__(self) -> str:  # KeyError quotes its argument; we want plain text
        return str(self.args[0])


class Registry(Generic[T]):
    """A named collection of entries of one kind (``kind`` is used in error messages)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}

    def add(self, name: str, entry: T) -> T:
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._entries[name] = entry
        return entry

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator form: ``@REGISTRY.register("name")``."""
        return lambda entry: self.add(name, entry)

    def get(self, name: str) -> T:
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownNameError(self.unknown_message(name)) from None

    def unknown_message(self, name: str) -> str:
        known = ", ".join(sorted(self._entries)) or "(none)"
        close = difflib.get_close_matches(name, list(self._entries), n=1, cutoff=0.5)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        return f"unknown {self.kind} {name!r}.{hint} Known {self.kind}s: {known}"

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def items(self) -> list[tuple[str, T]]:
        return [(n, self._entries[n]) for n in self.names()]
