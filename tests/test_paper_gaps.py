"""The paper's own gaps (lab/reports/paper_gaps.py): Welch's interval from the printed mean, std
and n, the paired interval over every correlation, the item floor and the grid flag, checked
against the formulas worked by hand on Table 3's printed numbers; the spec's paper_n; and the
grid in a Table 3 render."""
import math

import pytest
from scipy import stats

from lab.reports import paper_gaps as pg
from lab.reports import spec as specs
from lab.reports.paper_runs import run_items
from lab.reports.spec import paper_cell

N = 5  # Table 3's paper_n


def table3_cell(row: str, column: str, group: str = "Non-Live") -> pg.Printed:
    """A printed cell of Table 3 (Qwen2.5-1.5B-Instruct) from its spec."""
    spec = specs.get("table3")
    j = next(i for i, c in enumerate(c for c in spec.columns if "smoke" not in c.settings)
             if (c.group, c.label) == (group, column))
    mean, sd = paper_cell(spec.paper["Qwen2.5-1.5B-Instruct"][row][j])
    return pg.Printed(mean, sd, spec.paper_n)


def test_the_welch_interval_of_mrtpo_against_gdpo_is_the_hand_computed_one():
    mrtpo, gdpo = table3_cell("MRTPO", "Overall"), table3_cell("GDPO", "Overall")
    assert (mrtpo.mean, mrtpo.sd, gdpo.mean, gdpo.sd, mrtpo.n) == (80.05, 1.00, 79.30, 1.69, N)
    a, b = 1.00 ** 2 / N, 1.69 ** 2 / N  # each mean's squared standard error
    df = (a + b) ** 2 / (a ** 2 / (N - 1) + b ** 2 / (N - 1))  # Welch-Satterthwaite
    half = stats.t.ppf(0.975, df) * math.sqrt(a + b)
    assert df == pytest.approx(6.495, abs=1e-3)
    d, interval, got_df = pg.welch(mrtpo, gdpo)
    assert d == pytest.approx(0.75)
    assert got_df == pytest.approx(df)
    assert interval == pytest.approx((0.75 - half, 0.75 + half))
    assert [round(x, 2) for x in interval] == [-1.36, 2.86]
    gap = pg.gap(mrtpo, gdpo, run_items("bfcl", "non_live_overall"), ("MRTPO", "GDPO"))
    assert gap.verdict == "undecided"
    assert gap.text().startswith("+0.75 [-1.36, +2.86] undecided; paired ")


def test_the_paired_interval_ranges_from_rho_one_to_rho_minus_one():
    mrtpo, gdpo = table3_cell("MRTPO", "Overall"), table3_cell("GDPO", "Overall")
    t = stats.t.ppf(0.975, N - 1)
    narrow = t * abs(1.00 - 1.69) / math.sqrt(N)  # rho = 1: Var = (sd1 - sd2)^2 / n
    wide = t * (1.00 + 1.69) / math.sqrt(N)  # rho = -1: Var = (sd1 + sd2)^2 / n
    assert pg.paired(mrtpo, gdpo, 1.0) == pytest.approx((0.75 - narrow, 0.75 + narrow))
    assert pg.paired(mrtpo, gdpo, -1.0) == pytest.approx((0.75 - wide, 0.75 + wide))
    # every rho in between lies between the two ends
    for rho in (-0.5, 0.0, 0.5):
        low, high = pg.paired(mrtpo, gdpo, rho)
        assert 0.75 - wide < low < 0.75 - narrow and 0.75 + narrow < high < 0.75 + wide
    assert "paired [-0.11, +1.61]..[-2.59, +4.09]" in pg.gap(mrtpo, gdpo).text()
    # equal stds at rho = 1: every paired difference the same, no interval to give
    same = pg.Printed(81.0, 1.69, N)
    assert pg.paired(same, gdpo, 1.0) is None
    assert "paired no spread..[" in pg.gap(same, gdpo).text()
    with pytest.raises(ValueError, match="one n"):
        pg.paired(pg.Printed(81.0, 1.0, 3), gdpo, 0.0)


def test_the_floor_is_one_item_over_n_runs_of_the_benchmark_s_own_size():
    from tasks import TASKS

    sizes: dict[str, int] = {}
    for example in TASKS.get("bfcl").load_eval(None):  # as tests/test_uncertainty.py counts
        category = example.id.rsplit("_", 1)[0]
        sizes[category] = sizes.get(category, 0) + 1
    assert run_items("bfcl", "live_parallel") == sizes["live_parallel"] == 16
    assert run_items("bfcl", "multiple") == sizes["multiple"] == 200
    # Non-Live Overall: the mean of Simple (the mean of python, java, javascript) and three
    # categories of 200: one python item moves it by 1 / (4 * 3 * 400)
    assert (sizes["simple_python"], sizes["simple_java"], sizes["simple_javascript"]) == \
        (400, 100, 50)
    assert run_items("bfcl", "non_live_overall") == 4 * 3 * 400
    # Live Overall weighs its categories by size: the pooled item count
    assert run_items("bfcl", "live_overall") == sum(sizes[c] for c in (
        "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple"))
    assert pg.floor(N, 16) == pytest.approx(1.25)
    assert pg.floor(N, 4800) == pytest.approx(100 / 24000)
    assert pg.floor(N, None) is None
    mrtpo, gdpo = table3_cell("MRTPO", "Parallel", "Live"), table3_cell("GDPO", "Parallel", "Live")
    assert pg.gap(mrtpo, gdpo, 16).text().endswith("; floor 1.25")
    assert "floor" not in pg.gap(mrtpo, gdpo, None).text()


