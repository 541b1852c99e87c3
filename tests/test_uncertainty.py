"""Uncertainty of a comparison (lab.reports.uncertainty) on hand-computed numbers: the
paired t-interval, rliable's probability of improvement, the seeds for 80 % power (checked
against G*Power's paired t-test tables), and their use in tables and Figure 4's summary."""
import math
import statistics

import pytest

from lab.reports import figures, uncertainty as u
from lab.reports.aggregate import Cell, ContrastCell, best_rows
from lab.reports.render import Grid, markdown
from lab.reports.tables import contrast_grids

T_975_2 = 4.302652729911275  # Student t, 97.5 % quantile, 2 degrees of freedom


def test_t_interval_of_the_mean_difference():
    low, high = u.t_interval([3.0, 1.0, 5.0])  # mean 3, sd 2, se 2 / sqrt(3)
    half = T_975_2 * 2 / math.sqrt(3)
    assert low == pytest.approx(3 - half) and high == pytest.approx(3 + half)
    assert all(math.isnan(x) for x in u.t_interval([2.0]))  # one seed: no interval
    assert u.t_interval([1.5, 1.5, 1.5]) == (1.5, 1.5)  # no spread


def test_probability_of_improvement_counts_seed_pairs_and_half_ties():
    # 13 > 10; 21 > 10, 20; 35 > all: 6 of 9 pairs
    assert u.probability_of_improvement([13, 21, 35], [10, 20, 30]) == pytest.approx(6 / 9)
    # 1 ties 1 (1/2); 2 beats 1 and ties 2, 2 (2); 3 beats all (3): 5.5 of 9
    assert u.probability_of_improvement([1, 2, 3], [1, 2, 2]) == pytest.approx(5.5 / 9)
    # smaller is better: the complement
    assert u.probability_of_improvement([1, 2, 3], [1, 2, 2], higher=False) == \
        pytest.approx(3.5 / 9)
    assert math.isnan(u.probability_of_improvement([], [1.0]))


@pytest.mark.parametrize("effect,seeds", [(2.0, 5), (1.0, 10), (0.5, 34), (0.1, 787)])
def test_seeds_for_80_percent_power_match_gpower(effect, seeds):
    # G*Power 3.1, "Means: difference from constant (one sample case)", two tails, alpha 0.05,
    # power 0.80: total sample size 5, 10, 34, 787 for d = 2, 1, 0.5, 0.1
    assert u.seeds_for_power(effect * 3.0, 3.0) == seeds
    assert u.seeds_for_power(-effect, 1.0) == seeds  # direction does not matter
    assert u.power(seeds, effect, 1.0) >= 0.8 > u.power(seeds - 1, effect, 1.0)


def test_seeds_for_power_edge_cases():
    assert u.seeds_for_power(0.0, 1.0) is None  # no difference: never resolved
    assert u.seeds_for_power(1.0, 0.0) == 2  # no spread: any two seeds resolve it
    assert u.seeds_for_power(0.001, 1.0) is None  # more than MAX_SEEDS


def test_power_at_two_seeds_is_the_noncentral_t_with_one_degree_of_freedom():
    """df = 1, where scipy.stats.nct gave NaN: the power of the two-sided paired t-test at 2
    seeds, against a simulation of 400,000 pairs (Monte Carlo error ~0.0005)."""
    import numpy as np
    from scipy import stats

    rng = np.random.default_rng(0)
    crit = stats.t.ppf(0.975, 1)
    for mean in (1.0, 5.0):
        x = rng.normal(mean, 1.0, size=(400_000, 2))
        t = x.mean(axis=1) / (x.std(axis=1, ddof=1) / math.sqrt(2))
        assert u.power(2, mean, 1.0) == pytest.approx(float((np.abs(t) > crit).mean()),
                                                      abs=0.003)
    # the Table 6 case: differences (+a, +a, 0) need 3 seeds, not the 2 a power of 1 gave
    p = u.paired([(0, 5.0), (1, 5.0), (2, 0.0)], [(0, 0.0), (1, 0.0), (2, 0.0)])
    assert p.seeds_for_power == u.seeds_for_power(p.mean, p.sd) > 2


