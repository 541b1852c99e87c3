"""Seeds -> cells: mean, sample standard deviation and n; which cell is best per column; and
the refusal to pool seeds whose stored settings differ."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample (Bessel-corrected) standard deviation; std is NaN for one value."""
    n = len(values)
    if n == 0:
        raise ValueError("no values")
    mean = sum(values) / n
    if n == 1:
        return mean, float("nan")
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(var)


def cell(values: Sequence[float], digits: int = 2) -> str:
    mean, std = mean_std(values)
    if math.isnan(std):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


@dataclass(frozen=True)
class Cell:
    """One table cell: the per-seed values (seed -> value), or why there are none."""

    values: tuple[tuple[int, float], ...] = ()
    note: str = ""  # "needs DATA_DIR/...", "not run", ...
    footnote: str = ""  # why its values need a caveat (seeds of several code versions)
    # per seed, its per-item scores in points: (seed, item ids, contributions), whose mean is
    # the seed's value (lab.reports.items); empty where the task has none
    items: tuple = field(default=(), repr=False, compare=False)
    # per seed, the kind of machine that made it (harness.provenance.machine_of_result; None:
    # not recorded): a comparison whose paired seeds were made on two kinds is footnoted
    machines: tuple = field(default=(), repr=False, compare=False)

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        return mean_std([v for _, v in self.values])[0] if self.values else float("nan")

    @property
    def std(self) -> float:
        return mean_std([v for _, v in self.values])[1] if self.values else float("nan")

    def text(self, digits: int = 2) -> str:
        if not self.values:
            return self.note or "–"
        return cell([v for _, v in self.values], digits) + (" †" if self.footnote else "")

    def csv_note(self) -> str:
        return "; ".join(x for x in (self.note, self.footnote) if x)


@dataclass(frozen=True)
class ContrastCell(Cell):
    """A row against the reference row on one metric: ``values`` are the per-seed paired
    differences. ``kind`` "seeds": their mean, 95 % t-interval over seeds (the items held
    fixed), probability of improvement and p; "items": the interval over seeds and items
    (lab.reports.items); ``holm``: the p-value after Holm's adjustment over the table's
    outcome comparisons (set by lab.reports.contrasts)."""

    paired: object = None  # uncertainty.Paired; None: nothing to compare (``note`` says why)
    kind: str = "seeds"
    item: object = None  # items.ItemInterval over seeds and items; None: no per-item scores
    holm: float = math.nan
    item_differences: object = field(default=None, repr=False, compare=False)  # d [S, I]

    @staticmethod
    def of(row: Cell, reference: Cell, higher: bool = True, kind: str = "seeds") -> "Cell":
        from lab.reports import items
        from lab.reports.uncertainty import paired

        if not row.values or not reference.values:
            return Cell(note="–")
        p = paired(row.values, reference.values, higher)
        if not p.n:
            return Cell(note="no shared seeds")
        theirs = (f"the reference: {reference.footnote}"
                  if reference.footnote and reference.footnote != row.footnote else "")
        footnote = " / ".join(f for f in (row.footnote, theirs,
                                          across_machines(row, reference, p.seeds)) if f)
        d = items.differences(row.items, reference.items) if row.items and reference.items \
            else None
        item = items.interval(d) if d is not None and len(d[0]) >= 2 else None
        if kind == "items" and item is None:
            return Cell(note="no per-item scores" if not (row.items and reference.items)
                        else "other items")
        return ContrastCell(tuple(zip(p.seeds, p.diffs)), footnote=footnote, paired=p,
                            kind=kind, item=item, item_differences=d if item else None)

    @property
    def p(self) -> float:
        """The two-sided p-value of this cell's test (NaN: none)."""
        return self.item.p if self.kind == "items" else self.paired.p

    def text(self, digits: int = 2) -> str:
        from lab.reports import uncertainty

        if self.kind == "items" and all(x == 0 for row in self.item_differences for x in row):
            i = self.item
            out = f"equal on {i.seeds} seed{'s' * (i.seeds > 1)} x {i.items} items"
        elif self.kind == "items" and not self.item.spread:
            i = self.item
            out = (f"{uncertainty.fmt_signed(i.mean, digits)} on all {i.seeds} seed"
                   f"{'s' * (i.seeds > 1)} x {i.items} items (no spread: undecided)")
        elif self.kind == "items":
            i = self.item
            out = (f"{uncertainty.fmt_signed(i.mean, digits)} [{uncertainty.fmt_signed(i.low, digits)}, "
                   f"{uncertainty.fmt_signed(i.high, digits)}]{'' if i.decided else '?'}")
        else:
            out = uncertainty.text(self.paired, digits)
        if not math.isnan(self.p):
            out += f" p={self.p:.3f}" + (f" (Holm {self.holm:.3f})" if not math.isnan(self.holm)
                                         else "")
        return out + (" †" if self.footnote else "")

    def csv_note(self) -> str:
        p = self.paired
        low, high = (self.item.low, self.item.high) if self.kind == "items" else p.interval
        parts = [f"95% interval [{low:.4f}, {high:.4f}]" if not math.isnan(low) else
                 "no interval (no spread)" if self.kind == "items" else
                 "no interval (one seed)",
                 "decided" if (self.item.decided if self.kind == "items" else p.decided)
                 else "undecided",
                 f"P(improvement) {p.poi:.4f}", f"p {self.p:.4f}", f"Holm p {self.holm:.4f}"]
        if self.kind == "items":
            parts.append(f"{self.item.seeds} seeds x {self.item.items} items, "
                         f"Satterthwaite df {self.item.df:.1f}")
        return "; ".join(parts + [x for x in (self.note, self.footnote) if x])


