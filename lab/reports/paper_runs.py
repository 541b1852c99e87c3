"""How many runs a paper's mean over runs can have been: a benchmark of N items scores each run
as a multiple of 100/N, so a mean over n runs is a multiple of 100/(n N). A printed mean (two
decimals) that lies on that grid for every cell fits n runs; one that lies off it for some cell
does not. Cells whose grid is finer than the printing (100/(n N) < 0.02) say nothing and are
left out. The paper's text does not state n; its numbers do (docs/results.md).
"""
from __future__ import annotations

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
