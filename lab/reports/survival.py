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


LEGEND = ("Steps to the threshold as survival data: a seed that never reaches it is censored "
          "at its last step (it needs more, how many is unknown), not counted as a number of "
          "steps. Median: Kaplan-Meier, with its 95 % interval (Brookmeyer-Crowley, log-log "
          "band; `not reached`: the curve or its band stays above one half within the runs). "
          "p: the log-rank test against the reference, over all seeds (not paired).")
