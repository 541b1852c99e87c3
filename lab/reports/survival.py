"""Steps to a training threshold as survival data: a seed that never reaches it within its run
is right-censored at its last step (it would take longer, by an unknown amount), not a number
of steps. Per method the Kaplan-Meier median with its 95 % interval (Brookmeyer and Crowley
1982, from the log-log confidence band of the survival function), and each method against a
reference by the log-rank test; both from scipy (``stats.ecdf``, ``stats.logrank``).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class Median:
    """A Kaplan-Meier median of steps with its 95 % interval; None: not reached (the survival
    function, or its band, never falls to one half within the runs)."""

    median: float | None
    low: float | None
    high: float | None
    events: int  # seeds that reached the threshold
    n: int

    def text(self) -> str:
        def f(x):
            return "not reached" if x is None else f"{x:g}"

        if self.events == 0:
            return f"not reached by any of {self.n} seeds"
        return (f"{f(self.median)} [{f(self.low)}, {f(self.high)}] "
                f"({self.events} of {self.n} seeds reached it)")


def censored(steps: Sequence[int | None], last: Sequence[int]):
    """scipy's ``CensoredData``: a step where a seed reached the threshold, else its last step
    right-censored."""
    from scipy import stats

    return stats.CensoredData(uncensored=[s for s in steps if s is not None],
                              right=[e for s, e in zip(steps, last) if s is None])


def km_median(steps: Sequence[int | None], last: Sequence[int], level: float = 0.95) -> Median:
    """The Kaplan-Meier median of ``steps`` (None: not reached by the seed's ``last`` step)."""
    from scipy import stats

    n, events = len(steps), sum(s is not None for s in steps)
    if events == 0:
        return Median(None, None, None, 0, n)
    sf = stats.ecdf(censored(steps, last)).sf
    times = sf.quantiles
    with warnings.catch_warnings():  # a band at S = 0 or 1 divides by zero; those are NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        band = sf.confidence_interval(level, method="log-log")
        lo_band, hi_band = band.low.evaluate(times), band.high.evaluate(times)
    point = sf.evaluate(times)

    def first(values, midpoint: bool = False) -> float | None:
        """The first step where the curve is at 1/2 or below; ``midpoint``: where it is 1/2
        exactly until the next step, the middle of the two (the usual median of an even
        number of uncensored values, as R's ``survfit`` gives it)."""
        for k, (t, v) in enumerate(zip(times, values)):
            if not math.isnan(v) and v <= 0.5 + 1e-12:
                if midpoint and abs(v - 0.5) <= 1e-12 and k + 1 < len(times):
                    return (float(t) + float(times[k + 1])) / 2
                return float(t)
        return None

    # the interval is where the band holds one half: from the lower band's first step at or
    # below it to the upper band's
    return Median(first(point, midpoint=True), first(lo_band), first(hi_band), events, n)


def logrank_p(a: Sequence[int | None], a_last: Sequence[int], b: Sequence[int | None],
              b_last: Sequence[int]) -> float:
    """The log-rank test's two-sided p of two methods' steps (NaN where neither reached it:
    there is nothing to compare)."""
    from scipy import stats

    if all(s is None for s in [*a, *b]):
        return math.nan
    return float(stats.logrank(censored(a, a_last), censored(b, b_last)).pvalue)


def _statistic(a, a_last, b, b_last) -> float:
    """The log-rank statistic (0 where it is undefined: the two samples cannot differ)."""
    from scipy import stats

    value = float(stats.logrank(censored(a, a_last), censored(b, b_last)).statistic)
    return 0.0 if math.isnan(value) else value


def permutation_p(a: Sequence[int | None], a_last: Sequence[int], b: Sequence[int | None],
                  b_last: Sequence[int], paired: bool = False) -> tuple[float, float]:
    """The exact two-sided p of the log-rank statistic and the smallest p the design allows:
    over every relabelling of the pooled seeds into groups of the two sizes (``paired``: over
    every swap of the two methods' outcomes within a seed, ``a[i]`` and ``b[i]`` being seed
    i's, which share its first rollout). At 3 seeds a method the smallest p is 2/20 = 0.10
    unpaired and 2/8 = 0.25 paired, where the log-rank test's normal approximation can give
    0.025. NaN where neither reached it."""
    from itertools import combinations, product

    if all(s is None for s in [*a, *b]):
        return math.nan, math.nan
    observed = abs(_statistic(a, a_last, b, b_last))
    if paired:
        if len(a) != len(b):
            raise ValueError(f"{len(a)} and {len(b)} seeds: pairing needs the same seeds")
        draws = []
        for flips in product((False, True), repeat=len(a)):
            pairs = [((y, yl), (x, xl)) if f else ((x, xl), (y, yl))
                     for f, x, xl, y, yl in zip(flips, a, a_last, b, b_last)]
            draws.append(abs(_statistic([p[0][0] for p in pairs], [p[0][1] for p in pairs],
                                        [p[1][0] for p in pairs], [p[1][1] for p in pairs])))
    else:
        pooled, n = list(zip([*a, *b], [*a_last, *b_last])), len(a)
        draws = []
        for chosen in combinations(range(len(pooled)), n):
            rest = [i for i in range(len(pooled)) if i not in chosen]
            draws.append(abs(_statistic([pooled[i][0] for i in chosen],
                                        [pooled[i][1] for i in chosen],
                                        [pooled[i][0] for i in rest],
                                        [pooled[i][1] for i in rest])))
    tol = 1e-9 * max(1.0, observed)
    p = sum(d >= observed - tol for d in draws) / len(draws)
    top = max(draws)
    smallest = sum(d >= top - tol for d in draws) / len(draws)
    return p, smallest


LEGEND = ("Steps to the threshold as survival data: a seed that never reaches it is censored "
          "at its last step (it needs more, how many is unknown), not counted as a number of "
          "steps. Median: Kaplan-Meier, with its 95 % interval (Brookmeyer-Crowley, log-log "
          "band; `not reached`: the curve or its band stays above one half within the runs). "
          "p: the log-rank test against the reference, over all seeds (not paired; its normal "
          "approximation is too small at a few seeds); exact: the same statistic's permutation "
          "p over every relabelling of the seeds, and paired by seed (the methods' outcomes "
          "swapped within a seed, whose first rollout they share), each with the smallest p "
          "the design can give.")