def across_machines(row: Cell, reference: Cell, seeds: Sequence[int]) -> str:
    """A footnote when some of the paired ``seeds`` were made on another kind of machine in the
    row than in the reference ('' when every pair shares one, or a side did not record it):
    such a pair differs by machine as well as by method."""
    mine, theirs = dict(row.machines), dict(reference.machines)
    split = [s for s in seeds if mine.get(s) and theirs.get(s) and mine[s] != theirs[s]]
    if not split:
        return ""
    pairs = dict.fromkeys(f"{mine[s]} against {theirs[s]}" for s in split)
    return (f"seed{'s' * (len(split) > 1)} {', '.join(map(str, split))} of this row and the "
            f"reference were made on different machines ({'; '.join(pairs)}): each such pair "
            "differs by machine as well as by method")


def best_rows(cells: Sequence[Cell], higher: bool = True) -> set[int]:
    """Indices of the cells with the best mean (ties all marked; ``higher``: the metric's
    direction); none when fewer than two cells have values or all of them are equal."""
    have = [(i, c.mean) for i, c in enumerate(cells) if c.values]
    if len(have) < 2 or max(m for _, m in have) - min(m for _, m in have) <= 1e-9:
        return set()  # nothing to tell apart: no cell is marked
    top = max(m for _, m in have) if higher else min(m for _, m in have)
    return {i for i, m in have if abs(m - top) <= 1e-9}


def mean_of_columns(row: Sequence[Cell]) -> Cell:
    """Per seed, the mean of the row's cells that have that seed (the paper's "Avg.")."""
    seeds = sorted({s for c in row for s, _ in c.values})
    out = []
    for s in seeds:
        vals = [dict(c.values)[s] for c in row if s in dict(c.values)]
        if len(vals) == sum(1 for c in row if c.values):
            out.append((s, sum(vals) / len(vals)))
    machines = tuple((s, " and ".join(dict.fromkeys(
        k for c in row for t, k in c.machines if t == s and k)) or None) for s, _ in out)
    return Cell(tuple(out), "" if out else "–", machines=machines)


def settings_differ(paths: Sequence[Path]) -> dict[str, list]:
    """The identity fields whose stored values differ among these result files (field ->
    values, in the order of ``paths``); empty when they may be pooled."""
    from harness.config import RunConfig
    from harness.results import identity, load_result

    ids = [identity(RunConfig.from_dict(load_result(p)["config"])) for p in paths]
    keys = sorted(set().union(*ids)) if ids else []
    return {k: [i.get(k) for i in ids] for k in keys
            if any(json.dumps(i.get(k)) != json.dumps(ids[0].get(k)) for i in ids)}


def check_poolable(paths: Sequence[Path]) -> None:
    diff = settings_differ(paths)
    if diff:
        lines = "; ".join(f"{k}: {v}" for k, v in diff.items())
        raise ValueError(f"these seeds were made with different settings and are not pooled "
                         f"into one cell ({', '.join(str(p) for p in paths)}): {lines}")


def machine_note(seeds: Sequence[int], results: Sequence[dict]) -> str:
    """A footnote for a cell whose seeds were made on several kinds of machine, or on kinds
    recorded for some and not for others ('' when one kind made them all, or none recorded
    any: the table's machine line says so)."""
    from harness.provenance import machine_of_result

    kinds = [machine_of_result(r) for r in results]
    if len(set(kinds)) <= 1:
        return ""
    by_kind: dict[str, list[str]] = {}
    for s, k in zip(seeds, kinds):
        by_kind.setdefault(k or "not recorded", []).append(str(s))
    return "seeds made on several kinds of machine: " + "; ".join(
        f"{', '.join(ss)} on {k}" for k, ss in by_kind.items())


MIXED_HINT = ("rerun the stale seeds (reproduce --rerun-stale, or run --force) or pool them "
              "anyway with --allow-mixed-code (the cell then carries a footnote with the commits)")


def check_same_code(paths: Sequence[Path], results: Sequence[dict],
                    allow_mixed: bool = False) -> str:
    """'' when these stored seeds were made by the same code (one fingerprint); otherwise a
    ValueError naming each file's commit and fingerprint and the diff between the commits, or
    with ``allow_mixed`` the footnote for the cell that pools them."""
    from harness import provenance

    if len({provenance.of_result(r)["fingerprint"] for r in results}) <= 1:
        return ""
    if allow_mixed:  # the footnote only: no git calls for a diff nobody reads
        return provenance.commits_note(results)
    raise ValueError("these seeds were made by different code and are not pooled into one "
                     f"cell:\n{provenance.mixed_code(paths, results)}\n{MIXED_HINT}")
