"""``bench steps``: step-time ratios of stored runs (e.g. MRTPO vs GDPO on one setting), each
run's step split into its logged phases, and its peak GPU memory where it was logged."""
from __future__ import annotations

import argparse
from pathlib import Path

from harness.results import read_train_log


def bench_steps(args: argparse.Namespace) -> int:
    """Mean step time of stored runs (their seeds' train logs), and ratios to the first."""
    rows, splits = [], []
    for folder in args.runs:
        steps = []
        for log in sorted(Path(folder).glob("seed*.train.jsonl")):
            steps += read_train_log(log)
        if not steps:
            raise ValueError(f"{folder}: no seed*.train.jsonl with steps")
        times = [s["time/step"] for s in steps]
        rows.append((folder, sum(times) / len(times), len(times)))
        splits.append(phase_split(steps))
    base = rows[0][1]
    print(f"{'run':<70} {'s/step':>8} {'steps':>6} {'ratio':>6}")
    for folder, mean, n in rows:
        print(f"{str(folder)[-70:]:<70} {mean:8.1f} {n:6d} {mean / base:6.2f}")
    for (folder, *_), split in zip(rows, splits):
        print(f"{str(folder)[-70:]}: " + ", ".join(f"{k} {v:.2f}" for k, v in split.items()))
    return 0


def phase_split(steps: list[dict]) -> dict[str, float]:
    """Mean seconds per logged phase (``time/*`` but the whole step and the worker's start-up
    marks), then the largest value of each ``gpu/*`` memory figure (GB) over the steps."""
    out: dict[str, float] = {}
    keys = sorted({k for s in steps for k in s if k.startswith("time/") and k != "time/step"
                   and not k.startswith("time/startup/")})
    for k in keys:
        vals = [s[k] for s in steps if k in s]
        out[k.removeprefix("time/") + " s"] = sum(vals) / len(vals)
    for k in sorted({k for s in steps for k in s if k.startswith("gpu/")}):
        out[k.removeprefix("gpu/")] = max(s[k] for s in steps if k in s)
    return out
