"""``bench steps``: step-time ratios of stored runs (e.g. MRTPO vs GDPO on one setting)."""
from __future__ import annotations

import argparse
from pathlib import Path

from harness.results import read_train_log


def bench_steps(args: argparse.Namespace) -> int:
    """Mean step time of stored runs (their seeds' train logs), and ratios to the first."""
    rows = []
    for folder in args.runs:
        times = []
        for log in sorted(Path(folder).glob("seed*.train.jsonl")):
            steps = read_train_log(log)
            times += [s["time/step"] for s in steps]
        if not times:
            raise ValueError(f"{folder}: no seed*.train.jsonl with steps")
        rows.append((folder, sum(times) / len(times), len(times)))
    base = rows[0][1]
    print(f"{'run':<70} {'s/step':>8} {'steps':>6} {'ratio':>6}")
    for folder, mean, n in rows:
        print(f"{str(folder)[-70:]:<70} {mean:8.1f} {n:6d} {mean / base:6.2f}")
    return 0
