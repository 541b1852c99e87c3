"""Planning Figure 4's comparison: the vectorised log-rank statistic and exact p agree with scipy
and the survival module's, and the power simulation gives what a design allows by hand."""
import math

import numpy as np
import pytest

from lab.reports import power as pw
from lab.reports.survival import permutation_p

pytestmark = pytest.mark.unit


def test_the_statistic_is_scipys_logrank():
    from scipy import stats

    from lab.reports.survival import censored

    rng = np.random.default_rng(1)
    for _ in range(20):
        a = [int(x) if x < 15 else None for x in rng.integers(1, 20, 5)]
        b = [int(x) if x < 15 else None for x in rng.integers(1, 20, 4)]
        last = [15] * 9
        if all(s is None for s in a + b):
            continue
        times = np.array([s if s is not None else 15 for s in a + b], float)
        events = np.array([s is not None for s in a + b])
        z = pw.logrank_z(times, events, np.array([[True] * 5 + [False] * 4]))[0]
        want = stats.logrank(censored(a, last[:5]), censored(b, last[5:])).statistic
        assert z == pytest.approx(0.0 if math.isnan(want) else want, abs=1e-9)


@pytest.mark.parametrize("a,b,paired", [
    ([3, 4, 5], [7, 8, None], False), ([3, 4, 5], [7, 8, None], True),
    ([3, None, 5, 6], [4, 8, None, 2], False), ([9, 9, 4], [9, 3, 4], True)])
def test_the_exact_p_is_the_survival_modules(a, b, paired):
    last_a, last_b = [10] * len(a), [10] * len(b)
    assert pw.exact_p(a, last_a, b, last_b, paired) == pytest.approx(
        permutation_p(a, last_a, b, last_b, paired)[0], abs=1e-12)


def test_what_a_design_allows_by_hand():
    assert pw.smallest_p(3) == pytest.approx(0.1) and pw.smallest_p(3, True) == 0.25
    # no spread, a large effect: every experiment separates completely, so the design decides
    sure = pw.Model(median=20, spread=1e-9, cap=30)
    assert pw.power(sure, 0.5, 3, draws=20) == 0.0  # 3 vs 3: p >= 0.10
    assert pw.power(sure, 0.5, 4, draws=20) == 1.0  # 4 vs 4: p = 2/70
    assert pw.seeds_needed(sure, 0.5, draws=20) == 4
    assert pw.seeds_needed(sure, 0.5, paired=True, draws=20) == 6  # 2/32 > 0.05, 2/64 below
    # no effect: the exact test keeps its level (at most alpha, up to simulation noise)
    noisy = pw.Model(median=15, spread=0.4, cap=30)
    assert pw.power(noisy, 1.0, 5, draws=400) <= 0.05 + 0.03
    # more seeds find more of a real effect
    assert pw.power(noisy, 0.6, 4, draws=300) < pw.power(noisy, 0.6, 6, draws=300)


def test_censoring_and_the_first_countable_step():
    rng = np.random.default_rng(0)
    m = pw.Model(median=40, spread=0.1, cap=30, first=5)
    a, a_last, b, b_last = pw.draw(m, 0.1, 6, rng)
    assert all(s is None for s in b) and a_last == [30] * 6  # the reference never gets there
    assert all(s is not None and s >= 5 for s in a)  # 4 is the median, 5 the first countable
