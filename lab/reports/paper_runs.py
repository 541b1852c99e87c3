"""How many runs a paper's mean over runs can have been: a benchmark of N items scores each run
as a multiple of 100/N, so a mean over n runs is a multiple of 100/(n N). A printed mean (two
decimals) that lies on that grid for every cell fits n runs; one that lies off it for some cell
does not. Cells whose grid is finer than the printing (100/(n N) < 0.02) say nothing and are
left out. The paper's text does not state n; its numbers do (docs/results.md).
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Iterable, Sequence

PRINTED = 0.005  # half the last printed digit of a two-decimal mean


def on_grid(mean: float, runs: int, items: int) -> bool:
    """Whether ``mean`` (percent, printed to two decimals) is a mean of ``runs`` scores that
    are each a whole number of ``items`` items."""
    correct = mean * runs * items / 100  # the items answered right, summed over the runs
    return abs(correct - round(correct)) <= runs * items / 100 * PRINTED + 1e-9


def informative(runs: int, items: int) -> bool:
    """Whether the grid of ``runs`` x ``items`` is coarser than the two-decimal printing."""
    return 100 / (runs * items) >= 0.02


def fitting_runs(cells: Iterable[tuple[float, int]], candidates: Sequence[int] = range(2, 11)
                 ) -> list[int]:
    """The run counts among ``candidates`` on whose grid every informative cell (mean, items)
    lies, with at least one informative cell."""
    cells = list(cells)
    out = []
    for n in candidates:
        seen = [on_grid(m, n, k) for m, k in cells if informative(n, k)]
        if seen and all(seen):
            out.append(n)
    return out


def run_items(task: str, metric: str) -> int | None:
    """N for ``metric`` of ``task`` on its full benchmark: one run's score is a multiple of
    100/N. For a single category it is the category's item count; for an aggregate it is the
    denominator its weights give (BFCL's Non-Live Overall, the unweighted mean of four groups
    whose Simple averages three categories of 400, 100 and 50 items, moves by 100/4800 when
    one Python item flips). Read from the task's own data and per-item weights
    (``Task.item_scores`` on every item scored wrong: the weights depend on which items were
    evaluated, not on the responses), so the sizes have one source, the benchmark's. None
    where the task has no per-item weights or its data needs a data folder (its benchmark
    cannot be read here)."""
    return _run_items(task, metric)


@functools.lru_cache(maxsize=None)
def _run_items(task: str, metric: str) -> int | None:
    from lab.reports.items import benchmark_weights

    pairs = benchmark_weights(task, metric)
    if not pairs:
        return None
    # an item's smallest move: its weight where it is right or wrong; a whole-number weight
    # counts that many parts each right or wrong (IFEval's instructions), so it moves by 1
    units = [Fraction(1) if float(w).is_integer() else Fraction(w).limit_denominator(10**6)
             for w in pairs]
    step = functools.reduce(_gcd, units) / Fraction(sum(pairs)).limit_denominator(10**6)
    return int(1 / step) if (1 / step).denominator == 1 else None


def _gcd(a: Fraction, b: Fraction) -> Fraction:
    """The largest fraction both are whole multiples of."""
    return Fraction(math.gcd(a.numerator * b.denominator, b.numerator * a.denominator),
                    a.denominator * b.denominator)
