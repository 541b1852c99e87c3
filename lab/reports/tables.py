"""Tables: the plain-text summary of ``harness run``, and the paper's tables built from their
specs and the stored runs (benchmark tables), the method registry (Table 8) or the presets
(Table 9)."""
from __future__ import annotations

import math
from typing import Sequence

from lab.reports.aggregate import Cell, cell, mean_of_columns
from lab.reports.contrasts import contrast_grids  # noqa: F401  (tables' contrasts)
from lab.reports.items import benchmark_items
from lab.reports.plan import Plan, needs_text
from lab.reports.render import Grid
from lab.reports.spec import Spec, paper_cell


def render(rows: list[tuple[str, dict[str, list[float]]]], columns: Sequence[str],
           title: str = "") -> str:
    """A plain-text table: one row per (label, {column: values over seeds}); n = seeds."""
    header = ["", *columns, "n"]
    body = []
    for label, data in rows:
        n = max((len(v) for v in data.values()), default=0)
        body.append([label, *[cell(data[c]) if data.get(c) else "-" for c in columns], str(n)])
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    fmt = lambda r: "  ".join(x.ljust(w) if i == 0 else x.rjust(w) for i, (x, w) in
                              enumerate(zip(r, widths)))
    lines = ([title] if title else []) + [fmt(header), "  ".join("-" * w for w in widths)]
    lines += [fmt(r) for r in body]
    return "\n".join(lines)


def column_directions(columns) -> list[bool | None]:
    """Per spec column, whether larger is better (its task's declaration; derived means of
    higher-is-better columns are too); None for a training-log column (a diagnostic, not a
    score: no best row is marked, and contrasts read "larger" as the direction)."""
    from tasks import TASKS

    return [None if c.log else True if c.derived else
            TASKS.get(c.task).higher_is_better(c.metric) for c in columns]


def log_mean(job, seed: int, key: str, result: dict | None = None) -> float | None:
    """The mean over a stored seed's training steps of a per-step log key (None: no step has
    it, e.g. a method without that diagnostic). With the seed's ``result``: checked against
    the mean its ``train`` summary stored when the seed ran, where it has one (a ValueError
    naming the log when they differ: the side file is not the seed's)."""
    import math

    from lab.reports.figures import train_log

    vals = [float(r[key]) for r in train_log(job, seed) if key in r
            and not math.isnan(float(r[key]))]
    mean = sum(vals) / len(vals) if vals else None
    # a key the summary lacks (it keys on the first step's) cannot be checked
    stored = (result or {}).get("train", {}).get(f"{key}/mean")
    if stored is not None and (mean is None or not math.isclose(stored, mean, rel_tol=1e-9,
                                                                abs_tol=1e-12)):
        raise ValueError(f"{job.seed_run(seed).train_log}: its mean {key} is "
                         f"{mean}, the seed's result stored {stored}; the log is not this "
                         "seed's (rerun the seed, or restore its log)")
    return mean


def item_scores(job, seed: int, metric: str) -> tuple | None:
    """(seed, item ids, per-item points) of a stored seed on ``metric`` (lab.reports.items),
    checked against the metric its result stored; None without per-item scores."""
    import math

    from harness.results import load_result
    from lab.reports.items import item_values

    path = job.seed_run(seed).result
    if not path.with_suffix(".predictions.jsonl").is_file():
        return None  # a result stored without its responses: seeds only
    got = item_values(path.with_suffix(".predictions.jsonl"), job.task, metric)
    if got is None:
        return None
    stored = load_result(path)["metrics"].get(metric)
    remade = sum(got[1]) / len(got[1])
    if stored is None or not math.isclose(remade, stored, rel_tol=1e-9, abs_tol=1e-9):
        raise ValueError(f"{path.with_suffix('.predictions.jsonl')}: its items give {metric} "
                         f"{remade}, the result stored {stored}; the predictions are not this "
                         "seed's")
    return (seed, *got)


