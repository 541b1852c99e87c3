"""A pool of killable worker processes that execute untrusted SQL (see :mod:`tasks.sql.worker`).

The parent hands one job at a time to each idle worker and waits on all of them at once. A job
that has not answered by its hard deadline (the in-SQLite time limit per query, times the
queries it runs, plus a grace period) gets its worker killed and replaced, and is reported as a
failed execution: a query can never stall reward computation or evaluation for longer than that.
"""
from __future__ import annotations

import atexit
import json
import os
import pickle
import select
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from tasks.sql.worker import failed_result

_WORKER = Path(__file__).with_name("worker.py")
_GRACE_S = 2.0  # on top of the in-SQLite limits: process start-up and result transfer
# a response job also checks the layout and tokenises the query before it executes anything;
# bounded by the character limits (~1 s for 32,000 dense characters on one core)
_PREPARE_S = 2.0


@dataclass(frozen=True)
class SqlLimits:
    """Limits applied to every query the sandbox runs."""

    timeout: float = 5.0  # seconds per query, enforced inside SQLite (progress handler)
    max_rows: int = 100_000  # result rows above this make the query fail
    max_bytes: int = 64 << 20  # result size (approximate, counted per row) above this fails
    # longer query texts are refused before anything tokenises them (a policy's query is a few
    # hundred characters; the longest BIRD gold queries are a few thousand)
    max_sql_chars: int = 32_000
    # longer responses score 0 on every reward, unread (bounded by generation length anyway)
    max_response_chars: int = 64_000
    max_memory: int = 1 << 30  # each worker's address space (RLIMIT_AS), SQLite's heap a quarter

    def __post_init__(self) -> None:
        if min(self.timeout, self.max_rows, self.max_bytes, self.max_sql_chars,
               self.max_response_chars, self.max_memory) <= 0:
            raise ValueError(f"SQL limits must be positive: {self}")
        if self.max_memory < 4 * self.max_bytes:
            raise ValueError(f"SQL limits: max_memory ({self.max_memory}) must be at least 4x "
                             f"max_bytes ({self.max_bytes}): the result is copied while it is "
                             "collected and sent")


class _Worker:
    def __init__(self, limits: SqlLimits) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        self.proc = subprocess.Popen(
            [sys.executable, "-E", "-s", str(_WORKER), json.dumps(asdict(limits))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True,
        )
        self.fd = self.proc.stdout.fileno()
        self.buffer = b""

    def send(self, job: dict) -> None:
        payload = pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL)
        self.proc.stdin.write(struct.pack(">I", len(payload)) + payload)
        self.proc.stdin.flush()

    def receive(self) -> list[dict]:
        """Read what is available; the frames completed by it (a partial frame, then the
        result). EOFError if the worker died."""
        chunk = os.read(self.fd, 1 << 20)
        if not chunk:
            raise EOFError
        self.buffer += chunk
        frames = []
        while len(self.buffer) >= 4:
            (length,) = struct.unpack(">I", self.buffer[:4])
            if len(self.buffer) < 4 + length:
                break
            payload, self.buffer = self.buffer[4:4 + length], self.buffer[4 + length:]
            frames.append(pickle.loads(payload))
        return frames

    def kill(self) -> None:
        try:
            self.proc.kill()
        except ProcessLookupError:
            pass
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass

    def close(self) -> None:
        try:
            self.proc.stdin.close()  # the worker stops at end of input
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


