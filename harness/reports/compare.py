"""``python -m harness compare RUN_DIR...``: stored runs side by side (mean ± sample std and n
of the task's headline metrics); for two runs also the paired per-seed difference."""
from __future__ import annotations

import argparse
import re
from pathlib import Path

from harness.reports import render
from harness.reports.aggregate import Cell, check_poolable, check_same_code, paired_difference


def seed_files(folder: Path) -> dict[int, Path]:
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a run folder (<task>/<method>/<model>/<setting>/)")
    out = {int(m.group(1)): p for p in folder.glob("seed*.json")
           if (m := re.fullmatch(r"seed(\d+)\.json", p.name))}
    if not out:
        raise FileNotFoundError(f"{folder} holds no seed*.json results")
    return dict(sorted(out.items()))


def run_cells(folder: Path, allow_mixed_code: bool = False) -> tuple[str, dict[str, Cell]]:
    """(task, metric -> cell over the folder's seeds); the seeds must share their settings and
    (unless ``allow_mixed_code``: footnoted) their code's fingerprint."""
    from harness.results import load_result

    files = seed_files(folder)
    check_poolable(list(files.values()))
    results = {s: load_result(p) for s, p in files.items()}
    footnote = check_same_code(list(files.values()), list(results.values()), allow_mixed_code)
    task = next(iter(results.values()))["task"]
    metrics = sorted({m for r in results.values() for m, v in r["metrics"].items()
                      if isinstance(v, (int, float))})
    cells = {m: Cell(tuple((s, float(r["metrics"][m])) for s, r in results.items()
                           if m in r["metrics"]), footnote=footnote) for m in metrics}
    steps = [(s, float(r["train"]["time/step/mean"])) for s, r in results.items()
             if "time/step/mean" in r.get("train", {})]
    if steps:
        cells["s/step"] = Cell(tuple(steps))
    return task, cells


def label(folder: Path) -> str:
    parts = folder.resolve().parts
    return "/".join(parts[-3:-2] + parts[-1:])  # method/setting


def cmd_compare(args: argparse.Namespace) -> int:
    from tasks import TASKS

    folders = [Path(f) for f in args.runs]
    runs = [run_cells(f, args.allow_mixed_code) for f in folders]
    tasks = {t for t, _ in runs}
    if len(tasks) > 1:
        raise ValueError(f"these runs evaluate different tasks ({sorted(tasks)}); compare runs "
                         "of one task")
    task = tasks.pop()
    headline = list(args.metrics.split(",")) if args.metrics else list(TASKS.get(task).headline)
    columns = [m for m in headline if any(m in c for _, c in runs)] + ["s/step"]
    grid = render.Grid(f"{task}: mean ± sample std over seeds (n = seeds)", "run",
                       [""] * (len(columns) + 1), [*columns, "n"])
    for folder, (_, cells) in zip(folders, runs):
        n = max((c.n for c in cells.values()), default=0)
        grid.rows.append((label(folder), [cells.get(m, Cell(note="–")) for m in columns]
                          + [Cell(note=str(n))]))
    print(render.markdown(grid))
    if len(runs) == 2:
        (_, a), (_, b) = runs
        diff = render.Grid(f"paired difference per seed, {label(folders[0])} minus "
                           f"{label(folders[1])}", "", [""] * len(columns), columns,
                           mark_best=False)
        cells = [paired_difference(a[m], b[m]) if m in a and m in b else Cell(note="–")
                 for m in columns]
        diff.rows.append(("mean ± std", cells))
        print(render.markdown(diff))
        shared = sorted({s for c in cells for s, _ in c.values})
        print(f"seeds in both: {shared or 'none'}")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("compare", help="stored runs side by side; for two, the paired per-seed "
                                       "difference")
    p.add_argument("runs", nargs="+", help="run folders: <results>/<task>/<method>/<model>/<setting>")
    p.add_argument("--metrics", default="", help="comma-separated metrics (default: the task's "
                                                 "headline metrics)")
    p.add_argument("--allow-mixed-code", action="store_true",
                   help="pool a folder's seeds even when different code made them (footnoted)")
    p.set_defaults(handler=cmd_compare)
