"""The three text-to-SQL rewards and the execution-accuracy scorer, both on the sandbox.

A response is checked once: its query (:func:`tasks.sql.layout.extract_sql`) runs on the
example's database(s) next to the gold query in one sandbox job, and the job's outcome gives

* ``format`` {0,1}: the layout of the prompt's format spec (no execution needed); a response
  over the sandbox's character limit scores 0 on all three, unread;
* ``executable`` {0,1}: the query is one statement that returns a result set, reads a table of
  the database, and ran without error within the time, size and memory limits on every
  database of the example (a comment, a maintenance statement such as ``VACUUM`` or
  ``REINDEX``, or a table-less ``SELECT printf(...)`` is not executable: doing nothing must not
  earn a reward);
* ``execution`` {0,1}: its result equals the gold query's result on every database, under the
  example's semantics (Spider's test-suite rules, or BIRD's set equality); NaN, i.e. absent,
  when the gold query itself fails (reported, never counted as the model's failure in training).
  Compared as the official scorers compare, so a constant ``SELECT 2`` that equals the gold's
  result counts here (the test-suite databases are what defeat it), though not as executable.

Spider-family items get Spider's evaluation preprocessing on both queries before they run
(split operators repaired, ``YEAR(CURDATE())`` as 2020, DISTINCT removed unless
``keep_distinct``); BIRD items run as written, as BIRD's evaluation does. All of the work per
response (layout check, extraction, normalisation, execution, comparison) happens in the
sandbox's worker processes, in parallel.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Sequence

from tasks.base import Example
from common.options import option
from tasks.registry import family_options
from tasks.sql.sandbox import SqlLimits, shared_sandbox

REWARD_NAMES = ("format", "executable", "execution")


@family_options("sql")
@dataclass(frozen=True)
class SqlFlags:
    """The text-to-SQL family's run options: the sandbox that runs predicted queries, and the
    prompt."""

    sql_timeout: float = option(5.0, "text-to-SQL: seconds a query may run (inside SQLite; its "
                                   "worker process is killed soon after)")
    sql_processes: int = option(2, "text-to-SQL: worker processes that execute queries in "
                                 "parallel (per training worker)", identity=False)
    sql_max_rows: int = option(100_000, "text-to-SQL: a query returning more rows fails")
    sql_keep_distinct: bool = option(False, "text-to-SQL: keep DISTINCT when comparing results "
                                          "(Spider's evaluation drops it by default)")
    sql_sample_rows: int = option(0, "text-to-SQL: example rows per table shown after the "
                                   "schema's CREATE TABLE statements")

    def problems(self) -> list[str]:
        out = []
        if not self.sql_timeout > 0 or self.sql_max_rows < 1:
            out.append("sql_timeout must be positive and sql_max_rows 1 or more")
        if self.sql_processes < 1 or self.sql_sample_rows < 0:
            out.append("sql_processes must be 1 or more and sql_sample_rows 0 or more")
        return out


@dataclass(frozen=True)
class SqlOptions:
    """The family's run options (from ``--sql-*`` flags)."""

    limits: SqlLimits = field(default_factory=SqlLimits)
    processes: int = 2
    keep_distinct: bool = False
    sample_rows: int = 0

    @staticmethod
    def from_flags(flags) -> "SqlOptions":
        return SqlOptions(limits=SqlLimits(timeout=flags.sql_timeout,
                                           max_rows=flags.sql_max_rows),
                          processes=flags.sql_processes,
                          keep_distinct=flags.sql_keep_distinct,
                          sample_rows=flags.sql_sample_rows)


# (databases, gold query, semantics, keep_distinct, limits) -> why the gold query fails, or
# None; kept for the life of the process (a run): whether the gold runs is a property of the
# item under these limits, never of the responses that happen to be checked against it
_GOLD_ERRORS: dict[tuple, str | None] = {}


def _gold_key(example: Example, options: SqlOptions) -> tuple:
    return (tuple(example.metadata["db_paths"]), example.reference,
            example.metadata["semantics"], options.keep_distinct, options.limits)


def gold_errors(examples: Sequence[Example], options: SqlOptions) -> list[str | None]:
    """Per example: why its gold query fails on one of its databases (None: it runs). Each
    item's gold runs once per process, in the sandbox, before and apart from any response."""
    keys = [_gold_key(e, options) for e in examples]
    todo = [k for k in dict.fromkeys(keys) if k not in _GOLD_ERRORS and k[1] is not None]
    if todo:
        jobs = [{"op": "gold", "dbs": list(dbs), "gold": gold, "semantics": semantics,
                 "keep_distinct": keep} for dbs, gold, semantics, keep, _ in todo]
        for key, result in zip(todo, shared_sandbox(options.processes, options.limits).map(jobs)):
            _GOLD_ERRORS[key] = result["gold_error"]
    return [_GOLD_ERRORS.get(k) for k in keys]


def make_job(example: Example, response: str, options: SqlOptions, gold_ok: bool = True
             ) -> dict:
    """The sandbox job that checks one response to ``example`` (see ``worker.response``);
    ``gold_ok`` False: the gold query is known to fail, so only the response's query runs."""
    return {"op": "response", "response": response,
            "gold": example.reference if gold_ok else None,
            "dbs": list(example.metadata["db_paths"]), "semantics": example.metadata["semantics"],
            "keep_distinct": options.keep_distinct}


