"""The sandbox's limits tried as an attacker would: memory, time, size, and rewards for doing
nothing. Sizes and times are asserted, and the worker's peak memory is read from /proc."""
import time
from pathlib import Path

import pytest

from tasks.sql import evaluate, sandbox as sandbox_module
from tasks.sql.evaluate import SqlOptions
from tasks.sql.loaders import load_split
from tasks.sql.sandbox import SqlLimits, SqlSandbox
from tests.sql.conftest import build_db

MB = 1 << 20


def peak_rss_mb(sb: SqlSandbox) -> float:
    """The peak resident memory (VmHWM) of the sandbox's only worker, in MB."""
    status = Path(f"/proc/{sb.workers[0].proc.pid}/status").read_text()
    line = next(l for l in status.splitlines() if l.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def answer(sql: str) -> str:
    return f"<think>x</think>\n<answer>\n```sql\n{sql}\n```\n</answer>"


@pytest.mark.parametrize("sql", [
    "SELECT zeroblob(4000000) FROM a LIMIT 255",  # 1.0 GB in 4 MB rows
    "SELECT zeroblob(60000000) FROM a LIMIT 255",  # 60 MB values
    # every row doubles the last: unbounded growth through ||
    "WITH RECURSIVE r(s) AS (SELECT 'x' UNION ALL SELECT s || s FROM r) SELECT s FROM r",
    "SELECT group_concat(zeroblob(1000000)) FROM a",  # one value grown inside SQLite
])
def test_big_results_fail_with_the_worker_memory_bounded(sql, big_db):
    with SqlSandbox(1, SqlLimits(timeout=2.0)) as sb:
        t0 = time.monotonic()
        result = sb.map([{"op": "rows", "db": str(big_db), "sql": sql}])[0]
        assert result["rows"] is None and result["error"], result
        assert time.monotonic() - t0 < 3.0
        # the cap is 64 MB of result; the copies on top of it stay well under the 1 GB the
        # unbounded version reached
        assert peak_rss_mb(sb) < 64 + 64 + 100, peak_rss_mb(sb)
        assert sb.killed == 0
        assert sb.rows(big_db, "SELECT count(*) FROM a") == [(3000,)]  # still serving


def test_the_worker_address_space_is_capped_by_the_operating_system(big_db):
    limits = SqlLimits(max_bytes=16 * MB, max_memory=256 * MB)
    with SqlSandbox(1, limits) as sb:
        assert sb.rows(big_db, "SELECT 1 FROM a LIMIT 1") == [(1,)]
        text = Path(f"/proc/{sb.workers[0].proc.pid}/limits").read_text()
        line = next(l for l in text.splitlines() if l.startswith("Max address space"))
        assert int(line.split()[3]) == 256 * MB
        # what SQLite may build inside that: its heap is a quarter of it, a value an eighth of
        # the result cap, so a query that asks for more fails instead of growing
        result = sb.map([{"op": "rows", "db": str(big_db),
                          "sql": "SELECT length(group_concat(randomblob(100000))) FROM a"}])[0]
        assert result["error"] and "too big" in result["error"]


def test_memory_limit_must_leave_room_for_the_result():
    with pytest.raises(ValueError, match="max_memory"):
        SqlLimits(max_bytes=64 * MB, max_memory=128 * MB)


def test_timeout_holds_within_a_second_under_expensive_steps(big_db):
    # every row builds two multi-MB strings, so a check of the deadline every 1000 VM steps
    # overshot by seconds (the width depends on the row: SQLite cannot compute it only once)
    sql = "SELECT count(*) FROM a WHERE length(replace(printf('%.*c', 3000000 + x % 2, 'a'), " \
          "'a', 'bb')) > 0"
    with SqlSandbox(1, SqlLimits(timeout=1.0)) as sb:
        t0 = time.monotonic()
        result = sb.map([{"op": "rows", "db": str(big_db), "sql": sql}])[0]
        elapsed = time.monotonic() - t0
        assert "timed out" in result["error"], result
        assert elapsed < 2.0, elapsed
        assert sb.killed == 0  # SQLite's own limit stopped it


def test_a_huge_response_is_refused_unread_and_quickly(data_dir):
    ex = load_split(data_dir, "spider-dev")[0]
    dense = "SELECT " + ",".join(["a+1*(b-2)"] * 300_000) + " FROM pet"  # 3 MB of tokens
    options = SqlOptions(limits=SqlLimits(timeout=1.0))
    evaluate.reward_rows([ex], [answer("SELECT 1 FROM pet")], options)  # workers started
    t0 = time.monotonic()
    outcome = evaluate.check([ex], [answer(dense)], options)[0]
    assert time.monotonic() - t0 < 1.0  # the worker never tokenised it
    assert outcome["format_ok"] is False and outcome["executed"] is False
    assert "over the limit" in outcome["error"]
    # the longest query still allowed is checked well inside the hard deadline
    longest = "SELECT " + ",".join(["a+1*(b-2)"] * 3_100) + " FROM pet"
    assert len(answer(longest)) < SqlLimits().max_response_chars
    assert len(longest) < SqlLimits().max_sql_chars
    t0 = time.monotonic()
    outcome = evaluate.check([ex], [answer(longest)], options)[0]
    job = evaluate.make_job(ex, answer(longest), options)
    assert time.monotonic() - t0 < SqlSandbox(1, options.limits).hard_deadline(job)
    assert outcome["format_ok"] is True and "killed" not in (outcome["error"] or "")


def test_a_killed_response_keeps_its_workers_format_check_and_the_parent_parses_nothing(
        big_db, monkeypatch):
    # the parent must not re-read the hostile text after a kill: make any parse there fail
    import tasks.sql.layout as layout

    def forbidden(*args, **kwargs):
        raise AssertionError("the parent parsed a response")

    monkeypatch.setattr(layout, "format_ok", forbidden)
    monkeypatch.setattr(layout, "extract_sql", forbidden)
    with SqlSandbox(1, SqlLimits(timeout=0.2)) as sb:
        partial = {"format_ok": True, "sql": "SELECT 1"}
        result = sb.map([{"op": "sleep", "seconds": 30, "partial": partial,
                          "response": "x" * 1000}])[0]
        assert sb.killed == 1 and "killed" in result["error"]
        assert result["format_ok"] is True and result["sql"] == "SELECT 1"
        assert result["executed"] is False and result["reads_database"] is False


DO_NOTHING = {
    "comment": "-- nothing",
    "vacuum_temp": "VACUUM temp",
    "reindex": "REINDEX",
    "analyze": "ANALYZE",
    "huge_printf": "SELECT printf('%.500000c', 'x')",
    "constant": "SELECT 1",
    "cte_only": "WITH r(n) AS (SELECT 1) SELECT n FROM r",
    "recursive_cte_only": "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r "
                          "LIMIT 5) SELECT count(*) FROM r",
}


@pytest.mark.parametrize("name", sorted(DO_NOTHING))
def test_doing_nothing_is_not_executable(name, data_dir):
    ex = load_split(data_dir, "spider-dev")[0]
    options = SqlOptions(limits=SqlLimits(timeout=1.0))
    _, executable, _ = evaluate.reward_rows([ex], [answer(DO_NOTHING[name])], options)[0]
    assert executable == 0.0


def test_asking_the_database_is_executable(data_dir):
    ex = load_split(data_dir, "spider-dev")[0]
    queries = ["SELECT count(*) FROM pet", "SELECT 1 FROM pet LIMIT 1",
               "WITH d AS (SELECT * FROM pet) SELECT count(*) FROM d",
               "SELECT name FROM sqlite_master"]
    rows = evaluate.reward_rows([ex] * len(queries), [answer(q) for q in queries],
                                SqlOptions(limits=SqlLimits(timeout=1.0)))
    assert [r[1] for r in rows] == [1.0] * len(queries)
    # the same query twice on one connection is judged the same (no statement cache hides the
    # tables it reads from the authorizer)
    again = evaluate.reward_rows([ex] * 2, [answer(queries[0])] * 2, SqlOptions())
    assert [r[1] for r in again] == [1.0, 1.0]


def test_hard_deadline_covers_the_checks_before_execution():
    sb = SqlSandbox(1, SqlLimits(timeout=1.0))
    rows_job = {"op": "rows", "db": "x", "sql": "SELECT 1"}
    response_job = {"op": "response", "dbs": ["x"], "response": ""}
    assert sb.hard_deadline(response_job) == sb.hard_deadline(rows_job) + sandbox_module._PREPARE_S


# -- temporary files -------------------------------------------------------------------------------
def _bytes_written(pid: int) -> int:
    """Bytes the process has passed to write() so far (files and pipes alike)."""
    fields = dict(line.split(": ") for line in open(f"/proc/{pid}/io").read().splitlines())
    return int(fields["wchar"])


def test_a_spilling_query_writes_nothing_to_disk(tmp_path):
    """A GROUP BY over a large cross join makes SQLite sort into temporary storage (over 1 GB of
    temporary files in 3 s with SQLite's default); the sandbox keeps that storage in the
    worker's memory under its heap limit, so the query fails without writing to disk."""
    path = build_db(tmp_path / "big.sqlite", """
        CREATE TABLE a (x INTEGER, y TEXT);
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
        INSERT INTO a SELECT i, printf('%.200c', 'x') FROM n;""")
    with SqlSandbox(1, SqlLimits(timeout=3.0)) as box:
        assert box.map([{"op": "rows", "db": str(path), "sql": "SELECT 1"}])[0]["rows"]
        pid = box.workers[0].proc.pid
        before = _bytes_written(pid)
        out = box.map([{"op": "rows", "db": str(path),
                        "sql": "SELECT p.x || '-' || q.x || p.y AS k, count(*) "
                               "FROM a AS p, a AS q GROUP BY k ORDER BY 2"}])[0]
        assert box.workers[0].proc.pid == pid  # failed inside the worker, not killed
        assert out["rows"] is None and out["error"]
        assert _bytes_written(pid) - before < 1 << 20  # the error message, no temp files
