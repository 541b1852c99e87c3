"""Seeds -> cells: mean, sample standard deviation and n; which cell is best per column; and
the refusal to pool seeds whose stored settings differ."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
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
    differences; the text gives their mean, 95 % interval and probability of improvement
    (lab.reports.uncertainty)."""

    paired: object = None  # uncertainty.Paired; None: nothing to compare (``note`` says why)
    power: bool = False  # show the seeds needed for 80 % power instead

    @staticmethod
    def of(row: Cell, reference: Cell, higher: bool = True, power: bool = False) -> "Cell":
        from lab.reports.uncertainty import paired

        if not row.values or not reference.values:
            return Cell(note="–")
        p = paired(row.values, reference.values, higher)
        if not p.n:
            return Cell(note="no shared seeds")
        footnote = " / ".join(dict.fromkeys(f for f in (row.footnote, reference.footnote) if f))
        return ContrastCell(tuple(zip(p.seeds, p.diffs)), footnote=footnote, paired=p,
                            power=power)

    def text(self, digits: int = 2) -> str:
        from lab.reports import uncertainty

        out = (uncertainty.power_text(self.paired) if self.power
               else uncertainty.text(self.paired, digits))
        return out + (" †" if self.footnote else "")

    def csv_note(self) -> str:
        from lab.reports import uncertainty

        p = self.paired
        low, high = p.interval
        parts = [f"95% interval [{low:.4f}, {high:.4f}]" if not math.isnan(low) else
                 "no interval (one seed)",
                 "decided" if p.decided else "undecided",
                 f"P(improvement) {p.poi:.4f}",
                 f"seeds for 80% power {uncertainty.power_text(p)}"]
        return "; ".join(parts + [x for x in (self.note, self.footnote) if x])


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
    return Cell(tuple(out), "" if out else "–")


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