def test_equal_nonzero_differences_are_undecided():
    """Three equal non-zero differences: a zero-width interval that decides nothing."""
    p = u.paired([(0, 13.3), (1, 13.3), (2, 13.3)], [(0, 0.0), (1, 0.0), (2, 0.0)])
    assert p.interval == pytest.approx((13.3, 13.3)) and not p.spread
    assert not p.decided and not p.better and p.seeds_for_power is None
    assert u.text(p) == "+13.30 on all 3 seeds (no spread: undecided) P=1.00"
    assert u.power_text(p) == "no spread"


def test_paired_uses_shared_seeds_and_the_metric_direction():
    p = u.paired([(0, 12.0), (1, 12.1), (2, 11.9), (5, 0.0)],
                 [(0, 10.0), (1, 10.0), (2, 10.0), (3, 99.0)])
    assert p.seeds == (0, 1, 2) and p.diffs == pytest.approx((2.0, 2.1, 1.9))
    assert p.decided and p.better and p.poi == 1.0
    worse = u.paired([(0, 12.0), (1, 12.1), (2, 11.9)], [(0, 10.0), (1, 10.0), (2, 10.0)],
                     higher=False)  # e.g. steps to a threshold: more is worse
    assert worse.decided and not worse.better and worse.poi == 0.0
    assert u.text(u.paired([(0, 1.0), (1, 2.0)], [(0, 1.0), (1, 2.0)])) == "equal on 2 seeds"
    assert u.text(u.paired([(0, 3.0)], [(0, 1.0)])) == "+2.00 (n=1) P=1.00"
    assert u.text(u.paired([(0, 13.0), (1, 21.0), (2, 35.0)],
                           [(0, 10.0), (1, 20.0), (2, 30.0)])) == "+3.00 [−1.97, +7.97]? P=0.67"


def test_best_row_follows_the_declared_direction():
    cells = [Cell(((0, 2.0),)), Cell(((0, 3.0),))]
    assert best_rows(cells, higher=True) == {1} and best_rows(cells, higher=False) == {0}
    grid = Grid("t", "run", ["", ""], ["acc", "s/step"], higher=[True, False],
                rows=[("a", [Cell(((0, 1.0),)), Cell(((0, 5.0),))]),
                      ("b", [Cell(((0, 2.0),)), Cell(((0, 9.0),))])])
    assert grid.best() == [{1}, {0}]


def test_contrast_grids_compare_every_row_with_the_reference():
    rows = [("GDPO", [Cell(((0, 10.0), (1, 20.0), (2, 30.0)), footnote="mixed")]),
            ("MRTPO", [Cell(((0, 13.0), (1, 21.0), (2, 35.0)))]),
            ("Base", [Cell(((0, 5.0),))])]
    (diff,) = contrast_grids(Grid("T", "Method", [""], ["acc"], rows=rows), "GDPO")
    assert [r for r, _ in diff.rows] == ["MRTPO", "Base"]
    mrtpo = diff.rows[0][1][0]
    assert isinstance(mrtpo, ContrastCell) and mrtpo.values == ((0, 3.0), (1, 1.0), (2, 5.0))
    # t = 3 / (2 / sqrt 3) = 2.598 at 2 df: p = 1 - t / sqrt(t^2 + 2) = 0.1217; alone in
    # its family, Holm leaves it as it is.
    # The reference's footnote is carried too
    assert mrtpo.text() == "+3.00 [−1.97, +7.97]? P=0.67 p=0.122 (Holm 0.122) †"
    assert diff.rows[1][1][0].text() == "−5.00 (n=1) P=0.00 †"
    assert mrtpo.footnote == "the reference: mixed"  # said whose
    assert "undecided" in markdown(diff) and "Holm" in markdown(diff)
    assert "undecided" in mrtpo.csv_note() and "P(improvement) 0.6667" in mrtpo.csv_note()
    assert contrast_grids(Grid("T", "Method", [""], ["acc"], rows=rows[1:]), "GDPO") == []


def _log(values):
    return [{"step": i + 1, "reward/format": v} for i, v in enumerate(values)]


