"""Intervals over seeds and items (lab.reports.items) on hand-computed numbers, their coverage
by simulation, Holm's adjustment, and the detectable difference."""
import math

import pytest

from lab.reports import items as it

D = [[1.0, 2.0, 3.0], [3.0, 4.0, 8.0]]  # 2 seeds x 3 items of paired differences


def test_crossed_components_and_interval_by_hand():
    # grand 3.5; seed means 2, 5; item means 2, 3, 5.5; residuals +-0.5, +-0.5, -+1
    c = it.components(D)
    assert (c.ms_seed, c.ms_item, c.ms_res) == pytest.approx((13.5, 6.5, 1.5))
    var, df = c.variance_of_mean()
    assert var == pytest.approx((13.5 + 6.5 - 1.5) / 6)  # (MS_s + MS_i - MS_r) / (S I)
    assert df == pytest.approx(18.5 ** 2 / (13.5 ** 2 / 1 + 6.5 ** 2 / 2 + 1.5 ** 2 / 2))
    from scipy import stats

    got = it.interval(D)
    half = stats.t.ppf(0.975, df) * math.sqrt(var)
    assert (got.mean, got.low, got.high) == pytest.approx((3.5, 3.5 - half, 3.5 + half))
    assert got.p == pytest.approx(2 * stats.t.sf(3.5 / math.sqrt(var), df))
    # the seed-only variance of the mean (of the seed means: MS_seed / (S I)) holds the items
    # fixed, and is smaller
    assert stats.tvar([2.0, 5.0]) / 2 == pytest.approx(13.5 / 6) and 13.5 / 6 < var


def test_one_seed_is_the_paired_t_over_items():
    from scipy import stats

    got = it.interval([[1.0, 2.0, 6.0]])
    half = stats.t.ppf(0.975, 2) * stats.tstd([1.0, 2.0, 6.0]) / math.sqrt(3)
    assert (got.low, got.high, got.df) == pytest.approx((3 - half, 3 + half, 2))


def test_the_interval_covers_the_true_difference_95_percent_of_the_time():
    """3 seeds x 20 items with seed, item and residual noise (the items' the largest, as at
    smoke scale): 2,000 simulated comparisons."""
    import numpy as np

    rng = np.random.default_rng(0)
    hits, seed_only = 0, 0
    for _ in range(2000):
        d = (0.7 + rng.normal(0, 0.5, (3, 1)) + rng.normal(0, 4.0, (1, 20))
             + rng.normal(0, 1.5, (3, 20)))
        got = it.interval(d.tolist())
        hits += got.low <= 0.7 <= got.high
        m = d.mean(axis=1)
        half = 4.302652729911275 * m.std(ddof=1) / math.sqrt(3)
        seed_only += m.mean() - half <= 0.7 <= m.mean() + half
    assert 0.93 <= hits / 2000 <= 0.985
    assert seed_only / 2000 < 0.80  # the item sample is outside the seed-only interval


def test_holm_on_a_hand_computed_family():
    # sorted 0.005 x4 = 0.02, 0.01 x3 = 0.03, 0.03 x2 = 0.06, 0.04 x1 -> max(0.06, 0.04)
    assert it.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    got = it.holm([0.5, math.nan, 0.9])
    assert got[0] == pytest.approx(1.0) and math.isnan(got[1]) and got[2] == pytest.approx(1.0)


def test_detectable_difference_and_seeds_needed():
    c = it.components(D)
    var, df = it.planned(c)
    from scipy import stats

    # at this study's size the variance is the interval's
    assert var == pytest.approx(c.variance_of_mean()[0])
    assert it.detectable(c) == pytest.approx((stats.t.ppf(0.975, df) + stats.t.ppf(0.8, df))
                                             * math.sqrt(var))
    # more seeds shrink it, down to the items' floor: an effect below that floor is never
    # detectable at these items, whatever the seeds
    assert it.detectable(c, seeds=50) < it.detectable(c)
    assert it.seeds_needed(c, 0.1) is None
    n = it.seeds_needed(c, 5.0, items=200)
    assert n is not None and it.detectable(c, n, 200) <= 5.0 < it.detectable(c, n - 1, 200)


def test_differences_need_the_same_items():
    a = [(0, ("x", "y"), (1.0, 0.0)), (1, ("x", "y"), (1.0, 1.0))]
    b = [(0, ("x", "y"), (0.0, 0.0)), (2, ("x", "y"), (1.0, 1.0))]
    assert it.differences(a, b) == [[1.0, 0.0]]  # the shared seed only
    assert it.differences(a, [(0, ("x", "z"), (0.0, 0.0))]) is None


def test_planned_df_by_hand_and_more_seeds_never_detect_less():
    # components (vs, vi, ve) = (1, 2, 3) at 4 seeds x 5 items: MS seed 3 + 5, item 3 + 8, res 3
    c = it.Components(0.0, 4, 5, 8.0, 11.0, 3.0)
    assert c.variances() == pytest.approx((1.0, 2.0, 3.0))
    var, df = it.planned(c, 10, 5)  # planned: MS seed 3 + 5 = 8 (9 df), item 3 + 20 = 23 (4), res 3 (36)
    assert var == pytest.approx(1 / 10 + 2 / 5 + 3 / 50)
    assert df == pytest.approx(var ** 2 / ((8 / 50) ** 2 / 9 + (23 / 50) ** 2 / 4
                                           + (3 / 50) ** 2 / 36))
    # item noise nearly all residual (MS item ~ MS res): the observed mean squares reweighted
    # for more seeds nearly cancel; the planned study's do not
    flat = it.Components(0.0, 3, 20, 2.0, 3.1, 3.0)
    mdes = [it.detectable(flat, s) for s in (3, 10, 100, 1000)]
    assert mdes == sorted(mdes, reverse=True)
    assert it.seeds_needed(flat, mdes[0]) <= 3
