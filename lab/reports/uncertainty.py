"""How far a row's seeds are from a reference row's, with the uncertainty that few seeds leave.

For one metric, a row (method) is compared with the reference row (GDPO unless told) on the
seeds both have, seed by seed (same seed = same prompts, same initial sampling):

- the paired difference ``a - ref`` per seed, its mean and a 95 % Student-t interval
  (``scipy.stats.ttest_1samp``'s interval, from ``scipy.special``: importing ``scipy.stats``
  alone takes ~1 s of ``compare``); a difference whose interval covers 0 is *undecided*;
- the probability of improvement, as rliable defines it (Agarwal et al. 2021): over every pair
  of a row's seed and a reference seed, P(row better) + 1/2 P(tie), i.e. the Mann-Whitney U
  statistic over n * m (``scipy.stats.mannwhitneyu``'s U, counted directly); "better" follows the metric's
  direction;
- how many seeds a paired t-test (two-sided, alpha 0.05) would need to resolve the observed
  mean difference at 80 % power given the observed spread of the differences (noncentral t,
  ``scipy.special.nctdtr``, as ``scipy.stats.nct``).

rliable itself is not used: its release pins an old ``arch`` and ships as a source archive
only; its per-task probability of improvement is the same U / (n m) computed here.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Sequence

LEVEL = 0.95  # the intervals' confidence level
ALPHA = 0.05  # the power calculation's two-sided test level
POWER = 0.80
MAX_SEEDS = 1000  # beyond this the power answer is "more than 1000"


@dataclass(frozen=True)
class Paired:
    """One row against the reference row on one metric (shared seeds only)."""

    seeds: tuple[int, ...]
    diffs: tuple[float, ...]  # row - reference, per shared seed
    poi: float  # probability of improvement (NaN without shared seeds)
    higher: bool  # the metric's direction: True when larger values are better

    @property
    def n(self) -> int:
        return len(self.diffs)

    @property
    def mean(self) -> float:
        return sum(self.diffs) / self.n if self.diffs else math.nan

    @property
    def sd(self) -> float:
        if self.n < 2:
            return math.nan
        m = self.mean
        return math.sqrt(sum((d - m) ** 2 for d in self.diffs) / (self.n - 1))

    @property
    def interval(self) -> tuple[float, float]:
        """The 95 % t-interval of the mean difference; NaNs below two seeds."""
        return t_interval(self.diffs)

    @property
    def spread(self) -> bool:
        """Whether the differences vary over seeds (without, the t-interval has zero width:
        it measures nothing, whatever the mean)."""
        return self.n >= 2 and max(self.diffs) - min(self.diffs) > 1e-12

    @property
    def decided(self) -> bool:
        """True when the interval excludes 0 (two seeds at least, with spread: equal
        differences on every seed leave a zero-width interval that decides nothing)."""
        low, high = self.interval
        return self.spread and not math.isnan(low) and (low > 0 or high < 0)

    @property
    def better(self) -> bool:
        """Decided, in the metric's good direction."""
        return self.decided and (self.mean > 0) == self.higher

    @property
    def p(self) -> float:
        """The paired t-test's two-sided p-value (NaN below two seeds or without spread:
        there is no test)."""
        if not self.spread:
            return math.nan
        from scipy.special import stdtr

        t = abs(self.mean) / (self.sd / math.sqrt(self.n))
        return 2 * float(stdtr(self.n - 1, -t))

    @property
    def seeds_for_power(self) -> int | None:
        """Seeds resolving the observed mean difference at 80 % power (None: never, or no
        spread to size it by)."""
        return seeds_for_power(self.mean, self.sd) if self.spread else None


def t_interval(diffs: Sequence[float], level: float = LEVEL) -> tuple[float, float]:
    """Student-t interval of the mean of ``diffs``; (mean, mean) when they are all equal,
    (NaN, NaN) below two values."""
    if len(diffs) < 2:
        return math.nan, math.nan
    mean = sum(diffs) / len(diffs)
    if max(diffs) - min(diffs) <= 1e-12:  # no spread: scipy warns and returns the same
        return mean, mean
    from scipy.special import stdtrit  # scipy.stats' t quantile; special alone loads ~3x faster

    n = len(diffs)
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
    half = float(stdtrit(n - 1, 0.5 + level / 2)) * sd / math.sqrt(n)
    return mean - half, mean + half