def test_steps_to_threshold_as_survival_data_and_sensitivity():
    logs = {"gdpo": {0: _log([0.9] * 4), 1: _log([0.1, 0.9, 0.9, 0.9])},
            "mrtpo": {0: _log([0.1, 0.1, 0.9, 0.9]), 1: _log([0.1] * 4)}}
    # per-step values: gdpo reaches 0.8 at steps 1, 2; mrtpo at 3 and never (censored at 4)
    assert figures.threshold_steps(logs["mrtpo"], "reward/format", 0.8, 1) == ([3, None], [4, 4])
    (line,) = figures.threshold_tests(logs, "reward/format", 0.8, 1, "gdpo")
    # log-rank by hand, mrtpo's events: t=1: n 2+2, gdpo 1 event: E_m = 1/2, V = 1/4;
    # t=2: n_g 1, n_m 2, 1 event: E_m = 2/3, V = 2/9; t=3: n_m 2 alone, 1 event: E_m = 1, V = 0.
    # O_m = 1, E_m = 13/6: chi2 = (7/6)^2 / (17/36) = 49/17 = 2.882, p = 0.0896
    # exact: gdpo's two seeds first is the most extreme of C(4, 2) = 6 relabellings (with its
    # mirror): 2/6; paired by seed, both swapped or neither of 2^2 = 4: 2/4
    assert line == ("- mrtpo against gdpo: log-rank p = 0.090; exact p = 0.333 (smallest "
                    "possible 0.333); paired by seed p = 0.500 (smallest possible 0.500)")
    table = figures.sensitivity(logs, "reward/format", 0.8)
    assert len(table) == 2 + 9 and table[0].startswith("| window | threshold | gdpo | mrtpo")
    # window 3, threshold 0.75, full windows only (from step 3): gdpo's trailing means reach it
    # at 3 and 4 (-, -, 0.63, 0.9): Kaplan-Meier median 3.5 (1/2 exactly between 3 and 4);
    # mrtpo's never
    assert table[2] == "| 3 | 0.75 | 3.5 | not reached | gdpo < mrtpo |"


def test_kaplan_meier_median_and_its_interval_by_hand():
    from lab.reports.survival import km_median

    # 2, 3, 4+, 5, 6+: S(2) = 4/5, S(3) = 3/5, S(5) = 3/5 x 1/2 = 0.3 -> median 5
    got = km_median([2, 3, None, 5, None], [9, 9, 4, 9, 6])
    assert (got.median, got.events, got.n) == (5.0, 3, 5)
    assert got.low == 2.0 and got.high is None  # the band holds 1/2 from step 2 on
    assert "3 of 5 seeds" in got.text()
    # uncensored: the ordinary median (midpoint where S is 1/2 exactly); 20 seeds make a band
    many = km_median(list(range(3, 23)), [30] * 20)
    assert many.median == 12.5 and 3 < many.low < 12.5 < many.high < 23
    assert km_median([None, None], [30, 30]).text() == "not reached by any of 2 seeds"


def test_pooled_detectable_difference_on_hand_numbers():
    pairs = [u.paired([(0, 1.0), (1, 3.0)], [(0, 0.0), (1, 0.0)]),  # diffs 1, 3: var 2
             u.paired([(0, 0.0), (1, 0.0), (2, 4.0)], [(0, 0.0), (1, 0.0), (2, 0.0)])]  # var 16/3
    sd, df = u.pooled_sd(pairs)
    # (2 * 1 + 16/3 * 2) / 3 = 4.222
    assert df == 3 and sd == pytest.approx(math.sqrt(38 / 9))
    # 3 seeds: (4.303 + 1.061) sd / sqrt 3
    assert u.detectable(sd, 3) == pytest.approx((4.30265 + 1.06066) * sd / math.sqrt(3), rel=1e-4)
    assert u.seeds_for(u.detectable(sd, 7), sd) == 7
    same = [u.paired([(0, 2.0), (1, 2.0)], [(0, 0.0), (1, 0.0)])]
    assert "no spread" in u.detectable_text(same, 5, "steps")


def test_a_benchmark_spec_must_name_a_reference_row(tmp_path):
    from lab.reports import spec as specs

    bad = tmp_path / "tableX.toml"
    bad.write_text('kind = "benchmark"\nrows = [{ label = "A", method = "gdpo" }]\n'
                   'columns = [{ label = "c", task = "bfcl", metric = "non_live_overall" }]\n'
                   '[settings.smoke]\npreset = "smoke"\nmodels = ["tiny-random"]\n')
    with pytest.raises(specs.SpecError, match="tableX.toml: reference row 'GDPO' is not one"):
        specs.check(specs.parse(bad))
    bad.write_text('reference = "A"\n' + bad.read_text())
    specs.check(specs.parse(bad))


