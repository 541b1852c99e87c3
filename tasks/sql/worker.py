"""The SQL sandbox's worker process: executes untrusted queries against read-only SQLite files.

Started by :mod:`tasks.sql.sandbox` as ``python -E -s worker.py LIMITS_JSON`` (by file, so that
it imports only the standard library, sqlglot and its siblings ``compare.py`` and ``layout.py``,
not the harness). It reads jobs from stdin and writes results to stdout, each a 4-byte
big-endian length and a pickle; the parent is trusted, the responses and SQL inside the jobs are
not. A ``response`` job does all the per-response work (format check, query extraction,
normalisation, execution, comparison), so all of it runs in parallel across workers.

Defences, from the outside in (the parent adds a hard wall-clock kill of this process):

* the database is opened with the URI ``mode=ro&immutable=1`` (no writes, no journal, no locks,
  no WAL/SHM files are created) and ``PRAGMA query_only``;
* an authorizer allows only reading: SELECT, column reads, recursive CTEs and functions other
  than ``load_extension``; every write, DDL, ATTACH/DETACH, PRAGMA and transaction is denied;
  extension loading is switched off and the ATTACH limit is 0;
* Python's sqlite3 refuses a string with more than one statement;
* a progress handler interrupts the statement once its time limit has passed;
* limits on the SQL text length, on any single string/blob, on result rows and result bytes, and
  a process-wide SQLite heap limit.
"""
from __future__ import annotations

import json
import os
import pickle
import sqlite3
import struct
import sys
import time
import urllib.parse
from collections import OrderedDict

if __package__ in (None, ""):  # run by file (the sandbox's way): import the sibling module
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from compare import prepare, results_equal  # type: ignore[no-redef]
    from layout import extract_sql, format_ok  # type: ignore[no-redef]
else:
    from tasks.sql.compare import prepare, results_equal
    from tasks.sql.layout import extract_sql, format_ok

_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
            sqlite3.SQLITE_RECURSIVE}
_DENIED_FUNCTIONS = {"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"}
_HEAP_LIMIT = 2 << 30  # bytes SQLite may allocate in this process (sqlite3_hard_heap_limit64)
_GOLD_CACHE_SIZE = 512


class QueryError(Exception):
    """A query failed: an SQLite error, a denied operation, a limit reached."""


def _authorize(action, arg1, arg2, db_name, trigger):
    if action not in _ALLOWED:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and str(arg2).lower() in _DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


