"""``bench sql``: throughput of the text-to-SQL reward computation (sandboxed execution) on
1, 2, ... worker processes."""
from __future__ import annotations

import argparse
import time
from pathlib import Path


def _sql_variants(reference: str) -> list[str]:
    """Responses to one item, as a policy might give them: right, subtly wrong, not running."""
    think = "<think>Find the tables, then filter.</think>\n"

    def wrap(sql: str) -> str:
        return f"{think}<answer>\n```sql\n{sql}\n```\n</answer>"

    return [wrap(reference),
            wrap(reference.replace(">", ">=", 1) if ">" in reference else reference + " LIMIT 1"),
            wrap(reference.replace("FROM ", "FROM x_", 1)),  # unknown table: fails to prepare
            wrap(reference.replace("SELECT ", "SELECT DISTINCT ", 1)),
            "The answer cannot be computed."]


def bench_sql(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from harness.config import TaskConfig
    from tasks import TASKS
    from tasks.sql.evaluate import SqlOptions, reward_rows
    from tasks.sql.sandbox import close_shared

    task = TASKS.get(args.task)
    examples = task.load_eval(Path(args.data_dir) if args.data_dir else None)
    pairs = [(ex, r) for ex in examples for r in _sql_variants(ex.reference)]
    pairs = (pairs * (args.responses // len(pairs) + 1))[:args.responses]
    exs, responses = [p[0] for p in pairs], [p[1] for p in pairs]
    base = SqlOptions.from_flags(TaskConfig(task=args.task).options)
    print(f"text-to-SQL rewards: {len(responses)} responses to {len(examples)} items of "
          f"{args.task} (5 variants each: right, off-by-one comparison, unknown table, "
          f"DISTINCT added, no query), per-query limit {base.limits.timeout:g} s")
    print(f"{'processes':>9} {'seconds':>8} {'responses/s':>12} {'ratio':>6}")
    first = None
    for processes in [int(p) for p in args.processes.split(",")]:
        options = replace(base, processes=processes)
        reward_rows(exs[:processes * 4], responses[:processes * 4], options)  # start workers
        start = time.perf_counter()
        rows = reward_rows(exs, responses, options)
        seconds = time.perf_counter() - start
        close_shared()
        qps = len(responses) / seconds
        first = first or qps
        print(f"{processes:9d} {seconds:8.2f} {qps:12.0f} {qps / first:6.2f}")
    means = [sum(r[k] for r in rows) / len(rows) for k in range(3)]
    print("mean rewards (format, executable, execution): " + ", ".join(f"{m:.2f}" for m in means))
    return 0
