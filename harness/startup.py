"""Where a run's start-up goes: named marks on one clock, seconds since the command's process
started.

The driver marks its phases (imports done, run resolved and checked, Ray started, Ray Train's
fit called) and hands its marks and its clock to the workers; a worker marks its own (its
process started, its entry reached, the trainer's model, engines and first sync) on the same
clock, and its first step's log carries them all as ``time/startup/<mark>``, so ``bench
launch`` and a user's training log show one timeline. A Trainer made in-process without a
driver's clock (tests, ``bench vs-trl``) counts from its own process's start.
"""
from __future__ import annotations

import time

_MARKS: dict[str, float] = {}


def process_start(pid: int | None = None) -> float:
    """When a process (this one by default) started, in seconds since the epoch."""
    import psutil

    return psutil.Process(pid).create_time()


def mark(name: str, again: bool = False) -> None:
    """Record the driver's ``name`` now: the first time only (a second seed's does not move the
    command's own phases), or every time with ``again`` (``fit_called``: each fit's own, so that
    a seed's worker phases are measured from its fit, not the warm start's or an earlier
    seed's)."""
    if again or name not in _MARKS:
        _MARKS[name] = time.time() - process_start()


def handoff() -> dict:
    """What a worker needs to mark on the driver's clock: the clock's origin (this process's
    start, epoch seconds) and the driver's marks so far."""
    return {"origin": process_start(), "marks": dict(_MARKS)}


class Clock:
    """A worker's marks on the driver's clock (``handoff()``), or on its own process's when
    there is no driver."""

    def __init__(self, handed: dict | None = None) -> None:
        handed = handed or {}
        self.origin = handed.get("origin") or process_start()
        self.marks: dict[str, float] = dict(handed.get("marks", {}))
        if handed.get("origin"):
            # the worker process may have been started ahead by Ray (an idle pooled process)
            self.marks["worker_process_started"] = process_start() - self.origin

    def mark(self, name: str) -> None:
        self.marks[name] = time.time() - self.origin

    def metrics(self) -> dict[str, float]:
        """The marks as the first step's log carries them, in time order."""
        return {f"time/startup/{k}": v for k, v in sorted(self.marks.items(), key=lambda kv: kv[1])}