def check(examples: Sequence[Example], responses: Sequence[str], options: SqlOptions
          ) -> list[dict]:
    """Per response: ``format_ok``, ``sql`` (None when none is found), ``executed``, ``match``,
    ``error`` and ``gold_error`` (the item's gold failure, whatever the response), all computed
    in the sandbox's worker processes."""
    if len(examples) != len(responses):
        raise ValueError(f"{len(examples)} examples but {len(responses)} responses")
    golds = gold_errors(examples, options)
    jobs = [make_job(e, r, options, g is None) for e, r, g in zip(examples, responses, golds)]
    # a killed worker's outcome keeps the format check it sent before executing; nothing of
    # the (possibly hostile) response is re-parsed here
    outcomes = shared_sandbox(options.processes, options.limits).map(jobs)
    # a gold that ran in the gold pass but failed beside this response (a worker killed at its
    # hard limit, say) keeps that error: this response's execution is then unknown
    return [{**o, "gold_error": g or o.get("gold_error"), "match": None if g else o["match"]}
            for o, g in zip(outcomes, golds)]


def executable(outcome: dict) -> bool:
    """The executable reward's test: the query ran everywhere and read the database (a
    constant ``SELECT`` runs but asks the database nothing)."""
    return bool(outcome["executed"]) and bool(outcome.get("reads_database", False))


def reward_rows(examples: Sequence[Example], responses: Sequence[str], options: SqlOptions
                ) -> list[list[float]]:
    """[format, executable, execution] per response."""
    rows = []
    for outcome in check(examples, responses, options):
        execution = math.nan if outcome.get("gold_error") else float(bool(outcome["match"]))
        rows.append([float(outcome["format_ok"]), float(executable(outcome)), execution])
    return rows


def score(examples: Sequence[Example], responses: Sequence[str], options: SqlOptions) -> dict:
    """Execution accuracy (percent) per benchmark and per benchmark/difficulty, the mean over
    benchmarks when there are several (``average``, unweighted, as in the paper's Table 1),
    and the rates of well-formed and executable responses.

    Items whose gold query fails count as wrong (Spider's evaluation refuses to score them at
    all): every one is counted in ``gold_failures`` whatever its response did, and listed with
    its error under ``problems``."""
    if len(examples) != len(responses):
        raise ValueError(f"{len(examples)} examples but {len(responses)} responses")
    outcomes = check(examples, responses, options)
    golds = gold_errors(examples, options)  # cached by check: the item's own verdict
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    items, problems = [], []
    n_format = n_exec = 0
    for example, outcome, gold_error in zip(examples, outcomes, golds):
        meta = example.metadata
        correct = bool(outcome["match"]) and not outcome.get("gold_error")
        for key in {meta["benchmark"], meta["category"]}:
            tally[key][0] += int(correct)
            tally[key][1] += 1
        fmt = bool(outcome["format_ok"])
        n_format += fmt
        n_exec += executable(outcome)
        if gold_error:
            problems.append({"id": example.id, "problem": f"gold query fails on database "
                                                          f"{meta['db_id']}: {gold_error}"})
        items.append({"id": example.id, "category": meta["category"], "db_id": meta["db_id"],
                      "correct": correct, "executed": executable(outcome),
                      "format_ok": fmt, "sql": outcome["sql"], "error": outcome.get("error"),
                      "gold_error": outcome.get("gold_error")})
    metrics = {key: 100.0 * k / n for key, (k, n) in sorted(tally.items())}
    benchmarks = sorted({ex.metadata["benchmark"] for ex in examples})
    if len(benchmarks) > 1:
        metrics["average"] = sum(metrics[b] for b in benchmarks) / len(benchmarks)
    if items:
        metrics["format_rate"] = 100.0 * n_format / len(items)
        metrics["executable_rate"] = 100.0 * n_exec / len(items)
        metrics["gold_failures"] = len(problems)
    return {"metrics": metrics, "items": items, "problems": problems,
            "counts": {b: tally[b][1] for b in benchmarks}}


def item_scores(records: Sequence[dict]) -> dict[str, list[tuple[float, float]]]:
    """Per prediction record, the (value, weight) pair of each of :func:`score`'s accuracies:
    per benchmark and per benchmark/difficulty (an item's category is ``benchmark/level``),
    their unweighted mean over benchmarks, the format and executable rates."""
    cats = [r["category"] for r in records]
    benches = [c.split("/")[0] for c in cats]
    out: dict[str, list[tuple[float, float]]] = {}
    for key in sorted({*cats, *benches}):
        out[key] = [(float(r["correct"]), float(key in (c, b)))
                    for r, c, b in zip(records, cats, benches)]
    names = sorted(set(benches))
    if len(names) > 1:
        size = {b: benches.count(b) for b in names}
        out["average"] = [(float(r["correct"]), 1.0 / (len(names) * size[b]))
                          for r, b in zip(records, benches)]
    out["format_rate"] = [(float(r["format_ok"]), 1.0) for r in records]
    out["executable_rate"] = [(float(r["executed"]), 1.0) for r in records]
    return out
