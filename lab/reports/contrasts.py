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
    "larger at that many seeds).")


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


def contrast_grids(grid: Grid, reference: str) -> list[Grid]:
    """For a grid of per-seed cells: every other row against the ``reference`` row over seeds,
    then over seeds and items (where the cells carry per-item scores), then what the design
    can detect. None when the reference row is absent or has no values."""
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
            detect = detectable_grid(g, outcome)
            if detect is not None:
                out.append(detect)
    return out


def detectable_grid(items_grid: Grid, outcome: list[bool]) -> Grid | None:
    """Per outcome column of an items grid: the detectable difference at its seeds and items
    and the seeds one item's worth or 5 points would need (lab.reports.items)."""
    from lab.reports import items as it

    cols = []
    for j in range(len(items_grid.columns)):
        parts = [it.components(cells[j].item_differences) for _, cells in items_grid.rows
                 if outcome[j] and isinstance(cells[j], ContrastCell)
                 and cells[j].item_differences is not None]
        cols.append(it.pooled(parts))
    if not any(cols):
        return None

    def flat(c) -> bool:  # every comparison equal on every item: nothing to size a study by
        return c is None or c.variance_of_mean()[0] <= 1e-24

    def seeds(c, effect):
        if flat(c):
            return "–" if c is None else "no spread"
        n = it.seeds_needed(c, effect)
        return f"> {it.MAX_SEEDS}" if n is None else str(n)

    g = Grid(items_grid.title.split(": paired")[0] + ": what these seeds and items can detect",
             "", list(items_grid.groups), list(items_grid.columns), mark_best=False,
             legend=DETECT_LEGEND)

    def points(d: float, design: str) -> str:
        # a difference of two percentages is at most 100: past it, the number says only that
        # nothing this design could show would be detected
        return f"> 100 ({design})" if d > 100 else f"±{d:.1f} ({design})"

    def row(label: str, text) -> None:  # one cell per column, text(c) where c has spread
        g.rows.append((label, [Cell(note="–" if c is None else "no spread" if flat(c)
                                    else text(c)) for c in cols]))

    def items(c) -> str:
        n = it.items_needed(c, 5.0)
        # None: the seeds' own noise at this many seeds is above 5 points, whatever the items
        return f"never at {c.seeds} seeds" if n is None else f"{n} ({c.seeds} seeds)"

    row("detectable (80 % power) at seeds x items",
        lambda c: points(it.detectable(c), f"{c.seeds} x {c.items}"))
    g.rows.append(("seeds for one item's worth", [
        Cell(note="–" if c is None else f"{seeds(c, 100 / c.items)} ({100 / c.items:.1f} pts)")
        for c in cols]))
    g.rows.append(("seeds for 5 points",
                   [Cell(note="–" if c is None else seeds(c, 5.0)) for c in cols]))
    row("item floor: detectable with any number of seeds",
        lambda c: points(it.item_floor(c), f"{c.items} items"))
    row("items for 5 points at these seeds", items)
    return g