def test_a_mean_off_the_n_run_item_grid_is_flagged_where_the_grid_can_tell():
    gdpo = table3_cell("GDPO", "Parallel", "Live")  # 53.75: {43.75, 56.25 x 4} of 16 items
    mrtpo = table3_cell("MRTPO", "Parallel", "Live")  # 55.00
    assert not pg.off_grid(gdpo, 16) and not pg.off_grid(mrtpo, 16)
    assert "grid" not in pg.gap(mrtpo, gdpo, 16, ("MRTPO", "GDPO")).text()
    # at 3 runs, 53.75 is 25.8 items of 48: not a mean of 3 runs; 55.00 is 26.4 of 48
    three = [pg.Printed(c.mean, c.sd, 3) for c in (mrtpo, gdpo)]
    assert pg.off_grid(three[1], 16)
    text = pg.gap(*three, 16, ("MRTPO", "GDPO")).text()
    assert text.endswith("; MRTPO and GDPO means not on the 3-run item grid")
    on = pg.Printed(56.25, 0.0, 3)  # 27 of 48
    assert pg.gap(on, three[1], 16, ("X", "GDPO")).text().endswith(
        "; GDPO mean not on the 3-run item grid")
    # a grid finer than the printed decimals says nothing: never flagged
    assert not pg.off_grid(pg.Printed(66.151, 1.0, N), 1053)
    assert not pg.off_grid(gdpo, None)


def test_a_welch_interval_that_excludes_zero_is_decided_and_no_spread_is_not():
    grpo, gdpo = table3_cell("GRPO", "Multiple"), table3_cell("GDPO", "Multiple")
    gap = pg.gap(grpo, gdpo, 200)
    assert gap.welch[1] < 0 and gap.verdict == "decided"
    assert gap.text().startswith("-2.20 [-3.12, -1.28] decided")
    flat = pg.gap(pg.Printed(70.0, 0.0, N), pg.Printed(69.0, 0.0, N))
    assert flat.welch is None and flat.verdict == "undecided"
    assert flat.text().startswith("+1.00 no spread undecided; paired no spread..no spread")


def test_every_spec_with_printed_stds_says_its_paper_n(tmp_path):
    assert specs.get("table3").paper_n == 5 == specs.get("table3").setting("paper").seeds
    for name in specs.SPECS.names():
        spec = specs.get(name)
        printed = any("±" in t for rows in spec.paper.values() if isinstance(rows, dict)
                      for cells in rows.values() if isinstance(cells, list)
                      for t in cells if isinstance(t, str))
        assert not printed or spec.paper_n >= 2, name
    text = (specs.SPEC_DIR / "table3.toml").read_text(encoding="utf-8")
    assert "\npaper_n = 5\n" in text
    path = tmp_path / "table3.toml"
    for bad, why in (("", "sets no paper_n"), ("paper_n = 1\n", "2 or more"),
                     ("paper_n = true\n", "2 or more"), ('paper_n = "5"\n', "2 or more")):
        path.write_text(text.replace("paper_n = 5\n", bad), encoding="utf-8")
        with pytest.raises(specs.SpecError, match=why):
            specs.parse(path)


def test_the_table3_render_holds_the_paper_s_gaps(tmp_path):
    """A render from nothing stored (every cell of ours 'not run') still shows the paper's
    numbers and, beside them, its gaps against GDPO, in Markdown and CSV."""
    from lab import cli
    from lab.reports import reproduce

    args = cli.build_parser().parse_args(
        ["reproduce", "table3", "--render-only", "--results-dir", str(tmp_path / "results"),
         "--output-dir", str(tmp_path)])
    assert reproduce.reproduce_one("table3", args) == 0
    md = (tmp_path / "tables" / "table3.md").read_text()
    title = ("**The paper's numbers: Qwen2.5-1.5B-Instruct against GDPO (Welch 95 % interval "
             "at n = 5)**")
    assert title in md
    block = md.split(title)[1]
    assert "| MRTPO |" in block and "| GRPO |" in block and "| Base |" not in block
    assert "+0.75 [-1.36, +2.86] undecided; paired [-0.11, +1.61]..[-2.59, +4.09]; " \
           "floor 0.00417" in block
    assert pg.LEGEND in block
    csv = (tmp_path / "tables" / "table3.csv").read_text()
    assert "+0.75 [-1.36, +2.86] undecided" in csv
