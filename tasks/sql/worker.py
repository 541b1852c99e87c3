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
* temporary storage (sorts, GROUP BY, materialised subqueries) stays in memory under SQLite's
  heap limit (``PRAGMA temp_store = MEMORY``): nothing is spilled to disk;
* an authorizer allows only reading: SELECT, column reads, recursive CTEs and functions other
  than ``load_extension``; every write, DDL, ATTACH/DETACH, PRAGMA and transaction is denied;
  extension loading is switched off and the ATTACH limit is 0;
* Python's sqlite3 refuses a string with more than one statement;
* a watchdog timer interrupts the statement (``sqlite3_interrupt``, which SQLite checks at every
  step of its loops) when its time limit has passed, and a progress handler checks the deadline
  too; any one step is short, because no string, blob or row may exceed a few MB;
* sizes are checked before anything is parsed: a response or query text over its character
  limit is refused unread, so the format check and the tokeniser only ever see bounded input;
* the result's size is counted row by row as it is fetched, and the process's address space is
  capped by the operating system (``RLIMIT_AS``), below which SQLite's own heap limit sits: a
  query that builds huge values fails with an error (or, at worst, kills only this worker);
* "executable" means something was asked of the database: a statement that returns no result
  set (a comment, VACUUM, REINDEX) or a SELECT that reads no table of the database (``SELECT
  printf(...)``) is refused, so doing nothing cannot earn the executable reward.

