"""The paper's own gaps: how far apart its printed means can be said to be, from what it prints.

The paper prints, per cell, a mean and a sample std over n runs ("80.05 ±1.00"), and no
interval. From (mean, sd, n) of a row and of the reference row in one column:

- Welch's difference of the means and its 95 % t-interval, at the Welch-Satterthwaite degrees
  of freedom: the interval for two independent sets of runs;
- the paired interval, had the runs been paired (seed k of one row with seed k of the other):
  Var(difference) = (sd1^2 + sd2^2 - 2 rho sd1 sd2) / n at n - 1 degrees of freedom. The paper
  does not print the correlation rho of the two rows' runs, so every rho in [-1, 1] is
  possible: its interval is narrowest at rho = 1 (the runs move together; no spread at all
  when the two stds are equal) and widest at rho = -1;
- the item floor: one run's score on a benchmark of N items (lab.reports.paper_runs.run_items)
  is a multiple of 100/N, so two means over n runs differ by 0 or by at least 100/(n N);
- whether each mean lies on that grid of n runs (lab.reports.paper_runs.on_grid), where the
  grid is coarser than the printing: a mean off it is not a mean of n runs of the benchmark
  as loaded here.

Pure arithmetic on the printed numbers: no file, no registry. The verdict is Welch's, the one
interval that needs no unprinted number: "decided" when it excludes 0, else "undecided".
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from lab.reports.paper_runs import informative, on_grid

LEVEL = 0.95


@dataclass(frozen=True)
class Printed:
    """One cell as the paper prints it: mean and sample std (percent) over ``n`` runs."""

    mean: float
    sd: float
    n: int


def t_quantile(df: float, level: float = LEVEL) -> float:
    """The two-sided ``level`` quantile of Student's t at ``df`` (``scipy.stats.t.ppf``'s
    value, from ``scipy.special``: importing ``scipy.stats`` alone takes about a second of
    every render)."""
    from scipy.special import stdtrit

    return float(stdtrit(df, (1 + level) / 2))


def welch(row: Printed, ref: Printed, level: float = LEVEL
          ) -> tuple[float, tuple[float, float] | None, float]:
    """(row - ref, its Welch ``level`` interval, Welch-Satterthwaite df); the interval is None
    when both stds are 0 (no spread: nothing to size it by)."""
    d = row.mean - ref.mean
    a, b = row.sd ** 2 / row.n, ref.sd ** 2 / ref.n
    if a + b == 0:
        return d, None, math.nan
    df = (a + b) ** 2 / (a ** 2 / (row.n - 1) + b ** 2 / (ref.n - 1))
    half = t_quantile(df, level) * math.sqrt(a + b)
    return d, (d - half, d + half), df


def paired(row: Printed, ref: Printed, rho: float, level: float = LEVEL
           ) -> tuple[float, float] | None:
    """The paired ``level`` interval of row - ref had their n runs been paired with
    correlation ``rho``; None at no spread (rho = 1 and equal stds: every paired difference
    would be the same)."""
    if row.n != ref.n:
        raise ValueError(f"paired runs need one n; got {row.n} and {ref.n}")
    var = (row.sd ** 2 + ref.sd ** 2 - 2 * rho * row.sd * ref.sd) / row.n
    if var <= 1e-12 * max(row.sd, ref.sd, 1.0) ** 2:  # rounding of an exact 0
        return None
    d = row.mean - ref.mean
    half = t_quantile(row.n - 1, level) * math.sqrt(var)
    return d - half, d + half


def floor(n: int, items: int | None) -> float | None:
    """The smallest nonzero difference of two means over ``n`` runs of ``items`` items each:
    100/(n items); None without the item count."""
    return None if not items else 100 / (n * items)


def off_grid(cell: Printed, items: int | None) -> bool:
    """Whether the cell's mean lies off the item grid of its n runs, where that grid is coarser
    than the two printed decimals (finer grids say nothing)."""
    return bool(items) and informative(cell.n, items) and not on_grid(cell.mean, cell.n, items)


@dataclass(frozen=True)
class Gap:
    """A paper row against the reference row in one column, from their printed cells."""

    difference: float
    welch: tuple[float, float] | None  # None: no spread
    df: float  # Welch-Satterthwaite
    narrowest: tuple[float, float] | None  # paired at rho = 1; None: no spread
    widest: tuple[float, float] | None  # paired at rho = -1; None: no spread
    floor: float | None  # 100 / (n N); None: the column's N is not known here
    off_grid: tuple[str, ...] = ()  # labels of the cells whose mean is off the n-run grid
    n: int = 0

    @property
    def verdict(self) -> str:
        if self.welch is None or self.welch[0] <= 0 <= self.welch[1]:
            return "undecided"
        return "decided"

    def text(self) -> str:
        """``+0.75 [-1.36, +2.86] undecided; paired [-0.11, +1.61]..[-2.59, +4.09]; floor
        0.00417``, then any grid flag."""
        parts = [f"{self.difference:+.2f} {span(self.welch)} {self.verdict}",
                 f"paired {span(self.narrowest)}..{span(self.widest)}"]
        if self.floor is not None:
            parts.append(f"floor {self.floor:.3g}")
        if self.off_grid:
            parts.append(f"{' and '.join(self.off_grid)} mean{'s' * (len(self.off_grid) > 1)} "
                         f"not on the {self.n}-run item grid")
        return "; ".join(parts)


def span(interval: tuple[float, float] | None) -> str:
    return "no spread" if interval is None else f"[{interval[0]:+.2f}, {interval[1]:+.2f}]"


def gap(row: Printed, ref: Printed, items: int | None = None,
        labels: tuple[str, str] = ("row", "reference"), level: float = LEVEL) -> Gap:
    """``row`` against ``ref`` (both over the same n runs) on a column of ``items`` items (None:
    unknown here); ``labels`` name the two in the grid flag."""
    d, interval, df = welch(row, ref, level)
    flags = tuple(label for label, cell in zip(labels, (row, ref)) if off_grid(cell, items))
    return Gap(d, interval, df, paired(row, ref, 1.0, level), paired(row, ref, -1.0, level),
               floor(row.n, items), flags, row.n)


LEGEND = (
    "The paper's printed mean ± std of each row against the reference row, per column, at the "
    "n runs each cell averages (the spec's paper_n; the paper does not print it): the "
    "difference of the means, its Welch 95 % t-interval (Welch-Satterthwaite degrees of "
    "freedom; `decided` where it excludes 0, else `undecided`). `paired [a, b]..[c, d]`: "
    "the 95 % interval had the rows' runs been paired, which the paper does not say, over "
    "every correlation rho of the paired runs: [a, b] at rho = 1, the narrowest (`no "
    "spread`: equal stds, so every paired difference would be the same), [c, d] at rho = -1, "
    "the widest, at n - 1 degrees of freedom; a verdict that only the narrow end would "
    "decide rests on a pairing nobody printed. `floor`: one run's score on the column's "
    "N items is a multiple of 100/N (N of the benchmark as this repository loads it; an "
    "aggregate's N is the denominator of its weights), so two n-run means differ by 0 or by "
    "at least 100/(n N) (no floor: the benchmark needs --data-dir, or the column is derived). "
    "`mean not on the n-run item grid`: that row's printed mean is not a mean of n such "
    "scores (checked where the grid is coarser than the two printed decimals). Rows printed "
    "without a std are left out; `–`: a cell the paper does not print.")
