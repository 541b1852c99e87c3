"""Every row of a table against its reference row: the paired difference over seeds (the items
held fixed), the same over seeds and items, each with Holm's adjustment over the table's outcome
comparisons, and what the table's seeds and items can detect at all."""
from __future__ import annotations

import dataclasses
import math

from lab.reports.aggregate import Cell, ContrastCell
from lab.reports.render import Grid

SEEDS_LEGEND = (
    "Against the reference row, per shared seed: mean paired difference, its 95 % t-interval "
    "over seeds (the evaluation items held fixed; `?`: it covers 0, undecided), P, the "
    "probability of improvement (rliable's: P(row better than reference) + ½ P(tie) over seed "
    "pairs, in the metric's direction), p, the paired t-test's, and its Holm adjustment over "
    "the table's outcome comparisons (family-wise 5 %: below 0.05 is decided for the table).")
ITEMS_LEGEND = (
    "Against the reference row over seeds and items: the per-item paired differences as a "
    "crossed design (random seeds, random items; Clark 1973), the mean's 95 % t-interval at "
    "Satterthwaite's degrees of freedom (`?`: it covers 0; `no spread`: every difference "
    "equal, undecided), p and its Holm adjustment over the table's outcome comparisons. At "
    "one shared seed it is the paired t over items. The two intervals answer two questions: "
    "the seed-only one, whether the difference holds on these items at other seeds; this "
    "one, whether it holds on other items like them. On simulated 0/1 scores shaped like "
    "these tables each covers its own question at close to 95 % (docs/results.md, `python -m "
    "lab.reports.coverage`), and neither is the one to read because it is narrower.")
DETECT_LEGEND = (
    "What this design can detect, per column, from the seed, item and residual variance of "
    "the comparisons above pooled over rows (those with two seeds or more): the smallest true "
    "difference a two-sided test at α = 0.05 finds with 80 % power at the table's seeds and "
    "items, and the seeds that would find one item's worth (100 / items points) or 5 points "
    "at these items (`> 1000`: more, or never, when the items' own noise is larger; "
    "`> 100`: larger than any difference of two percentages, nothing is detectable). The "
    "item floor is the smallest detectable difference at these items however many seeds are "
    "run (the item sample's own noise): below it only more items help, and the last row says "
    "how many would find 5 points at the table's seeds (`never`: the seeds' own noise is "
    "larger at that many seeds; `not reachable`: more than the whole benchmark has). Each "
    "figure is a point estimate from a few seeds, then `up to` the same figure at the "
    "variance components' joint 95 % upper bounds (each mean square at its chi-square upper "
    "limit, Bonferroni over the three, none reduced by another): what the data do not rule "
    "out. `0 estimated`: a component truncated at 0, not a measured 0.")


def outcome_columns(grid: Grid) -> list[bool]:
    """Columns whose comparisons are outcome tests (the Holm family): ``grid.outcome`` if set,
    else every column with a direction (not a diagnostic)."""
    if grid.outcome is not None:
        return list(grid.outcome)
    return [h is not None for h in (grid.higher or [True] * len(grid.columns))]


def with_holm(g: Grid, outcome: list[bool]) -> None:
    """Set each outcome comparison's Holm-adjusted p over the grid's family (in place)."""
    from lab.reports.items import holm

    family = [(i, j) for i, (_, cells) in enumerate(g.rows) for j, c in enumerate(cells)
              if outcome[j] and isinstance(c, ContrastCell) and not math.isnan(c.p)]
    adjusted = holm([g.rows[i][1][j].p for i, j in family])
    for (i, j), a in zip(family, adjusted):
        g.rows[i][1][j] = dataclasses.replace(g.rows[i][1][j], holm=a)