def benchmark_grids(plan: Plan, reference: str | None = None) -> list[Grid]:
    """One grid per model from the stored seeds of every job, each followed by its rows
    against the ``reference`` row (the spec's, GDPO by default); then one per model the paper
    reports, each followed by its rows' gaps to the reference row as its printed stds allow
    (:func:`paper_gap_grid`). A cell that cannot be made here says what it needs; a derived
    "mean" column is the per-seed mean of the row's other cells."""
    spec, setting = plan.spec, plan.setting
    reference = reference or spec.reference
    if reference not in {r.label for r in spec.rows}:
        raise ValueError(f"{spec.name} has no row {reference!r} to compare against (rows: "
                         f"{', '.join(r.label for r in spec.rows)})")
    columns = spec.columns_for(setting.name)
    jobs = {(j.model_label, j.task, j.row.label): j for j in plan.jobs}
    grids = []
    for model in setting.models:
        presets = ", ".join(dict.fromkeys(setting.preset_for(t)
                                          for t in spec.tasks(setting.name)))
        pinned = "".join(f", {k}={v}" for k, v in setting.overrides)
        grid = Grid(f"{spec.title}: {model}, setting {setting.name} (preset {presets}{pinned})",
                    spec.row_header, [c.group for c in columns], [c.label for c in columns],
                    higher=column_directions(columns),
                    outcome=[not c.derived and not c.log for c in columns])
        for row in spec.rows:
            cells: list[Cell] = []
            for col in columns:
                if col.derived:
                    cells.append(mean_of_columns([c for c, k in zip(cells, columns)
                                                  if not k.derived and not k.log]))
                    continue
                job = jobs[(model, col.task, row.label)]
                if job.stored:
                    results, footnote = plan.stored_results(job)
                    machines = plan.machines(job)
                    if col.log:
                        got = [(s, log_mean(job, s, col.log, r)) for s, r in results]
                        vals = tuple((s, v) for s, v in got if v is not None)
                        cells.append(Cell(vals, "" if vals else "–", footnote,
                                          machines=machines))
                        continue
                    vals = tuple((s, float(r["metrics"][col.metric])) for s, r in results
                                 if col.metric in r["metrics"])
                    per_item = [item_scores(job, s, col.metric) for s, _ in vals]
                    cells.append(Cell(vals, "" if vals else f"no metric {col.metric}",
                                      footnote, items=tuple(x for x in per_item if x)
                                      if all(per_item) else (), machines=machines))
                elif job.blocked:
                    cells.append(Cell(note=needs_text(job.blocked)))
                else:
                    cells.append(Cell(note="not run"))
            grid.rows.append((row.label, cells))
        ns = sorted({c.n for _, cells in grid.rows for c in cells if c.values})
        if ns:  # how many seeds the cells pool (each cell's own n is in the CSV)
            grid.title += (f"; n = {ns[0]} seed{'s' * (ns[0] > 1)} per cell" if len(ns) == 1
                           else f"; n = {ns[0]}-{ns[-1]} seeds per cell")
        counts = sorted({len(ids) for _, cells in grid.rows for c in cells
                         for _, ids, _ in c.items})
        if counts:  # the evaluation sample each seed's score is made on
            grid.title += (f", {counts[0]} items per seed" if len(counts) == 1
                           else f", {counts[0]}-{counts[-1]} items per seed")
        # the benchmark's own item count per column: more items than it has cannot be had
        sizes = [None if c.derived or c.log else benchmark_items(c.task, c.metric)
                 for c in columns]
        grids += [grid, *contrast_grids(grid, reference, sizes)]
    paper_columns = [c for c in spec.columns if not c.settings or "paper" in c.settings]
    for model, rows in spec.paper.items():
        grid = Grid(f"The paper's numbers: {model}", spec.row_header,
                    [c.group for c in paper_columns], [c.label for c in paper_columns])
        for row in spec.rows:
            if row.label in rows:
                cells = [Cell(note="–" if paper_cell(t) is None else t)
                         for t in rows[row.label]]
                grid.rows.append((row.label, cells))
        grid.mark_best = False
        grids.append(grid)
        gaps = paper_gap_grid(spec, model, rows, paper_columns, reference)
        if gaps is not None:
            grids.append(gaps)
    return grids


def paper_gap_grid(spec: Spec, model: str, rows: dict, columns, reference: str) -> Grid | None:
    """The paper's printed rows against its ``reference`` row, per column: the Welch interval
    at the spec's ``paper_n``, the paired one over every correlation, the item floor and the
    grid flag (lab.reports.paper_gaps). None where the paper prints no std to size them by or
    no reference row."""
    from lab.reports import paper_gaps
    from lab.reports.paper_runs import run_items

    def printed(texts: list[str]) -> list[paper_gaps.Printed | None]:
        cells = [paper_cell(t) for t in texts]
        return [None if c is None or math.isnan(c[1]) else
                paper_gaps.Printed(c[0], c[1], spec.paper_n) for c in cells]

    if not spec.paper_n or reference not in rows:
        return None
    ref = printed(rows[reference])
    if not any(ref):
        return None
    # a column's item count from its benchmark, where this machine can read it (None: derived)
    items = [run_items(c.task, c.metric) if c.task and c.metric else None for c in columns]
    grid = Grid(f"The paper's numbers: {model} against {reference} (Welch 95 % interval at "
                f"n = {spec.paper_n})", spec.row_header, [c.group for c in columns],
                [c.label for c in columns], mark_best=False, legend=paper_gaps.LEGEND)
    for row in spec.rows:
        if row.label == reference or row.label not in rows:
            continue
        mine = printed(rows[row.label])
        if not any(mine):
            continue  # printed without a std (one run, the base model): nothing to size
        grid.rows.append((row.label, [
            Cell(note="–" if a is None or b is None else
                 paper_gaps.gap(a, b, n, (row.label, reference)).text())
            for a, b, n in zip(mine, ref, items)]))
    return grid if grid.rows else None


def methods_grid(spec: Spec) -> Grid:
    """Table 8 from the method registry: each method's own description and source."""
    import methods

    grid = Grid(spec.title, "Method", ["", "", ""], ["What changes in the GDPO step", "Parts",
                                                      "Source"], mark_best=False)
    for name in spec.methods():
        m = methods.get(name)
        parts = ", ".join(f"{k}={v}" for k, v in vars(m.parts).items() if v not in (None, ()))
        if m.needs:
            parts += f"; extra passes: {', '.join(m.needs)}"
        grid.rows.append((m.name, [Cell(note=m.help), Cell(note=parts), Cell(note=m.source)]))
    return grid


