"""A Ray Train worker stops as soon as its node's raylet is gone.

Ray starts each worker in a process group of its own, so killing a job's process group (the
driver, the GCS and the raylet: what ``kill -9 -PGID`` or a crashed terminal does) leaves the
workers running. A training worker talks to Ray only when it reports, so an orphan went on
training, saved checkpoints and stored the seed's result after its driver was dead, racing
the run that resumes the seed. The worker's parent is the raylet that started it; when that
parent dies the worker is re-parented, and this module notices and exits: a watchdog thread
polls, and every durable write (a log row, a checkpoint, the result) checks first, so an
orphan writes nothing even between two polls.

``arm`` is called by the Ray worker entries only; in-process runs (tests, ``bench step``) have
no raylet, and ``check`` does nothing there.
"""
from __future__ import annotations

import os
import sys
import threading

POLL_S = 0.2  # how often the watchdog looks at the parent (a getppid call: nothing to measure)
EXIT_CODE = 70  # what an orphaned worker exits with (EX_SOFTWARE): distinct in Ray's logs

_parent: int | None = None  # the raylet's pid once armed


def arm(poll: float = POLL_S) -> None:
    """Record this process's parent (its raylet) and start the watchdog; idempotent."""
    global _parent
    if _parent is not None:
        return
    _parent = os.getppid()
    if _parent == 1:  # already orphaned before we could look
        _exit()
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(poll):
            check()

    threading.Thread(target=watch, name="harness-orphan-watchdog", daemon=True).start()


def orphaned() -> bool:
    """True when this process was armed and its parent is no longer the one it started with."""
    return _parent is not None and os.getppid() != _parent


def check() -> None:
    """Exit the process now if it was armed and its raylet is gone (call before writing)."""
    if orphaned():
        _exit()


def _exit() -> None:
    print(f"harness: this worker's raylet (pid {_parent}) is gone; exiting without writing",
          file=sys.stderr, flush=True)
    os._exit(EXIT_CODE)  # no cleanup handlers: they could flush a half-finished write