def contrast_grids(grid: Grid, reference: str, sizes: list[int | None] | None = None
                   ) -> list[Grid]:
    """For a grid of per-seed cells: every other row against the ``reference`` row over seeds,
    then over seeds and items (where the cells carry per-item scores), then what the design
    can detect (``sizes``: per column, the benchmark's item count). None when the reference
    row is absent or has no values."""
    rows = dict(grid.rows)
    if reference not in rows or not any(c.values for c in rows[reference]):
        return []
    higher = [h is not False for h in (grid.higher or [True] * len(grid.columns))]
    outcome = outcome_columns(grid)
    out = []
    for kind, what, legend in (("seeds", "paired difference per seed against", SEEDS_LEGEND),
                               ("items", "paired difference over seeds and items against",
                                ITEMS_LEGEND)):
        g = Grid(f"{grid.title}: {what} {reference}", grid.row_header, list(grid.groups),
                 list(grid.columns), mark_best=False, legend=legend)
        for label, cells in grid.rows:
            if label != reference:
                g.rows.append((label, [
                    ContrastCell.of(c, r, h, kind) if kind == "seeds" or outcome[j]
                    else Cell(note="–")
                    for j, (c, r, h) in enumerate(zip(cells, rows[reference], higher))]))
        if kind == "items":
            found = [c for _, cells in g.rows for c in cells if isinstance(c, ContrastCell)]
            if not found:
                continue  # no per-item scores anywhere: the seed-only grid is all there is
            counts = sorted({c.item.items for c in found})
            g.title += f" ({counts[0] if len(counts) == 1 else f'{counts[0]}-{counts[-1]}'} items)"
        with_holm(g, outcome)
        out.append(g)
        if kind == "items":
            detect = detectable_grid(g, outcome, sizes)
            if detect is not None:
                out.append(detect)
    return out


def detectable_grid(items_grid: Grid, outcome: list[bool],
                    sizes: list[int | None] | None = None) -> Grid | None:
    """Per outcome column of an items grid: the detectable difference at its seeds and items,
    the seeds one item's worth or 5 points would need, the item floor and the items 5 points
    would need (lab.reports.items), each a point estimate beside its upper bound
    (``items.upper``); ``sizes``: per column, the benchmark's item count, above which more
    items cannot be had."""
    from lab.reports import items as it

    cols = []
    for j in range(len(items_grid.columns)):
        parts = [it.components(cells[j].item_differences) for _, cells in items_grid.rows
                 if outcome[j] and isinstance(cells[j], ContrastCell)
                 and cells[j].item_differences is not None]
        cols.append(it.pooled(parts))
    if not any(cols):
        return None
    sizes = sizes or [None] * len(cols)
    uppers = [None if c is None else it.upper(c) for c in cols]  # each column's bounds, once

    def flat(c) -> bool:  # every comparison equal on every item: nothing to size a study by
        return c is None or c.variance_of_mean()[0] <= 1e-24

    def seeds(c, u, effect) -> str:
        def one(x) -> str:
            n = it.seeds_needed(x, effect)
            return f"> {it.MAX_SEEDS}" if n is None else str(n)
        return f"{one(c)} (up to {one(u)})"

    g = Grid(items_grid.title.split(": paired")[0] + ": what these seeds and items can detect",
             "", list(items_grid.groups), list(items_grid.columns), mark_best=False,
             legend=DETECT_LEGEND)

    def points(f, c, u, design: str) -> str:
        # a difference of two percentages is at most 100: past it, the number says only that
        # nothing this design could show would be detected
        def one(d: float) -> str:
            return "> 100" if d > 100 else f"±{d:.1f}"
        d, u = f(c), f(u)
        # a component estimated at 0 (truncated) is not a measured 0: only its bound is shown
        estimate = "0 estimated" if round(d, 1) == 0 else one(d)
        return f"{estimate}, up to {one(u)} ({design})"

    def row(label: str, text) -> None:  # one cell per column, text(c, its bounds, j) where c
        # has spread
        g.rows.append((label, [Cell(note="–" if c is None else "no spread" if flat(c)
                                    else text(c, u, j)) for j, (c, u) in
                               enumerate(zip(cols, uppers))]))

    def items(c, u, j) -> str:
        def one(x) -> str:
            n = it.items_needed(x, 5.0)
            # None: the seeds' own noise at this many seeds is above 5 points, whatever items
            if n is None:
                return f"never at {c.seeds} seeds"
            if sizes[j] is not None and n > sizes[j]:
                return f"not reachable ({n} > the benchmark's {sizes[j]})"
            return str(n)
        return f"{one(c)}, up to {one(u)} ({c.seeds} seeds)"

    row("detectable (80 % power) at seeds x items",
        lambda c, u, j: points(it.detectable, c, u, f"{c.seeds} x {c.items}"))
    row("seeds for one item's worth",
        lambda c, u, j: f"{seeds(c, u, 100 / c.items)} ({100 / c.items:.1f} pts)")
    row("seeds for 5 points", lambda c, u, j: seeds(c, u, 5.0))
    row("item floor: detectable with any number of seeds",
        lambda c, u, j: points(it.item_floor, c, u, f"{c.items} items"))
    row("items for 5 points at these seeds", items)
    return g