def preset_rows(names: Sequence[str]) -> dict[str, list[str]]:
    """Table 9's parameters, read from the presets (parameter -> one value per preset)."""
    from harness.config import resolve

    configs = [resolve(n, {}) for n in names]
    fmt = lambda x: f"{x:g}"
    return {
        "Training steps": [str(c.training.steps) for c in configs],
        "Prompts per step / G": [f"{c.rollout.prompts_per_step} / {c.rollout.group_size}"
                                 for c in configs],
        "Rollout temp. / top-p / top-k": [
            f"{c.rollout.temperature:.1f} / "
            f"{'1.0' if c.rollout.top_p == 1.0 else f'{c.rollout.top_p:g}'} / "
            f"{c.rollout.top_k or 'none'}" for c in configs],
        "Learning rate": [fmt(c.training.lr) for c in configs],
        "Max prompt / response tokens": [f"{c.rollout.max_prompt_tokens} / "
                                         f"{c.rollout.max_response_tokens}" for c in configs],
        "KL coefficient": [fmt(c.training.kl_coef) for c in configs],
        "dtype": [c.model.dtype for c in configs],
    }


def presets_grid(spec: Spec) -> Grid:
    names = spec.raw["presets"]
    grid = Grid(spec.title, "Parameter", ["", "", ""], list(spec.raw.get("labels", names)),
                mark_best=False)
    for label, values in preset_rows(names).items():
        grid.rows.append((label, [Cell(note=v) for v in values]))
    return grid


def type_key(label: str) -> str:
    """A Table 4 row label -> its diagnostics key (``End phrase`` -> ``end_phrase``)."""
    return label.lower().replace(" ", "_")


def localisation_grids(plan: Plan, min_instances: int = 5) -> list[Grid]:
    """Table 4 from MRTPO runs' per-step diagnostics: per constraint type, its distance share
    (Dist.) and token share (Tok.) pooled over every satisfied instance of every step and
    seed (weighted by the step's count), and Ratio = Dist. / Tok., with a 95 % t-interval
    over the seeds (and tasks) that have ``min_instances`` instances each, where two do; "–"
    below ``min_instances`` instances in all, as in the paper."""
    from lab.reports.figures import train_log

    spec, setting = plan.spec, plan.setting
    labels = list(spec.raw["constraints"])
    grids = []
    for model in setting.models:
        jobs = [j for j in plan.jobs if j.model_label == model]
        grid = Grid(f"{spec.title}: {model}, setting {setting.name} (preset "
                    f"{jobs[0].config.preset if jobs else setting.preset})", "Constraint",
                    ["", "", "", ""], ["Dist.", "Tok.", "Ratio", "instances"], mark_best=False)
        logs = {(j.model_label, j.task, s): train_log(j, s) for j in jobs for s in j.stored}
        rows = [r for log in logs.values() for r in log]
        for label in labels:
            key = f"diag/type/{type_key(label)}"
            got = [(r[f"{key}/dist"], r[f"{key}/tok"], r[f"{key}/n"]) for r in rows
                   if f"{key}/n" in r]
            n = sum(w for *_, w in got)
            # per seed (and task), the same pooled ratio: its spread gives the interval
            per_seed = []
            for log in logs.values():
                mine = [(r[f"{key}/dist"], r[f"{key}/tok"], r[f"{key}/n"]) for r in log
                        if f"{key}/n" in r]
                if sum(w for *_, w in mine) >= min_instances:
                    per_seed.append(sum(d * w for d, _, w in mine)
                                    / sum(t * w for _, t, w in mine))
            if not jobs or not any(j.stored for j in jobs):
                why = next((needs_text(j.blocked) for j in jobs if j.blocked), "not run")
                cells = [Cell(note=why)] * 3 + [Cell(note="0")]
            elif n < min_instances:
                cells = [Cell(note="–")] * 3 + [Cell(note=f"{n:g}")]
            else:
                dist = 100 * sum(d * w for d, _, w in got) / n
                tok = 100 * sum(t * w for _, t, w in got) / n
                from lab.reports.uncertainty import t_interval

                low, high = t_interval(per_seed)
                ratio = f"{dist / tok:.1f}" + ("" if low != low else  # NaN: < 2 seeds
                                               f" [{low:.1f}, {high:.1f}]")
                cells = [Cell(note=f"{dist:.1f}"), Cell(note=f"{tok:.1f}"),
                         Cell(note=ratio), Cell(note=f"{n:g}")]
            grid.rows.append((label, cells))
        grids.append(grid)
    for model, rows in spec.paper.items():
        grid = Grid(f"The paper's numbers: {model}", "Constraint", ["", "", ""],
                    ["Dist.", "Tok.", "Ratio"], mark_best=False)
        for label in labels:
            if label in rows:
                grid.rows.append((label, [Cell(note=t) for t in rows[label]]))
        grids.append(grid)
    return grids
