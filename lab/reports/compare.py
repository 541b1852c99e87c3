"""``python -m harness compare RUN_DIR...``: stored runs side by side (mean ± sample std and n
of the task's headline metrics), then every run against a reference run (the GDPO one unless
``--reference``): the paired per-seed difference with its 95 % interval and probability of
improvement and p-value (Holm-adjusted over the outcome columns); with the seeds' predictions,
the interval over seeds and items beside it and the smallest difference those seeds and items
detect (lab.reports.contrasts)."""
from __future__ import annotations

import argparse
import re
from pathlib import Path

from lab.reports import render
from lab.reports.aggregate import Cell, check_poolable, check_same_code, machine_note

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


def curve_cells(files: dict, curves: list[str], footnote: str) -> dict[str, Cell]:
    """For each per-step metric in ``curves`` (e.g. ``reward/format``, ``loss``): a cell of
    each seed's mean over all its steps (``train M``) and over its last third (``train M,
    last third``), read from ``seed<k>.train.jsonl``; a metric no step logged is an error."""
    from harness.results import read_train_log

    if not curves:
        return {}
    logs = {s: read_train_log(Path(p).with_suffix(".train.jsonl")) for s, p in files.items()}
    out = {}
    for m in curves:
        whole, last = [], []
        for s, rows in logs.items():
            values = [float(r[m]) for r in rows if isinstance(r.get(m), (int, float))]
            if not values:
                raise ValueError(f"--curves {m}: seed {s}'s training log has no such metric "
                                 f"(it has {', '.join(sorted(rows[0])) if rows else 'no rows'})")
            whole.append((s, sum(values) / len(values)))
            tail = values[-max(1, len(values) // 3):]
            last.append((s, sum(tail) / len(tail)))
        out[f"train {m}"] = Cell(tuple(whole), footnote=footnote)
        out[f"train {m}, last third"] = Cell(tuple(last), footnote=footnote)
    return out


def run_cells(folder: Path, allow_mixed_code: bool = False,
              curves: list[str] = ()) -> tuple[str, dict[str, Cell]]:
    """(task, metric -> cell over the folder's seeds); the seeds must share their settings and
    (unless ``allow_mixed_code``: footnoted) their code's fingerprint. ``curves``: per-step
    training metrics summarised per seed (:func:`curve_cells`)."""
    from harness.provenance import machine_of_result
    from harness.results import load_result

    files = seed_files(folder)
    check_poolable(list(files.values()))
    results = {s: load_result(p) for s, p in files.items()}
    footnote = check_same_code(list(files.values()), list(results.values()), allow_mixed_code)
    on_machines = machine_note(list(results), list(results.values()))
    footnote = "; ".join(x for x in (footnote, on_machines) if x)
    machines = tuple((s, machine_of_result(r)) for s, r in results.items())
    task = next(iter(results.values()))["task"]
    metrics = sorted({m for r in results.values() for m, v in r["metrics"].items()
                      if isinstance(v, (int, float))})
    cells = {m: Cell(tuple((s, float(r["metrics"][m])) for s, r in results.items()
                           if m in r["metrics"]), footnote=footnote,
                     items=seed_items(files, task, m), machines=machines) for m in metrics}
    steps = [(s, float(r["train"]["time/step/mean"])) for s, r in results.items()
             if "time/step/mean" in r.get("train", {})]
    if steps:
        # seconds depend on the machine most of all: its footnote, not the code's
        cells[TIME_COLUMN] = Cell(tuple(steps), footnote=on_machines, machines=machines)
    cells.update(curve_cells(files, list(curves), footnote))
    return task, cells


def seed_items(files: dict, task: str, metric: str) -> tuple:
    """(seed, item ids, per-item points) of each seed on ``metric`` (lab.reports.items); empty
    unless every seed has them."""
    from lab.reports.items import item_values

    out = []
    for s, path in files.items():
        predictions = Path(path).with_suffix(".predictions.jsonl")
        got = item_values(predictions, task, metric) if predictions.is_file() else None
        if got is None:
            return ()
        out.append((s, *got))
    return tuple(out)


def flat_settings(config: dict) -> dict[str, object]:
    """A stored config as field -> value (sections flattened; names are unique across them)."""
    out: dict[str, object] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out.update(value)
        else:
            out[key] = value
    return out


def compared_fields() -> set[str]:
    """What a comparison is about: the method and its options (the method section)."""
    from harness import config as cfg

    return {name for name, (section, _) in cfg.all_fields().items() if section == "method"}


def setting_differences(folders: list[Path]) -> dict[str, list]:
    """Result-changing fields whose values differ between the runs (each run's first seed),
    the method and its options aside: field -> the runs' values, in order."""
    from harness import config as cfg
    from harness.results import load_result

    known = cfg.all_fields()
    aside = compared_fields() | {"seed", "preset"}
    flats = [flat_settings(load_result(next(iter(seed_files(f).values())))["config"])
             for f in folders]
    out: dict[str, list] = {}
    for name in sorted(set().union(*flats)):
        meta = known[name][1].metadata if name in known else {}
        if name in aside or not meta.get("identity", True) or meta.get("machine"):
            continue
        values = [flat.get(name) for flat in flats]
        if any(v != values[0] for v in values[1:]):
            out[name] = values
    return out


def comparable_problems(folders: list[Path], allowed: set[str]) -> list[str]:
    """Runs are compared only where they differ in what is being compared (the method)."""
    diff = {k: v for k, v in setting_differences(folders).items() if k not in allowed}
    return [f"{name}: " + ", ".join(f"{label(f)} {v!r}" for f, v in zip(folders, values))
            for name, values in diff.items()]


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
    from lab.reports.tables import contrast_grids

    folders = [Path(f) for f in args.runs]
    curves = [m.strip() for m in args.curves.split(",") if m.strip()]
    runs = [run_cells(f, args.allow_mixed_code, curves) for f in folders]
    tasks = {t for t, _ in runs}
    if len(tasks) > 1:
        raise ValueError(f"these runs evaluate different tasks ({sorted(tasks)}); compare runs "
                         "of one task")
    task = TASKS.get(tasks.pop())
    allowed = {a.replace("-", "_") for item in args.allow_different for a in item.split(",")}
    problems = comparable_problems(folders, allowed)
    if problems:
        raise ValueError("these runs differ in more than the method, so their difference is not "
                         "the method's:\n" + "\n".join(f"  - {p}" for p in problems)
                         + "\n  (--allow-different FIELD compares them anyway)")
    available = sorted({m for _, c in runs for m in c})
    if args.metrics:
        headline = [m.strip() for m in args.metrics.split(",") if m.strip()]
        unknown = [m for m in headline if m not in available]
        if unknown:
            raise ValueError(f"--metrics {', '.join(unknown)}: not stored by these runs; they "
                             f"have {', '.join(available)}")
    else:
        headline = list(task.headline)
    trained = [k for m in curves for k in (f"train {m}", f"train {m}, last third")]
    columns = [m for m in headline if any(m in c for _, c in runs)] + trained + [TIME_COLUMN]
    # a training loss is better lower; a reward, like the task's metrics, higher
    higher = [m != TIME_COLUMN and not (m.startswith("train ") and "loss" in m)
              and task.higher_is_better(m) for m in columns]
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
                           rows=[(name, cells[:-1]) for name, cells in grid.rows],
                           outcome=[m != TIME_COLUMN for m in columns])
        from lab.reports.items import benchmark_items

        sizes = [None if m == TIME_COLUMN else benchmark_items(task.name, m) for m in columns]
        for g in contrast_grids(body, ref, sizes):
            print(render.markdown(g))
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("compare", help="stored runs side by side, and each against a reference "
                                       "run: paired difference with 95 %% intervals over "
                                       "seeds and over seeds and items, probability of "
                                       "improvement, Holm-adjusted p")
    p.add_argument("runs", nargs="+", help="run folders: <results>/<task>/<method>/<model>/<setting>")
    p.add_argument("--metrics", default="", help="comma-separated metrics (default: the task's "
                                                 "headline metrics)")
    p.add_argument("--curves", default="",
                   help="comma-separated per-step training metrics (e.g. reward/format,loss): "
                        "each seed's mean over its steps and over its last third, compared "
                        "like the metrics")
    p.add_argument("--reference", default=None,
                   help="the run folder the others are compared against (default: the GDPO "
                        "run, else the first)")
    p.add_argument("--allow-mixed-code", action="store_true",
                   help="pool a folder's seeds even when different code made them (footnoted)")
    p.add_argument("--allow-different", action="append", default=[], metavar="FIELD",
                   help="compare runs whose settings differ in this field too (repeatable or "
                        "comma-separated, e.g. steps,eval_limit); by default runs must differ "
                        "only in the method and its options")
    p.set_defaults(handler=cmd_compare)
