"""``python -m harness compare RUN_DIR...``: stored runs side by side (mean ± sample std and n
of the task's headline metrics), then every run against a reference run (the GDPO one unless
``--reference``): the paired per-seed difference with its 95 % interval and probability of
improvement, and the seeds that would resolve it at 80 % power."""
from __future__ import annotations

import argparse
import re
from pathlib import Path

from harness.reports import render
from harness.reports.aggregate import Cell, check_poolable, check_same_code

# the harness's own columns and their direction (a task's metrics declare theirs on the task)
TIME_COLUMN = "s/step"  # seconds per training step: smaller is better


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
        cells[TIME_COLUMN] = Cell(tuple(steps))
    return task, cells


def label(folder: Path) -> str:
    parts = folder.resolve().parts
    return "/".join(parts[-3:-2] + parts[-1:])  # method/setting


def reference_index(folders: list[Path], reference: str | None) -> int:
    """Which of ``folders`` the others are compared against: ``reference`` (one of them), or
    the first GDPO run, or the first run."""
    if reference:
        want = Path(reference).resolve()
        for i, f in enumerate(folders):
            if f.resolve() == want:
                return i
        raise ValueError(f"--reference {reference} is not one of the compared runs")
    methods = [f.resolve().parts[-3] for f in folders]
    return methods.index("gdpo") if "gdpo" in methods else 0


def cmd_compare(args: argparse.Namespace) -> int:
    from tasks import TASKS
    from harness.reports.tables import contrast_grids

    folders = [Path(f) for f in args.runs]
    runs = [run_cells(f, args.allow_mixed_code) for f in folders]
    tasks = {t for t, _ in runs}
    if len(tasks) > 1:
        raise ValueError(f"these runs evaluate different tasks ({sorted(tasks)}); compare runs "
                         "of one task")
    task = TASKS.get(tasks.pop())
    headline = list(args.metrics.split(",")) if args.metrics else list(task.headline)
    columns = [m for m in headline if any(m in c for _, c in runs)] + [TIME_COLUMN]
    higher = [m != TIME_COLUMN and task.higher_is_better(m) for m in columns]
    grid = render.Grid(f"{task.name}: mean ± sample std over seeds (n = seeds)", "run",
                       [""] * (len(columns) + 1), [*columns, "n"], higher=[*higher, True])
    for folder, (_, cells) in zip(folders, runs):
        n = max((c.n for c in cells.values()), default=0)
        grid.rows.append((label(folder), [cells.get(m, Cell(note="–")) for m in columns]
                          + [Cell(note=str(n))]))
    print(render.markdown(grid))
    if len(runs) > 1:
        ref = label(folders[reference_index(folders, args.reference)])
        body = render.Grid(grid.title, "run", [""] * len(columns), columns, higher=higher,
                           rows=[(name, cells[:-1]) for name, cells in grid.rows])
        for g in contrast_grids(body, ref):
            print(render.markdown(g))
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("compare", help="stored runs side by side, and each against a reference "
                                       "run: paired per-seed difference, 95 %% interval, "
                                       "probability of improvement, seeds for 80 %% power")
    p.add_argument("runs", nargs="+", help="run folders: <results>/<task>/<method>/<model>/<setting>")
    p.add_argument("--metrics", default="", help="comma-separated metrics (default: the task's "
                                                 "headline metrics)")
    p.add_argument("--reference", default=None,
                   help="the run folder the others are compared against (default: the GDPO "
                        "run, else the first)")
    p.add_argument("--allow-mixed-code", action="store_true",
                   help="pool a folder's seeds even when different code made them (footnoted)")
    p.set_defaults(handler=cmd_compare)
