"""The three text-to-SQL rewards and the execution-accuracy scorer, both on the sandbox.

A response is checked once: its query (:func:`tasks.sql.prompt.extract_sql`) runs on the
example's database(s) next to the gold query in one sandbox job, and the job's outcome gives

* ``format`` {0,1}: the layout of the prompt's format spec (no execution needed);
* ``executable`` {0,1}: the query ran without error, within the time and size limits, on every
  database of the example;
* ``execution`` {0,1}: its result equals the gold query's result on every database, under the
  example's semantics (Spider's test-suite rules, or BIRD's set equality); NaN, i.e. absent,
  when the gold query itself fails (reported, never counted as the model's failure in training).

Spider-family items get Spider's evaluation preprocessing on both queries before they run
(split operators repaired, ``YEAR(CURDATE())`` as 2020, DISTINCT removed unless
``keep_distinct``); BIRD items run as written, as BIRD's evaluation does.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Sequence

from tasks.base import Example
from tasks.sql.compare import order_matters, remove_distinct, spider_postprocess
from tasks.sql.prompt import extract_sql, format_ok
from tasks.sql.sandbox import SqlLimits, shared_sandbox

REWARD_NAMES = ("format", "executable", "execution")


@dataclass(frozen=True)
class SqlOptions:
    """The family's run options (from ``--sql-*`` flags)."""

    limits: SqlLimits = field(default_factory=SqlLimits)
    processes: int = 2
    keep_distinct: bool = False
    sample_rows: int = 0

    @staticmethod
    def from_task_config(tc) -> "SqlOptions":
        return SqlOptions(limits=SqlLimits(timeout=tc.sql_timeout, max_rows=tc.sql_max_rows),
                          processes=tc.sql_processes, keep_distinct=tc.sql_keep_distinct,
                          sample_rows=tc.sql_sample_rows)


def make_job(example: Example, sql: str, options: SqlOptions) -> dict:
    """The sandbox job comparing ``sql`` with the example's gold query on its databases."""
    semantics = example.metadata["semantics"]
    gold = example.reference
    job = {"op": "check", "dbs": list(example.metadata["db_paths"]), "semantics": semantics}
    if semantics == "spider":
        pred, gold = spider_postprocess(sql), spider_postprocess(gold)
        if not options.keep_distinct:
            gold = remove_distinct(gold)
            try:
                pred = remove_distinct(pred)
            except ValueError as exc:  # Spider's evaluation scores such a prediction 0
                return {**job, "refused": str(exc)}
        job.update(pred=pred, gold=gold, order_matters=order_matters(gold))
    else:
        job.update(pred=sql, gold=gold, order_matters=False)
    return job


def check(examples: Sequence[Example], sqls: Sequence[str | None], options: SqlOptions
          ) -> list[dict]:
    """Sandbox outcomes (``executed``, ``match``, ``error``, ``gold_error``) per query; a missing
    query is not executed."""
    jobs, where = [], []
    outcomes: list[dict | None] = []
    for example, sql in zip(examples, sqls):
        if sql is None:
            outcomes.append({"executed": False, "match": False, "error": "no SQL query found",
                             "gold_error": None})
            continue
        job = make_job(example, sql, options)
        if "refused" in job:
            outcomes.append({"executed": False, "match": False, "error": job["refused"],
                             "gold_error": None})
            continue
        outcomes.append(None)
        where.append(len(outcomes) - 1)
        jobs.append(job)
    if jobs:
        results = shared_sandbox(options.processes, options.limits).map(jobs)
        for i, result in zip(where, results):
            outcomes[i] = result
    return outcomes  # type: ignore[return-value]


def reward_rows(examples: Sequence[Example], responses: Sequence[str], options: SqlOptions
                ) -> list[list[float]]:
    """[format, executable, execution] per response."""
    sqls = [extract_sql(r) for r in responses]
    rows = []
    for response, outcome in zip(responses, check(examples, sqls, options)):
        execution = math.nan if outcome.get("gold_error") else float(bool(outcome["match"]))
        rows.append([float(format_ok(response)), float(bool(outcome["executed"])), execution])
    return rows


def score(examples: Sequence[Example], responses: Sequence[str], options: SqlOptions) -> dict:
    """Execution accuracy (percent) per benchmark and per benchmark/difficulty, the mean over
    benchmarks when there are several (``average``, unweighted, as in the paper's Table 1),
    and the rates of well-formed and executable responses.

    Items whose gold query fails count as wrong (Spider's evaluation refuses to score them at
    all) and are counted in ``gold_failures``."""
    if len(examples) != len(responses):
        raise ValueError(f"{len(examples)} examples but {len(responses)} responses")
    sqls = [extract_sql(r) for r in responses]
    outcomes = check(examples, sqls, options)
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    items = []
    n_format = n_exec = n_gold = 0
    for example, response, sql, outcome in zip(examples, responses, sqls, outcomes):
        meta = example.metadata
        correct = bool(outcome["match"]) and not outcome.get("gold_error")
        for key in {meta["benchmark"], meta["category"]}:
            tally[key][0] += int(correct)
            tally[key][1] += 1
        fmt = format_ok(response)
        n_format += fmt
        n_exec += bool(outcome["executed"])
        n_gold += bool(outcome.get("gold_error"))
        items.append({"id": example.id, "category": meta["category"], "db_id": meta["db_id"],
                      "correct": correct, "executed": bool(outcome["executed"]),
                      "format_ok": fmt, "sql": sql, "error": outcome.get("error"),
                      "gold_error": outcome.get("gold_error")})
    metrics = {key: 100.0 * k / n for key, (k, n) in sorted(tally.items())}
    benchmarks = sorted({ex.metadata["benchmark"] for ex in examples})
    if len(benchmarks) > 1:
        metrics["average"] = sum(metrics[b] for b in benchmarks) / len(benchmarks)
    if items:
        metrics["format_rate"] = 100.0 * n_format / len(items)
        metrics["executable_rate"] = 100.0 * n_exec / len(items)
        metrics["gold_failures"] = n_gold
    return {"metrics": metrics, "items": items,
            "counts": {b: tally[b][1] for b in benchmarks}}