def test_the_scipy_special_forms_agree_with_scipy_stats():
    import random
    import warnings

    from scipy import stats

    from lab.reports import uncertainty as u

    rng = random.Random(0)
    for _ in range(50):
        n = rng.randint(2, 9)
        diffs = [rng.gauss(1.0, 2.0) for _ in range(n)]
        ci = stats.ttest_1samp(diffs, 0.0).confidence_interval(0.95)
        assert u.t_interval(diffs) == pytest.approx((ci.low, ci.high), rel=1e-9, abs=1e-9)
        x = [rng.choice([0.0, 1.0, 2.0]) for _ in range(n)]
        y = [rng.choice([0.0, 1.0, 2.0]) for _ in range(rng.randint(1, 5))]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            mw = stats.mannwhitneyu(x, y, alternative="two-sided").statistic / (len(x) * len(y))
        assert u.probability_of_improvement(x, y) == pytest.approx(mw)
        mean, sd = rng.uniform(0.1, 3.0), rng.uniform(0.5, 3.0)
        nc, df = mean / sd * n ** 0.5, n - 1
        crit = stats.t.ppf(0.975, df)
        expected = stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc)
        if math.isnan(expected):  # scipy.stats' lower tail far out: ~0, so the upper tail
            expected = stats.nct.sf(crit, df, nc)
        assert u.power(n, mean, sd) == pytest.approx(expected, abs=1e-9)
    # at df = 1 scipy.stats.nct gives NaN and the power was taken as 1; the probability of
    # |T'| > t(0.975, 1) for noncentrality 2 is 0.1258 (2,000,000 Monte Carlo draws: 0.1257)
    assert u.power(2, 2.0 / 2 ** 0.5, 1.0) == pytest.approx(0.12576, abs=1e-4)


def test_contrasts_over_seeds_and_items_with_holm_and_the_detectable_difference():
    """Cells carrying per-item scores get the crossed interval, Holm over the table's outcome
    columns (not the diagnostic one), and the detectable-difference grid."""
    from lab.reports import items as it

    ids = ("a", "b", "c", "d")
    ref_items = tuple((s, ids, (0.0, 100.0, 0.0, 100.0)) for s in range(3))
    row_items = ((0, ids, (100.0, 100.0, 0.0, 100.0)), (1, ids, (100.0, 100.0, 100.0, 100.0)),
                 (2, ids, (0.0, 100.0, 0.0, 100.0)))
    mean = lambda items: tuple((s, sum(x) / len(x)) for s, _, x in items)
    ref = Cell(mean(ref_items), items=ref_items)
    row = Cell(mean(row_items), items=row_items)
    log = Cell(((0, 1.0), (1, 2.0), (2, 3.0)))
    grid = Grid("T", "Method", ["", "", ""], ["acc", "acc2", "kept"], higher=[True, True, None],
                rows=[("GDPO", [ref, ref, log]), ("MRTPO", [row, row, log])])
    seeds, over_items, detect = contrast_grids(grid, "GDPO")
    cell = over_items.rows[0][1][0]
    d = [[100.0, 0.0, 0.0, 0.0], [100.0, 0.0, 100.0, 0.0], [0.0, 0.0, 0.0, 0.0]]
    want = it.interval(d)
    assert (cell.item.low, cell.item.high) == pytest.approx((want.low, want.high))
    assert "(4 items)" in over_items.title and over_items.rows[0][1][2].text() == "–"
    # two equal tests in a family of two: Holm doubles the smaller p
    assert cell.holm == pytest.approx(min(1.0, 2 * want.p))
    assert seeds.rows[0][1][0].holm == pytest.approx(min(1.0, 2 * seeds.rows[0][1][0].p))
    c = it.components(d)
    u = it.detectable(it.upper(c))
    assert detect.rows[0][1][0].text() == (
        f"±{it.detectable(c):.1f}, up to {'> 100' if u > 100 else f'±{u:.1f}'} (3 x 4)")
    assert detect.rows[0][1][2].text() == "–"