def probability_of_improvement(x: Sequence[float], y: Sequence[float],
                               higher: bool = True) -> float:
    """P(X better than Y) + 1/2 P(X = Y) over all pairs of ``x`` and ``y`` values."""
    if not x or not y:
        return math.nan
    a, b = (list(x), list(y)) if higher else (list(y), list(x))
    # the Mann-Whitney U statistic of a over b: pairs won, ties counted half
    u = sum((p > q) + 0.5 * (p == q) for p in a for q in b)
    return float(u) / (len(x) * len(y))


def power(n: int, mean: float, sd: float, alpha: float = ALPHA) -> float:
    """Power of the two-sided paired t-test with ``n`` seeds at this mean and spread."""
    from scipy.special import nctdtr, stdtrit  # scipy.stats' t and nct, without its import

    df = n - 1
    crit = float(stdtrit(df, 1 - alpha / 2))
    nc = mean / sd * math.sqrt(n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        upper = float(1 - nctdtr(df, abs(nc), crit))
        lower = float(nctdtr(df, abs(nc), -crit))
    # far in its tail nctdtr gives NaN where the probability is ~0: one NaN tail is dropped
    out = (upper if math.isnan(lower) else lower if math.isnan(upper) else upper + lower) \
        if not (math.isnan(upper) and math.isnan(lower)) else math.nan
    if math.isnan(out):  # scipy's noncentral t gives NaN far in the tail: power is ~1 there
        return 1.0 if abs(nc) > crit else 0.0
    return out


def seeds_for_power(mean: float, sd: float, target: float = POWER, alpha: float = ALPHA,
                    max_seeds: int = MAX_SEEDS) -> int | None:
    """The fewest seeds (>= 2) at which a paired t-test resolves ``mean`` at ``target`` power,
    taking ``sd`` as the spread of the per-seed differences; None when ``mean`` is 0 or more
    than ``max_seeds`` would be needed; 2 when there was no spread."""
    if math.isnan(mean) or math.isnan(sd) or abs(mean) <= 1e-12:
        return None
    if sd <= 1e-12:
        return 2
    lo, hi = 2, max_seeds
    if power(hi, mean, sd, alpha) < target:
        return None
    while lo < hi:  # power grows with n: bisect for the first n that reaches the target
        mid = (lo + hi) // 2
        if power(mid, mean, sd, alpha) >= target:
            hi = mid
        else:
            lo = mid + 1
    return lo


def paired(row: Sequence[tuple[int, float]], reference: Sequence[tuple[int, float]],
           higher: bool = True) -> Paired:
    """``row`` against ``reference``, both as (seed, value) pairs, on their shared seeds."""
    a, b = dict(row), dict(reference)
    seeds = tuple(sorted(set(a) & set(b)))
    return Paired(seeds, tuple(a[s] - b[s] for s in seeds),
                  probability_of_improvement([a[s] for s in seeds], [b[s] for s in seeds],
                                             higher), higher)


def fmt_signed(x: float, digits: int = 2) -> str:
    return "–" if math.isnan(x) else f"{x:+.{digits}f}".replace("-", "−")


def text(p: Paired, digits: int = 2) -> str:
    """``+1.23 [−0.40, +2.86]? P=0.67``: mean difference, 95 % interval (``?``: covers 0,
    undecided), probability of improvement; one seed gives no interval."""
    if not p.n:
        return "no shared seeds"
    if all(d == 0 for d in p.diffs):  # nothing to estimate: say so rather than [+0, +0]
        return f"equal on {p.n} seed{'s' * (p.n > 1)}"
    low, high = p.interval
    if math.isnan(low):
        return f"{fmt_signed(p.mean, digits)} (n=1) P={p.poi:.2f}"
    if not p.spread:
        return (f"{fmt_signed(p.mean, digits)} on all {p.n} seeds (no spread: undecided) "
                f"P={p.poi:.2f}")
    mark = "" if p.decided else "?"
    return (f"{fmt_signed(p.mean, digits)} [{fmt_signed(low, digits)}, "
            f"{fmt_signed(high, digits)}]{mark} P={p.poi:.2f}")


def power_text(p: Paired) -> str:
    if p.n < 2:
        return "–"
    if not p.spread:
        return "never" if abs(p.mean) <= 1e-12 else "no spread"
    n = p.seeds_for_power
    if n is None:
        return "never" if abs(p.mean) <= 1e-12 else f">{MAX_SEEDS}"
    return str(n)


def pooled_sd(pairs: Sequence[Paired]) -> tuple[float, int]:
    """The spread of the per-seed differences pooled over comparisons (each variance weighted
    by its degrees of freedom, n - 1) and the pooled degrees of freedom; (NaN, 0) when no
    comparison has two seeds."""
    parts = [(p.sd ** 2, p.n - 1) for p in pairs if p.n >= 2]
    df = sum(d for _, d in parts)
    return (math.sqrt(sum(v * d for v, d in parts) / df), df) if df else (math.nan, 0)


def detectable(sd: float, n: int, alpha: float = ALPHA, target: float = POWER) -> float:
    """The smallest true mean difference a two-sided paired t-test on ``n`` seeds detects with
    ``target`` power when the differences spread by ``sd``: (t_{1-alpha/2} + t_{power}) sd /
    sqrt(n) at n - 1 df (the central-t approximation of the noncentral power)."""
    from scipy.special import stdtrit

    df = n - 1
    return (float(stdtrit(df, 1 - alpha / 2)) + float(stdtrit(df, target))) * sd / math.sqrt(n)


def seeds_for(effect: float, sd: float, max_seeds: int = MAX_SEEDS) -> int | None:
    """The fewest seeds (>= 2) at which :func:`detectable` is at most ``effect``; None beyond
    ``max_seeds``."""
    if detectable(sd, max_seeds) > abs(effect):
        return None
    lo, hi = 2, max_seeds
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if detectable(sd, mid) <= abs(effect) else (mid + 1, hi)
    return lo


def detectable_text(pairs: Sequence[Paired], effect: float, unit: str, digits: int = 2) -> str:
    """What the seeds can detect, not what they happened to show: the minimum detectable
    difference at the comparisons' seeds (80 % power, alpha 0.05, spread pooled over the
    comparisons) and the seeds a difference of ``effect`` would need."""
    sd, df = pooled_sd(pairs)
    n = max((p.n for p in pairs), default=0)
    if not df:
        return "detectable difference: – (fewer than two shared seeds)"
    if sd <= 1e-12:
        return ("detectable difference: no spread (the same differences on every seed: "
                "nothing to size a study by; undecided)")
    need = seeds_for(effect, sd)
    return (f"detectable at {n} seeds (80 % power, α = 0.05, spread pooled over "
            f"{len(pairs)} comparison{'s' * (len(pairs) > 1)}, {df} df): "
            f"±{detectable(sd, n):.{digits}f} {unit}; seeds for ±{effect:g} {unit}: "
            f"{need if need is not None else f'>{MAX_SEEDS}'}")


LEGEND = ("Against the reference row, per shared seed: mean paired difference, its 95 % "
          "t-interval (`?`: the interval covers 0, undecided at these seeds) and P, the "
          "probability of improvement (rliable's: P(row better than reference) + ½ P(tie) over "
          "seed pairs, in the metric's direction).")
POWER_LEGEND = ("Seeds a paired t-test (two-sided, α = 0.05) would need to resolve each observed "
                "mean difference at 80 % power, at the observed spread of the differences "
                "(`never`: the observed difference is 0; `no spread`: the same difference on "
                "every seed, nothing to size it by; `–`: fewer than two shared seeds).")
