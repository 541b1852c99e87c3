"""Comparisons that count the evaluation items as a sample too, not only the seeds.

A table's benchmark cells are scores on a fixed subset of items (20 at smoke scale), and the
seed-only interval (``lab.reports.uncertainty``) is conditional on that subset: its own
sampling error (5-10 points at 20 items) is outside it. Here a comparison of a row with the
reference row reads the per-item scores of both (``Task.item_scores``, from each seed's
``predictions.jsonl``) and models the paired differences ``d[s, i]`` (seed s, item i; the same
items for both rows) as a crossed design with random seeds and random items:

    d[s, i] = mu + a[s] + b[i] + e[s, i],   Var(mean d) = s_a^2 / S + s_b^2 / I + s_e^2 / (S I)

with the variance components from the two-way ANOVA's mean squares (each truncated at 0) and
Satterthwaite's degrees of freedom for the combination of mean squares (Clark 1973, "The
language-as-fixed-effect fallacy", for items as a random factor; Satterthwaite 1946). At one
shared seed it is the paired t over items (conditional on that seed).

The same components, pooled over a column's comparisons, give the minimum detectable
difference at the table's seeds and items and the seeds a stated effect would need.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

LEVEL = 0.95
ALPHA = 0.05
POWER = 0.80
MAX_SEEDS = 1000
MAX_ITEMS = 100_000
# Two mean squares closer than this, relative to the larger, are equal: a variance component
# made of their difference is 0, not whatever sign rounding left. (When one item differs on one
# seed, the commonest pattern here, the three mean squares are exactly equal and differences of
# 1e-13 used to decide which components were truncated, and with them the degrees of freedom.)
RTOL = 1e-9


def excess(a: float, b: float) -> float:
    """``a - b`` where it is positive beyond rounding (``RTOL``), else 0."""
    return a - b if a - b > RTOL * max(abs(a), abs(b)) else 0.0


@dataclass(frozen=True)
class Components:
    """The two-way ANOVA of paired differences ``d [S, I]``: mean squares and their degrees
    of freedom (``ms_seed``/``df_seed`` are 0 at one seed)."""

    mean: float
    seeds: int
    items: int
    ms_seed: float
    ms_item: float
    ms_res: float

    @property
    def df_seed(self) -> int:
        return self.seeds - 1

    @property
    def df_item(self) -> int:
        return self.items - 1

    @property
    def df_res(self) -> int:
        return (self.seeds - 1) * (self.items - 1)

    def variances(self) -> tuple[float, float, float]:
        """(seed, item, residual) variance components, each at least 0; at one seed the item
        component holds the residual (they cannot be told apart)."""
        if self.seeds < 2:
            return 0.0, self.ms_item, 0.0
        return (excess(self.ms_seed, self.ms_res) / self.items,
                excess(self.ms_item, self.ms_res) / self.seeds, self.ms_res)

    def variance_of_mean(self, seeds: int | None = None, items: int | None = None
                         ) -> tuple[float, float]:
        """(Var of the mean difference, Satterthwaite df) for a study of ``seeds`` x ``items``
        (default: this one's)."""
        s, i = seeds or self.seeds, items or self.items
        vs, vi, ve = self.variances()
        var = vs / s + vi / i + ve / (s * i)
        if self.seeds < 2:
            return var, float(self.df_item)
        # var = c_seed MS_seed + c_item MS_item + c_res MS_res, the truncations applied
        c_seed = 1.0 / (self.items * s) if vs > 0 else 0.0
        c_item = 1.0 / (self.seeds * i) if vi > 0 else 0.0
        c_res = 1.0 / (s * i) - c_seed - c_item
        parts = [(c_seed * self.ms_seed, self.df_seed), (c_item * self.ms_item, self.df_item),
                 (c_res * self.ms_res, self.df_res)]
        denom = sum(x * x / df for x, df in parts if df > 0 and x != 0)
        df = var * var / denom if denom > 0 else math.inf
        return var, df


def components(d: Sequence[Sequence[float]]) -> Components:
    """The mean squares of ``d [S, I]`` (seeds x items; S >= 1, I >= 2)."""
    import numpy as np

    x = np.asarray(d, dtype=float)
    s, i = x.shape
    grand = float(x.mean())
    if s < 2:
        return Components(grand, 1, i, 0.0, float(x[0].var(ddof=1)) if i > 1 else 0.0, 0.0)
    by_seed, by_item = x.mean(axis=1), x.mean(axis=0)
    ms_seed = i * float(((by_seed - grand) ** 2).sum()) / (s - 1)
    ms_item = s * float(((by_item - grand) ** 2).sum()) / (i - 1)
    resid = x - by_seed[:, None] - by_item[None, :] + grand
    ms_res = float((resid ** 2).sum()) / ((s - 1) * (i - 1))
    return Components(grand, s, i, ms_seed, ms_item, ms_res)


@dataclass(frozen=True)
class ItemInterval:
    """A mean paired difference with its interval over seeds and items; without spread (every
    difference equal) the interval is NaN: undecided, like the seed-only one."""

    mean: float
    low: float
    high: float
    df: float
    p: float  # two-sided, of the mean difference being 0 (NaN: no variance to test by)
    seeds: int
    items: int

    @property
    def spread(self) -> bool:
        """False when every difference was the same: no variance to make an interval from."""
        return not math.isnan(self.low)

    @property
    def decided(self) -> bool:
        return self.spread and (self.low > 0 or self.high < 0)


def interval(d: Sequence[Sequence[float]], level: float = LEVEL) -> ItemInterval:
    """The mean of ``d [S, I]`` with its t-interval at ``level`` (Satterthwaite df)."""
    from scipy.special import stdtr, stdtrit

    c = components(d)
    var, df = c.variance_of_mean()
    if var <= 1e-24 or math.isnan(var):  # every difference equal (a 0 % row against 100 %)
        return ItemInterval(c.mean, math.nan, math.nan, df, math.nan, c.seeds, c.items)
    se = math.sqrt(var)
    q = float(stdtrit(df, 0.5 + level / 2)) if math.isfinite(df) else 1.959963984540054
    t = abs(c.mean) / se
    p = 2 * float(stdtr(df, -t)) if math.isfinite(df) else math.erfc(t / math.sqrt(2))
    return ItemInterval(c.mean, c.mean - q * se, c.mean + q * se, df, p, c.seeds, c.items)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of a family of p-values (Holm 1979): the k-th smallest
    becomes max over j <= k of min(1, (m - j + 1) p_(j)); NaN stays NaN and is not counted."""
    known = sorted((p, k) for k, p in enumerate(pvalues) if not math.isnan(p))
    m, out, running = len(known), [math.nan] * len(pvalues), 0.0
    for j, (p, k) in enumerate(known):
        running = max(running, min(1.0, (m - j) * p))
        out[k] = running
    return out


def pooled(parts: Sequence[Components]) -> Components | None:
    """One column's components pooled over its comparisons (each mean square averaged with
    its degrees of freedom as weights), at the column's seeds and items."""
    parts = [c for c in parts if c.seeds >= 2]
    if not parts:
        return None

    def avg(ms, df):
        total = sum(df(c) for c in parts)
        return sum(ms(c) * df(c) for c in parts) / total if total else 0.0

    return Components(math.nan, max(c.seeds for c in parts), max(c.items for c in parts),
                      avg(lambda c: c.ms_seed, lambda c: c.df_seed),
                      avg(lambda c: c.ms_item, lambda c: c.df_item),
                      avg(lambda c: c.ms_res, lambda c: c.df_res))