For a ``response`` job the worker first sends a partial frame with the format check and the
extracted query, then the full result: when the parent kills it at the hard deadline, the
parent already has what it needs and repeats no work on the hostile text itself.
"""
from __future__ import annotations

import json
import os
import pickle
import resource
import sqlite3
import struct
import sys
import threading
import time
import urllib.parse
from collections import OrderedDict

if __package__ in (None, ""):  # run by file (the sandbox's way): import the sibling module
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from compare import prepare_gold, prepare_prediction, results_equal  # type: ignore[no-redef]
    from layout import extract_sql, format_ok  # type: ignore[no-redef]
else:
    from tasks.sql.compare import prepare_gold, prepare_prediction, results_equal
    from tasks.sql.layout import extract_sql, format_ok

_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
            sqlite3.SQLITE_RECURSIVE}
_DENIED_FUNCTIONS = {"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"}
_GOLD_CACHE_SIZE = 512
# SQLite VM steps between two checks of the deadline by the progress handler; the watchdog
# timer's interrupt (checked by SQLite at every loop step, with no Python call) is what holds
# the limit when single steps are expensive
_PROGRESS_STEPS = 1000


def heap_limit(max_memory: int) -> int:
    """Bytes SQLite may allocate in the worker: a quarter of its address space, so that the
    rows Python copies out of SQLite still fit under the operating system's cap."""
    return max(16 << 20, max_memory // 4)


def value_limit(max_bytes: int) -> int:
    """The largest string, blob or row SQLite may build (``SQLITE_LIMIT_LENGTH``): an eighth of
    the result cap, at least 1 MB (real databases' longest values are far below this)."""
    return max(1_000_000, max_bytes // 8)


class QueryError(Exception):
    """A query failed: an SQLite error, a denied operation, a limit reached."""


def failed_result(job: dict, why: str) -> dict:
    """The result of a job that could not be done (a limit, a killed or crashed worker); a
    ``response`` job's format fields come from its partial frame, or are False/None."""
    if job.get("op") == "rows":
        return {"rows": None, "error": why}
    if job.get("op") == "gold":
        return {"gold_error": why}
    out = {"executed": False, "reads_database": False, "match": False if job.get("gold") else None,
           "error": why, "gold_error": None, "rows": 0}
    if job.get("op") == "response":
        out.update(format_ok=False, sql=None)
    return out




def _not_run(out: dict, match: bool | None, error: str) -> dict:
    """A response job's result when its query was not executed (``error`` says why)."""
    return {**out, "executed": False, "reads_database": False, "match": match, "error": error,
            "gold_error": None, "rows": 0}


class Executor:
    """Read-only connections (one per database file, reused) and limited execution."""

    def __init__(self, limits: dict) -> None:
        self.timeout = float(limits["timeout"])
        self.max_rows = int(limits["max_rows"])
        self.max_bytes = int(limits["max_bytes"])
        self.max_sql_chars = int(limits["max_sql_chars"])
        self.max_response_chars = int(limits["max_response_chars"])
        self.heap_limit = heap_limit(int(limits["max_memory"]))
        self.connections: dict[str, sqlite3.Connection] = {}
        self.gold: OrderedDict = OrderedDict()
        self.deadline = 0.0
        self.read_names: set[str] = set()  # tables (or CTEs) the last statement read
        self.read_database = False  # the last statement read a table of its database
        self.table_names: dict[str, set[str]] = {}  # path -> its tables and views, lowercased
        self.send_partial = lambda partial: None  # main() sends it to the parent

    def _authorize(self, action, arg1, arg2, db_name, trigger):
        if action not in _ALLOWED:
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_FUNCTION and str(arg2).lower() in _DENIED_FUNCTIONS:
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_READ and arg1:
            # a CTE's reads look like a table's (no database name): resolved against the
            # database's own tables in ``run``
            self.read_names.add(str(arg1).lower())
        return sqlite3.SQLITE_OK

    def connect(self, path: str) -> sqlite3.Connection:
        conn = self.connections.get(path)
        if conn is not None:
            return conn
        if not os.path.isfile(path):  # without this check SQLite would report "unable to open"
            raise QueryError(f"database file not found: {path}")
        uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro&immutable=1"
        # no statement cache: the authorizer (and its record of tables read) must see every
        # statement prepared afresh
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False,
                               cached_statements=0)
        # The official Spider evaluation decodes TEXT this way; some databases hold bad UTF-8.
        conn.text_factory = lambda b: b.decode(errors="ignore")
        conn.execute("PRAGMA query_only = ON")
        # sorts, GROUP BY and materialised subqueries keep their temporary storage in memory,
        # under the heap limit below: on files (SQLite's default) a large cross join spills
        # hundreds of MB to /var/tmp before its time limit stops it
        conn.execute("PRAGMA temp_store = MEMORY")
        if len(self.connections) == 0:
            conn.execute(f"PRAGMA hard_heap_limit = {self.heap_limit}")
        if hasattr(conn, "enable_load_extension"):
            conn.enable_load_extension(False)
        conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, value_limit(self.max_bytes))
        conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, self.max_sql_chars)
        conn.set_authorizer(self._authorize)
        conn.set_progress_handler(lambda: time.monotonic() > self.deadline, _PROGRESS_STEPS)
        self.connections[path] = conn
        names = conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
        self.table_names[path] = {n.lower() for (n,) in names} | {"sqlite_master",
                                                                  "sqlite_schema"}
        return conn

    def run(self, path: str, sql: str, prediction: bool = False) -> list[tuple]:
        """All rows of ``sql`` on ``path``; QueryError on any failure or limit. For a
        ``prediction``, a statement that returns no result set (a comment, VACUUM, REINDEX)
        fails too, and ``self.read_database`` says whether it read a table of the database."""
        if len(sql) > self.max_sql_chars:
            raise QueryError(f"query has {len(sql)} characters, over the limit of "
                             f"{self.max_sql_chars}")
        conn = self.connect(path)
        self.deadline = time.monotonic() + self.timeout
        watchdog = threading.Timer(self.timeout, conn.interrupt)
        watchdog.daemon = True
        watchdog.start()
        self.read_names = set()
        rows: list[tuple] = []
        size = 0
        try:
            cursor = conn.execute(sql)
            if prediction and cursor.description is None:
                raise QueryError("the statement returns no result set (not a query)")
            self.read_database = bool(self.read_names & self.table_names[path])
            # row by row: a batch of rows can be far larger than the cap by itself
            for row in cursor:
                rows.append(row)
                if len(rows) > self.max_rows:
                    raise QueryError(f"result has more than {self.max_rows} rows")
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
            watchdog.cancel()
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

        Returns ``executed`` (the prediction ran on every database), ``reads_database`` (it
        read a table of each: a constant ``SELECT`` runs but asks nothing), ``match`` (its
        results equal the gold's everywhere, as the official scorers compare them; None without
        a gold query or when the gold failed), ``error`` (why the prediction failed) and
        ``gold_error``.
        """
        out = {"executed": True, "reads_database": True, "match": None, "error": None,
               "gold_error": None, "rows": 0}
        gold_sql = job.get("gold")
        match = gold_sql is not None
        for path in job["dbs"]:
            try:
                pred = self.run(path, job["pred"], prediction=True)
            except QueryError as exc:
                return {**out, "executed": False, "reads_database": False,
                        "match": False if gold_sql else None,
                        "error": str(exc)}
            out["rows"] = len(pred)
            out["reads_database"] = out["reads_database"] and self.read_database
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
        miss = False if job["gold"] is not None else None  # a failure's match: None w/o gold
        if len(text) > self.max_response_chars:  # refused unread: no regex or tokeniser on it
            out = {"format_ok": False, "sql": None}
            self.send_partial(out)
            return _not_run(out, miss, f"response has {len(text)} characters, over the limit "
                                       f"of {self.max_response_chars}")
        sql = extract_sql(text)
        if sql is not None and len(sql) > self.max_sql_chars:
            out = {"format_ok": False, "sql": None}
            self.send_partial(out)
            return _not_run(out, miss, f"query has {len(sql)} characters, over the limit of "
                                       f"{self.max_sql_chars}")
        out = {"format_ok": format_ok(text), "sql": sql}
        self.send_partial(out)
        if out["sql"] is None:
            return _not_run(out, miss, "no SQL query found")
        gold, ordered, gold_error = None, False, None
        if job["gold"] is not None:  # None: the parent's gold pass found the gold query failing
            try:
                gold, ordered = prepare_gold(job["gold"], job["semantics"],
                                             bool(job.get("keep_distinct", False)))
            except ValueError as exc:
                gold_error = f"gold query cannot be prepared: {exc}"
        try:
            pred = prepare_prediction(out["sql"], job["semantics"],
                                      bool(job.get("keep_distinct", False)))
        except ValueError as exc:
            return {**_not_run(out, None if gold is None else False, str(exc)),
                    "gold_error": gold_error}
        result = self.check({"dbs": job["dbs"], "pred": pred, "gold": gold,
                             "semantics": job["semantics"], "order_matters": ordered})
        return {**out, **result, "gold_error": result["gold_error"] or gold_error}

    def gold_status(self, job: dict) -> dict:
        """``gold_error``: None when the item's gold query runs on every database of the item
        (its rows stay cached in this worker), else why it fails. A property of the item, found
        without any response."""
        try:
            gold, _ = prepare_gold(job["gold"], job["semantics"],
                                   bool(job.get("keep_distinct", False)))
        except ValueError as exc:
            return {"gold_error": f"gold query cannot be prepared: {exc}"}
        for path in job["dbs"]:
            try:
                self.gold_rows(path, gold)
            except QueryError as exc:
                return {"gold_error": f"{os.path.basename(path)}: {exc}"}
        return {"gold_error": None}

    def handle(self, job: dict) -> dict:
        op = job.get("op")
        if op == "response":
            return self.response(job)
        if op == "check":
            return self.check(job)
        if op == "gold":
            return self.gold_status(job)
        if op == "rows":
            try:
                return {"rows": self.run(job["db"], job["sql"]), "error": None}
            except QueryError as exc:
                return {"rows": None, "error": str(exc)}
        if op == "sleep":  # lets tests exercise the parent's hard kill (after a partial frame)
            if "partial" in job:
                self.send_partial(job["partial"])
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


def cap_memory(max_memory: int) -> None:
    """Cap this process's address space: past it allocations fail (MemoryError, SQLite's
    SQLITE_NOMEM) instead of growing next to a training process."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        max_memory = min(max_memory, hard)
    resource.setrlimit(resource.RLIMIT_AS, (max_memory, hard))


def _send(stdout, message: dict) -> None:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stdout.write(struct.pack(">I", len(payload)) + payload)
    stdout.flush()


def main() -> None:
    limits = json.loads(sys.argv[1])
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write to the result channel
    cap_memory(int(limits["max_memory"]))
    executor = Executor(limits)
    executor.send_partial = lambda partial: _send(stdout, {"partial": partial})
    while True:
        try:
            (length,) = struct.unpack(">I", _read_exact(stdin, 4))
            job = pickle.loads(_read_exact(stdin, length))
        except EOFError:  # the parent closed the pipe or died: stop
            return
        try:
            result = executor.handle(job)
        except MemoryError:  # the address-space cap, hit outside SQLite (Python's copies)
            result = failed_result(job, "out of memory (the worker's address-space cap)")
        except Exception as exc:  # a bug, not a query failure: report it, keep serving
            result = {"internal_error": f"{type(exc).__name__}: {exc}"}
        _send(stdout, result)


if __name__ == "__main__":
    main()
