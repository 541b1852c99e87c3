"""Hostile SQL: every attack fails or is scored a failure, within the limit, and no database
file changes (checked byte for byte)."""
import time

import pytest

from tasks.sql import evaluate
from tasks.sql.evaluate import SqlOptions
from tasks.sql.loaders import load_split
from tasks.sql.sandbox import SqlLimits, SqlSandbox
from tests.sql.conftest import checksums

LIMIT_S = 1.0

HOSTILE = {
    "drop": "DROP TABLE pet",
    "delete": "DELETE FROM pet",
    "update": "UPDATE pet SET weight = 0",
    "insert": "INSERT INTO owner VALUES (9, 'Mallory')",
    "create": "CREATE TABLE x (a)",
    "attach": "ATTACH DATABASE '/tmp/evil.sqlite' AS evil",
    "writable_schema": "PRAGMA writable_schema = 1",
    "pragma_read": "PRAGMA table_info(pet)",
    "load_extension": "SELECT load_extension('/tmp/evil.so')",
    "vacuum_into": "VACUUM INTO '/tmp/copy.sqlite'",
    "transaction": "BEGIN IMMEDIATE",
    "endless_cte": "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
                   "SELECT count(*) FROM r",
    "cartesian": "SELECT count(*) FROM pet AS p1, pet AS p2, pet AS p3, pet AS p4, pet AS p5, "
                 "pet AS p6, pet AS p7, pet AS p8, pet AS p9, pet AS p10, pet AS p11, pet AS p12, "
                 "pet AS p13, pet AS p14, pet AS p15, pet AS p16, pet AS p17, pet AS p18",
    "multi_statement": "SELECT 1; DROP TABLE pet",
    "invalid_utf8": "SELECT kind FROM pet WHERE kind = '\udcff\udcfe'",
    "nul_byte": "SELECT 1\x00; DROP TABLE pet",
    "one_megabyte": "SELECT 1 " + "-" * (1 << 20),
    "huge_blob": "SELECT zeroblob(2000000000)",
    "huge_string": "SELECT printf('%.*c', 2000000000, 'x')",
}


@pytest.fixture(scope="module")
def sandbox():
    with SqlSandbox(2, SqlLimits(timeout=LIMIT_S, max_rows=1000)) as sb:
        yield sb


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_query_fails_in_time_and_changes_nothing(name, sandbox, data_dir):
    before = checksums(data_dir)
    db = data_dir / "spider" / "database" / "pets" / "pets.sqlite"
    job = {"op": "check", "dbs": [str(db)], "pred": HOSTILE[name],
           "gold": "SELECT count(*) FROM pet", "semantics": "spider"}
    t0 = time.monotonic()
    result = sandbox.map([job])[0]
    elapsed = time.monotonic() - t0
    assert result["executed"] is False and result["match"] is False, result
    assert result["error"]
    # within the hard limit (SQLite's own limit stops most attacks long before it; a function
    # that spins inside one step, like printf with a huge width, is killed at it)
    assert elapsed < sandbox.hard_deadline(job) + 1.0, f"{name} took {elapsed:.1f} s"
    assert checksums(data_dir) == before


def test_hostile_responses_get_zero_rewards(data_dir):
    before = checksums(data_dir)
    examples = load_split(data_dir, "spider-dev")[:1]
    options = SqlOptions(limits=SqlLimits(timeout=LIMIT_S))
    responses = [f"<think>x</think>\n<answer>\n```sql\n{q}\n```\n</answer>" for q in HOSTILE.values()]
    rows = evaluate.reward_rows(examples * len(responses), responses, options)
    for name, (fmt, executable, execution) in zip(HOSTILE, rows):
        assert executable == 0.0 and execution == 0.0, name
    assert checksums(data_dir) == before


def test_a_large_cartesian_product_is_stopped_by_the_in_sqlite_limit(big_db):
    with SqlSandbox(1, SqlLimits(timeout=0.5)) as sb:
        t0 = time.monotonic()
        result = sb.map([{"op": "rows", "db": str(big_db),
                          "sql": "SELECT count(*) FROM a AS x, a AS y, a AS z"}])[0]
        assert "timed out" in result["error"]
        assert time.monotonic() - t0 < 2.0
        assert sb.killed == 0  # SQLite's progress handler stopped it, no kill was needed
        # the worker is still usable afterwards
        assert sb.rows(big_db, "SELECT count(*) FROM a") == [(3000,)]


def test_row_cap(big_db):
    with SqlSandbox(1, SqlLimits(max_rows=100)) as sb:
        with pytest.raises(ValueError, match="more than 100 rows"):
            sb.rows(big_db, "SELECT x FROM a")
        assert len(sb.rows(big_db, "SELECT x FROM a LIMIT 100")) == 100


def test_a_stuck_worker_is_killed_and_replaced(big_db):
    with SqlSandbox(1, SqlLimits(timeout=0.2)) as sb:
        t0 = time.monotonic()
        result = sb.map([{"op": "sleep", "seconds": 30}])[0]
        assert "killed" in result["error"] and sb.killed == 1
        assert time.monotonic() - t0 < 5
        assert sb.rows(big_db, "SELECT max(x) FROM a") == [(3000,)]


def test_parallel_results_keep_their_order(big_db):
    with SqlSandbox(2) as sb:
        jobs = [{"op": "rows", "db": str(big_db), "sql": f"SELECT {i} + count(*) FROM a"}
                for i in range(40)]
        assert [r["rows"] for r in sb.map(jobs)] == [[(3000 + i,)] for i in range(40)]


def test_missing_database_is_a_failed_query(tmp_path):
    with SqlSandbox(1) as sb:
        with pytest.raises(ValueError, match="database file not found"):
            sb.rows(tmp_path / "nope.sqlite", "SELECT 1")
        assert not (tmp_path / "nope.sqlite").exists()  # read-only open creates nothing