def test_a_detectable_difference_past_the_scale_says_so():
    """Two items that swap between seeds: the design's detectable difference is past 100
    points, which no difference of two percentages can be, and the cell says so."""
    from lab.reports import items as it

    ids = ("a", "b")
    ref_items = tuple((s, ids, (0.0, 100.0)) for s in range(3))
    row_items = ((0, ids, (100.0, 100.0)), (1, ids, (0.0, 0.0)), (2, ids, (0.0, 100.0)))
    mean = lambda items: tuple((s, sum(x) / len(x)) for s, _, x in items)
    grid = Grid("T", "Method", [""], ["acc"], higher=[True],
                rows=[("GDPO", [Cell(mean(ref_items), items=ref_items)]),
                      ("MRTPO", [Cell(mean(row_items), items=row_items)])])
    *_, detect = contrast_grids(grid, "GDPO")
    d = [[100.0, 0.0], [0.0, -100.0], [0.0, 0.0]]
    assert it.detectable(it.components(d)) > 100
    assert detect.rows[0][1][0].text() == "> 100, up to > 100 (3 x 2)"


def test_the_exact_tests_of_steps_to_threshold_know_their_smallest_p():
    """Complete separation at 3 seeds a method: the log-rank test's normal approximation says
    p = 0.025, while no relabelling test can go below 2/20 = 0.10, and one paired by seed (the
    methods' outcomes swapped within a seed) not below 2/8 = 0.25."""
    import math

    from lab.reports.survival import logrank_p, permutation_p

    fast, slow, last = [3, 4, 5], [10, 11, 12], [20, 20, 20]
    assert logrank_p(fast, last, slow, last) == pytest.approx(0.0246, abs=5e-4)
    assert permutation_p(fast, last, slow, last) == pytest.approx((0.10, 0.10))
    assert permutation_p(fast, last, slow, last, paired=True) == pytest.approx((0.25, 0.25))
    # no difference: every relabelling is as extreme as the one observed
    same = permutation_p([5, 6, 7], last, [5, 6, 7], last)
    assert same[0] == pytest.approx(1.0)
    # censored seeds count as longer than any reached step
    p, floor = permutation_p([3, 4, 5], last, [None, None, None], last)
    assert (p, floor) == pytest.approx((0.10, 0.10))
    assert all(math.isnan(x) for x in permutation_p([None], [9], [None], [9]))
    with pytest.raises(ValueError, match="pairing needs the same seeds"):
        permutation_p([1, 2], [9, 9], [1], [9], paired=True)


def test_table3_s_paper_means_fit_five_runs_not_three():
    """BFCL v4 scores a run as a whole number of a category's items; the paper's Table 3 means
    (its printed numbers in the spec) lie on the grid of 5 runs for every trained cell whose
    grid is coarser than the printing, and the paper presets run that many seeds."""
    import tomllib
    from pathlib import Path

    from lab.reports.paper_runs import fitting_runs, informative, on_grid
    from tasks import TASKS

    root = Path(__file__).resolve().parent.parent
    spec = tomllib.loads((root / "lab" / "reports" / "specs" / "table3.toml").read_text())
    sizes: dict[str, int] = {}
    for example in TASKS.get("bfcl").load_eval(None):  # the benchmark's own category sizes
        category = example.id.rsplit("_", 1)[0]
        sizes[category] = sizes.get(category, 0) + 1
    assert (sizes["live_parallel"], sizes["live_parallel_multiple"], sizes["multiple"]) == \
        (16, 24, 200)
    columns = [c["metric"] for c in spec["columns"] if "settings" not in c]
    cells = [(float(value.split()[0]), sizes[metric])
             for rows in spec["paper"].values() for label, values in rows.items()
             if label != "Base" for metric, value in zip(columns, values) if metric in sizes]
    assert len(cells) == 21  # 3 trained rows x 7 single-category columns
    assert fitting_runs(cells)[0] == 5  # the fewest runs every cell fits (10 fits too)
    assert 3 not in fitting_runs(cells)
    assert sum(on_grid(m, 3, k) for m, k in cells if informative(3, k)) == 3  # of 21
    # GDPO, 1.5B, Live Parallel (16 items): 53.75 ± 5.59 is {43.75, 56.25 x 4} exactly
    scores = [43.75] + [56.25] * 4
    assert statistics.mean(scores) == 53.75
    assert round(statistics.stdev(scores), 2) == 5.59
    assert spec["settings"]["paper"]["seeds"] == 5