def planned(c: Components, seeds: int | None = None, items: int | None = None
            ) -> tuple[float, float]:
    """(Var of the mean difference, df of its test) in a planned study of ``seeds`` x
    ``items`` with ``c``'s variance components: the df are Satterthwaite's over the planned
    study's own expected mean squares (seed: ve + I vs, item: ve + S vi, residual: ve; Var =
    (MS_seed + MS_item - MS_res) / (S I)), the test that study would run. (The observed mean
    squares of this study weighted for another size would let the df collapse where two of
    them nearly cancel, and a larger study would then seem to detect less.) At one seed the
    components cannot be told apart: a paired t over ``items``."""
    s, i = seeds or c.seeds, items or c.items
    vs, vi, ve = c.variances()
    var = vs / s + vi / i + ve / (s * i)
    if c.seeds < 2:
        return var, float(i - 1)
    parts = [(ve + i * vs, s - 1), (ve + s * vi, i - 1), (-ve, (s - 1) * (i - 1))]
    denom = sum((ms / (s * i)) ** 2 / df for ms, df in parts if df > 0 and ms != 0)
    return var, (var * var / denom if denom > 0 else math.inf)


def detectable(c: Components, seeds: int | None = None, items: int | None = None,
               alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest true difference a two-sided test at ``alpha`` detects with ``power`` at
    ``seeds`` x ``items``: (t_{1 - alpha/2} + t_{power}) * se at the planned study's df
    (:func:`planned`)."""
    from scipy.special import stdtrit

    var, df = planned(c, seeds, items)
    df = min(df, 1e6)
    return (float(stdtrit(df, 1 - alpha / 2)) + float(stdtrit(df, power))) * math.sqrt(var)


def _fewest(detects, effect: float, limit: int) -> int | None:
    """The smallest n in [2, limit] with ``detects(n) <= |effect|`` (``detects`` falls as n
    grows); None when even ``limit`` is not enough."""
    if detects(limit) > abs(effect):
        return None
    lo, hi = 2, limit
    while lo < hi:
        mid = (lo + hi) // 2
        if detects(mid) <= abs(effect):
            hi = mid
        else:
            lo = mid + 1
    return lo


def seeds_needed(c: Components, effect: float, items: int | None = None,
                 max_seeds: int = MAX_SEEDS) -> int | None:
    """The fewest seeds (>= 2) at which ``effect`` is detectable (:func:`detectable`) at
    ``items``; None when more than ``max_seeds`` would be needed or the items' noise alone is
    larger (more seeds never remove it)."""
    return _fewest(lambda n: detectable(c, n, items), effect, max_seeds)


def item_floor(c: Components, alpha: float = ALPHA, power: float = POWER) -> float:
    """The detectable difference (:func:`detectable`) with this design's items and seeds
    without end: what the item sample alone leaves (more seeds never go below it)."""
    return detectable(c, 10**6, alpha=alpha, power=power)


def items_needed(c: Components, effect: float, seeds: int | None = None,
                 max_items: int = MAX_ITEMS) -> int | None:
    """The fewest items (>= 2) at which ``effect`` is detectable at ``seeds`` (default: this
    design's); None when more than ``max_items`` would be needed (the seeds' own noise at
    that many seeds is larger, or the effect is 0)."""
    return _fewest(lambda n: detectable(c, seeds or c.seeds, n), effect, max_items)


UPPER = 0.95  # the planning figures' upper bounds: joint confidence over the mean squares


def upper(c: Components, level: float = UPPER) -> Components:
    """``c`` with variance components at conservative upper confidence bounds (joint ``level``):
    each mean square at its chi-square upper limit, Bonferroni over the mean squares the
    design has, and no component reduced by another (E[MS_seed] = ve + I vs bounds I vs,
    E[MS_item] = ve + S vi bounds S vi, E[MS_res] = ve). A planning figure made from them
    (seeds or items needed, the detectable difference, the item floor) is one the data do not
    rule out; its point estimate can rest on a component truncated at 0."""
    from dataclasses import replace

    from scipy.special import chdtri  # scipy.stats' chi2.ppf(a, df) = chdtri(df, 1 - a),
    # without importing scipy.stats (about a second of every render)

    def up(ms: float, df: int, alpha: float) -> float:
        return ms * df / float(chdtri(df, 1 - alpha)) if df > 0 else ms

    if c.seeds < 2:
        return replace(c, ms_item=up(c.ms_item, c.df_item, 1 - level))
    alpha = (1 - level) / 3
    res = up(c.ms_res, c.df_res, alpha)
    # variances() subtracts ms_res from the other two: added here, so each component is its
    # own mean square's bound
    return replace(c, ms_seed=up(c.ms_seed, c.df_seed, alpha) + res,
                   ms_item=up(c.ms_item, c.df_item, alpha) + res, ms_res=res)


def benchmark_items(task: str, metric: str) -> int | None:
    """How many items ``metric`` of ``task`` scores on its whole benchmark (weight above 0);
    None where the task has no per-item scores or its benchmark needs a data folder."""
    weights = benchmark_weights(task, metric)
    return len(weights) if weights else None


def benchmark_weights(task: str, metric: str) -> tuple[float, ...]:
    """The per-item weights (above 0) of ``metric`` over ``task``'s whole benchmark, every item
    scored on an empty response (the weights depend on which items are scored, not on the
    responses); () where the task has no per-item scores or its benchmark cannot be read
    here (it needs a data folder)."""
    return _benchmark_weights(task).get(metric, ())


@functools.lru_cache(maxsize=None)
def _benchmark_weights(task: str) -> dict[str, tuple[float, ...]]:
    """Every metric's weights of ``task``'s benchmark, scored once per task (a table's columns
    are several metrics of one benchmark)."""
    from tasks import TASKS

    t = TASKS.get(task)
    if t.item_scores is None:
        return {}  # no weights; and its scorer may call a judge, so it is not tried
    try:
        examples = t.load_eval(None)
    except (ValueError, FileNotFoundError, OSError, ImportError):
        return {}  # the benchmark is read from a data folder this report does not have
    records = t.score(examples, [""] * len(examples))["items"]
    return {metric: tuple(w for _, w in pairs if w > 0)
            for metric, pairs in t.item_scores(records).items()}


# --- per-item scores of stored seeds ------------------------------------------------------------
def item_values(predictions: Path, task: str, metric: str
                ) -> tuple[tuple[str, ...], tuple[float, ...]] | None:
    """(item ids, per-item contributions in points) of one stored seed on ``metric``: their mean
    is the stored metric (``Task.item_scores``); items of weight 0 are left out. None where the
    task has no per-item scores or names no such metric."""
    from common.jsonl import read_jsonl
    from tasks import TASKS

    scorer = TASKS.get(task).item_scores
    if scorer is None:
        return None
    records = [row for _, row in read_jsonl(predictions)]
    pairs = scorer(records).get(metric)
    if pairs is None:
        return None
    kept = [(r["id"], v, w) for r, (v, w) in zip(records, pairs) if w > 0]
    total = sum(w for *_, w in kept)
    if not kept or total <= 0:
        return None
    n = len(kept)
    return (tuple(k for k, *_ in kept),
            tuple(100.0 * n * w * v / total for _, v, w in kept))


def differences(row: Sequence[tuple[int, tuple, tuple]],
                reference: Sequence[tuple[int, tuple, tuple]]) -> list[list[float]] | None:
    """``d [S, I]`` on the seeds both have, from (seed, item ids, contributions) of each; None
    when they evaluated other items (or none are shared)."""
    a = {s: (ids, xs) for s, ids, xs in row}
    b = {s: (ids, xs) for s, ids, xs in reference}
    shared = sorted(set(a) & set(b))
    if not shared or any(a[s][0] != b[s][0] for s in shared):
        return None
    if len({a[s][0] for s in shared}) != 1:
        return None  # another subset on another seed: not one crossed design
    return [[x - y for x, y in zip(a[s][1], b[s][1])] for s in shared]