class Executor:
    """Read-only connections (one per database file, reused) and limited execution."""

    def __init__(self, limits: dict) -> None:
        self.timeout = float(limits["timeout"])
        self.max_rows = int(limits["max_rows"])
        self.max_bytes = int(limits["max_bytes"])
        self.max_sql_chars = int(limits["max_sql_chars"])
        self.connections: dict[str, sqlite3.Connection] = {}
        self.gold: OrderedDict = OrderedDict()
        self.deadline = 0.0

    def connect(self, path: str) -> sqlite3.Connection:
        conn = self.connections.get(path)
        if conn is not None:
            return conn
        if not os.path.isfile(path):  # without this check SQLite would report "unable to open"
            raise QueryError(f"database file not found: {path}")
        uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro&immutable=1"
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        # The official Spider evaluation decodes TEXT this way; some databases hold bad UTF-8.
        conn.text_factory = lambda b: b.decode(errors="ignore")
        conn.execute("PRAGMA query_only = ON")
        if len(self.connections) == 0:
            conn.execute(f"PRAGMA hard_heap_limit = {_HEAP_LIMIT}")
        if hasattr(conn, "enable_load_extension"):
            conn.enable_load_extension(False)
        conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max(self.max_bytes, 1_000_000))
        conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, self.max_sql_chars)
        conn.set_authorizer(_authorize)
        conn.set_progress_handler(lambda: time.monotonic() > self.deadline, 1000)
        self.connections[path] = conn
        return conn

    def run(self, path: str, sql: str) -> list[tuple]:
        """All rows of ``sql`` on ``path``; QueryError on any failure or limit."""
        if len(sql) > self.max_sql_chars:
            raise QueryError(f"query has {len(sql)} characters, over the limit of "
                             f"{self.max_sql_chars}")
        conn = self.connect(path)
        self.deadline = time.monotonic() + self.timeout
        rows: list[tuple] = []
        size = 0
        try:
            cursor = conn.execute(sql)
            while True:
                batch = cursor.fetchmany(256)
                if not batch:
                    break
                rows.extend(batch)
                if len(rows) > self.max_rows:
                    raise QueryError(f"result has more than {self.max_rows} rows")
                for row in batch:
                    size += 16 + sum(len(v) if isinstance(v, (str, bytes)) else 8 for v in row)
                if size > self.max_bytes:
                    raise QueryError(f"result is larger than {self.max_bytes} bytes")
            cursor.close()
        except QueryError:
            raise
        except sqlite3.OperationalError as exc:
            if time.monotonic() > self.deadline:
                raise QueryError(f"timed out after {self.timeout:g} s") from None
            raise QueryError(f"{type(exc).__name__}: {exc}") from None
        except (sqlite3.Error, ValueError, UnicodeError, OverflowError, MemoryError) as exc:
            raise QueryError(f"{type(exc).__name__}: {exc}") from None
        finally:
            self.deadline = 0.0
        return rows

    def gold_rows(self, path: str, sql: str) -> list[tuple]:
        key = (path, sql)
        if key in self.gold:
            self.gold.move_to_end(key)
            return self.gold[key]
        rows = self.run(path, sql)
        self.gold[key] = rows
        if len(self.gold) > _GOLD_CACHE_SIZE:
            self.gold.popitem(last=False)
        return rows

    # -- jobs -----------------------------------------------------------------------------------
    def check(self, job: dict) -> dict:
        """Run the prediction (and the gold query) on every database; compare the results.

        Returns ``executed`` (the prediction ran on every database), ``match`` (its results
        equal the gold's everywhere; None without a gold query or when the gold failed),
        ``error`` (why the prediction failed) and ``gold_error``.
        """
        out = {"executed": True, "match": None, "error": None, "gold_error": None, "rows": 0}
        gold_sql = job.get("gold")
        match = gold_sql is not None
        for path in job["dbs"]:
            try:
                pred = self.run(path, job["pred"])
            except QueryError as exc:
                return {**out, "executed": False, "match": False if gold_sql else None,
                        "error": str(exc)}
            out["rows"] = len(pred)
            if gold_sql is None or not match:
                continue
            try:
                gold = self.gold_rows(path, gold_sql)
            except QueryError as exc:
                return {**out, "match": None, "gold_error": f"{os.path.basename(path)}: {exc}"}
            match = results_equal(gold, pred, job.get("semantics", "spider"),
                                  bool(job.get("order_matters", False)))
        out["match"] = match if gold_sql is not None else None
        return out

    def response(self, job: dict) -> dict:
        """Everything the rewards and the scorer need from one response: ``format_ok``, ``sql``
        (None when no query is found) and :meth:`check`'s outcome for it."""
        text = job["response"]
        out = {"format_ok": format_ok(text), "sql": extract_sql(text)}
        if out["sql"] is None:
            return {**out, "executed": False, "match": False, "error": "no SQL query found",
                    "gold_error": None, "rows": 0}
        try:
            pred, gold, ordered = prepare(out["sql"], job["gold"], job["semantics"],
                                          bool(job.get("keep_distinct", False)))
        except ValueError as exc:
            return {**out, "executed": False, "match": False, "error": str(exc),
                    "gold_error": None, "rows": 0}
        return {**out, **self.check({"dbs": job["dbs"], "pred": pred, "gold": gold,
                                     "semantics": job["semantics"], "order_matters": ordered})}

    def handle(self, job: dict) -> dict:
        op = job.get("op")
        if op == "response":
            return self.response(job)
        if op == "check":
            return self.check(job)
        if op == "rows":
            try:
                return {"rows": self.run(job["db"], job["sql"]), "error": None}
            except QueryError as exc:
                return {"rows": None, "error": str(exc)}
        if op == "sleep":  # lets tests exercise the parent's hard kill
            time.sleep(float(job["seconds"]))
            return {}
        raise ValueError(f"unknown job {op!r}")


def _read_exact(stream, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def main() -> None:
    limits = json.loads(sys.argv[1])
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write to the result channel
    executor = Executor(limits)
    while True:
        try:
            (length,) = struct.unpack(">I", _read_exact(stdin, 4))
            job = pickle.loads(_read_exact(stdin, length))
        except EOFError:  # the parent closed the pipe or died: stop
            return
        try:
            result = executor.handle(job)
        except Exception as exc:  # a bug, not a query failure: report it, keep serving
            result = {"internal_error": f"{type(exc).__name__}: {exc}"}
        payload = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
        stdout.write(struct.pack(">I", len(payload)) + payload)
        stdout.flush()


if __name__ == "__main__":
    main()
