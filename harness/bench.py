"""``python -m harness bench``: measurements, not tests. Each prints a table of what it ran.

- ``bench replay``: peak extra memory and time of MRTPO's per-token JS distance with and
  without chunking (each setting in a fresh process, RSS sampled every 2 ms).
- ``bench steps``: step-time ratios of stored runs (e.g. MRTPO vs GDPO on one setting).
- ``bench sql``: throughput of the text-to-SQL reward computation (sandboxed execution) on
  1, 2, ... worker processes.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path


def _replay_one(model_name: str, responses: int, tokens: int, chunk: int) -> dict:
    """In this process: the distances of ``responses`` x ``tokens`` random response tokens
    between two contexts; returns the peak RSS above the level before the distance pass."""
    import psutil
    import torch

    from harness.models import load_model
    from harness.replay import js_distance

    torch.manual_seed(0)
    model = load_model(model_name)
    head = model.get_output_embeddings()
    h = model.config.hidden_size
    h_p, h_q = torch.randn(2, responses, tokens, h)
    proc = psutil.Process()
    base = proc.memory_info().rss
    peak = [base]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            time.sleep(0.002)

    thread = threading.Thread(target=sample)
    thread.start()
    start = time.perf_counter()
    with torch.no_grad():
        d = js_distance(h_p, h_q, head, 1.0, chunk)
    seconds = time.perf_counter() - start
    stop.set()
    thread.join()
    return {"chunk": chunk, "extra_peak_mb": (peak[0] - base) / 2**20, "seconds": seconds,
            "vocab": head.out_features, "checksum": float(d.sum())}


def bench_replay(args: argparse.Namespace) -> int:
    rows = []
    for chunk in [int(c) for c in args.chunks.split(",")]:
        out = subprocess.run([sys.executable, "-m", "harness.bench", "_replay_one", args.model,
                              str(args.responses), str(args.tokens), str(chunk)],
                             capture_output=True, text=True, check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"replay JS distance: {args.responses} responses x {args.tokens} tokens, "
          f"vocabulary {rows[0]['vocab']}, model {args.model}")
    print(f"{'chunk':>7} {'extra peak MB':>14} {'seconds':>8}")
    for r in rows:
        label = f"{r['chunk']}" + (" (=T)" if r["chunk"] >= args.tokens else "")
        print(f"{label:>7} {r['extra_peak_mb']:14.0f} {r['seconds']:8.2f}")
    same = all(abs(r["checksum"] - rows[0]["checksum"]) < 1e-3 * max(1, abs(rows[0]["checksum"]))
               for r in rows)
    print(f"same distances in every setting: {same}")
    return 0


def bench_steps(args: argparse.Namespace) -> int:
    """Mean step time of stored runs (their seeds' train logs), and ratios to the first."""
    rows = []
    for folder in args.runs:
        times = []
        for log in sorted(Path(folder).glob("seed*.train.jsonl")):
            steps = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
            times += [s["time/step"] for s in steps]
        if not times:
            raise ValueError(f"{folder}: no seed*.train.jsonl with steps")
        rows.append((folder, sum(times) / len(times), len(times)))
    base = rows[0][1]
    print(f"{'run':<70} {'s/step':>8} {'steps':>6} {'ratio':>6}")
    for folder, mean, n in rows:
        print(f"{str(folder)[-70:]:<70} {mean:8.1f} {n:6d} {mean / base:6.2f}")
    return 0


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
    base = SqlOptions.from_task_config(TaskConfig(task=args.task))
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


def add_parser(sub) -> None:
    bench = sub.add_parser("bench", help="measurements (replay memory, step-time ratios)")
    which = bench.add_subparsers(dest="bench", required=True)
    rep = which.add_parser("replay", help="peak memory of the replay distance vs. chunk size")
    rep.add_argument("--model", default="smollm2-135m-instruct")
    rep.add_argument("--responses", type=int, default=4)
    rep.add_argument("--tokens", type=int, default=512)
    rep.add_argument("--chunks", default="512,128,32", help="comma-separated chunk sizes")
    rep.set_defaults(bench_fn=bench_replay)
    steps = which.add_parser("steps", help="mean step time of stored runs and ratios to the first")
    steps.add_argument("runs", nargs="+", help="result folders (…/<setting>/)")
    steps.set_defaults(bench_fn=bench_steps)
    sql = which.add_parser("sql", help="text-to-SQL reward throughput on 1, 2, ... processes")
    sql.add_argument("--task", default="spider-mini", help="a text-to-SQL task")
    sql.add_argument("--data-dir", default=None)
    sql.add_argument("--responses", type=int, default=4000)
    sql.add_argument("--processes", default="1,2", help="comma-separated process counts")
    sql.set_defaults(bench_fn=bench_sql)


if __name__ == "__main__" and len(sys.argv) == 6 and sys.argv[1] == "_replay_one":
    print(json.dumps(_replay_one(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                                 int(sys.argv[5]))))