class SqlSandbox:
    """``processes`` workers sharing the same limits. Thread-safe; close() when done."""

    def __init__(self, processes: int = 2, limits: SqlLimits = SqlLimits()) -> None:
        if processes < 1:
            raise ValueError(f"the SQL sandbox needs at least one process, got {processes}")
        self.processes, self.limits = processes, limits
        self.workers: list[_Worker] = []
        self.lock = threading.Lock()
        self.killed = 0  # workers killed at their hard deadline (for diagnostics and tests)

    def hard_deadline(self, job: dict) -> float:
        queries = 2 * len(job.get("dbs", [None]))
        prepare = _PREPARE_S if job.get("op") == "response" else 0.0
        return self.limits.timeout * queries + prepare + _GRACE_S

    def map(self, jobs: Sequence[dict]) -> list[dict]:
        """Results of ``jobs`` in order; a job killed at its deadline gets
        ``{"executed": False, "match": False|None, "error": "killed ..."}``."""
        with self.lock:
            return self._map(list(jobs))

    def _map(self, jobs: list[dict]) -> list[dict]:
        results: list[dict | None] = [None] * len(jobs)
        pending = deque(range(len(jobs)))
        while len(self.workers) < min(self.processes, len(jobs)):
            self.workers.append(_Worker(self.limits))
        busy: dict[int, tuple[_Worker, int, float]] = {}  # fd -> (worker, job index, deadline)
        partial: dict[int, dict] = {}  # job index -> the worker's partial frame for it
        idle = list(self.workers)
        while pending or busy:
            while pending and idle:
                worker, i = idle.pop(), pending.popleft()
                try:
                    worker.send(jobs[i])
                except (BrokenPipeError, OSError):  # died between jobs: replace, retry the job
                    worker = self._replace(worker)
                    worker.send(jobs[i])
                busy[worker.fd] = (worker, i, time.monotonic() + self.hard_deadline(jobs[i]))
            timeout = max(0.0, min(d for _, _, d in busy.values()) - time.monotonic())
            ready, _, _ = select.select(list(busy), [], [], timeout)
            for fd in ready:
                worker, i, _ = busy[fd]
                try:
                    frames = worker.receive()
                except EOFError:
                    del busy[fd]
                    idle.append(self._replace(worker))
                    results[i] = self._failed(jobs[i], "the SQL worker process died "
                                              "(e.g. at its memory cap)", partial.get(i))
                    continue
                for frame in frames:
                    if "partial" in frame:
                        partial[i] = frame["partial"]
                        continue
                    if "internal_error" in frame:
                        raise RuntimeError(f"SQL worker failed on a job: {frame['internal_error']}")
                    del busy[fd]
                    idle.append(worker)
                    results[i] = {**partial.get(i, {}), **frame}
            now = time.monotonic()
            for fd, (worker, i, deadline) in list(busy.items()):
                if now >= deadline:
                    del busy[fd]
                    self.killed += 1
                    limit = self.hard_deadline(jobs[i])
                    results[i] = self._failed(jobs[i], f"killed at the hard limit of {limit:.1f} s",
                                              partial.get(i))
                    idle.append(self._replace(worker))
        return results  # type: ignore[return-value]

    @staticmethod
    def _failed(job: dict, why: str, partial: dict | None) -> dict:
        """A job's result when its worker died or was killed: nothing about the job's text is
        recomputed here (it may be hostile); a response job keeps the format check its worker
        sent before executing, if it got that far."""
        return {**failed_result(job, why), **(partial or {})}

    def _replace(self, worker: _Worker) -> _Worker:
        worker.kill()
        fresh = _Worker(self.limits)
        self.workers[self.workers.index(worker)] = fresh
        return fresh

    def rows(self, db: str | Path, sql: str) -> list[tuple]:
        """All rows of one query (raises ValueError with SQLite's message on failure)."""
        result = self.map([{"op": "rows", "db": str(db), "sql": sql}])[0]
        if result["error"] is not None:
            raise ValueError(result["error"])
        return result["rows"]

    def close(self) -> None:
        with self.lock:
            for worker in self.workers:
                worker.close()
            self.workers = []

    def __enter__(self) -> "SqlSandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_SHARED: dict[tuple, SqlSandbox] = {}
_SHARED_LOCK = threading.Lock()


def shared_sandbox(processes: int, limits: SqlLimits) -> SqlSandbox:
    """One long-lived sandbox per (processes, limits) in this process, closed at exit."""
    key = (processes, limits)
    with _SHARED_LOCK:
        if key not in _SHARED:
            if not _SHARED:
                atexit.register(close_shared)
            _SHARED[key] = SqlSandbox(processes, limits)
        return _SHARED[key]


def close_shared() -> None:
    with _SHARED_LOCK:
        for sandbox in _SHARED.values():
            sandbox.close()
        _SHARED.clear()
