"""Reports: specs, aggregation over seeds, the refusal to pool other settings, the reproduce
plan (dry run, second run), rendering, compare, figures and the steps-to-threshold statistic."""
import dataclasses
import math

import pytest

from lab import cli
from lab.reports import aggregate, figures, plan as planning, render, spec as specs
from lab.reports.aggregate import Cell
from harness.results import atomic_write_json, atomic_write_jsonl, result_path


def store(job, seed, metrics, log=None, config=None, wall=100.0, step_time=2.0):
    """A result file (and per-step log) as the trainer writes them, for one seed of a job."""
    from harness.train.store import summarise_training

    config = config or job.seed_config(seed)
    path = result_path(job.seed_config(seed))
    log = log or [{"step": 1, "reward/format": 0.1, "time/step": 2.0}]
    atomic_write_jsonl(path.with_suffix(".train.jsonl"), log)
    atomic_write_json(path, {"task": job.task, "method": job.row.method, "model": job.model_label,
                             "seed": seed, "metrics": metrics, "num_eval_items": 20,
                             "train": {**summarise_training(log), "time/step/mean": step_time},
                             "wall_seconds": wall, "config": config.to_dict(), "versions": {},
                             "git_commit": "test"})
    return path


def table3_plan(tmp_path, seeds=None):
    return planning.make_plan(specs.get("table3"), "smoke", seeds, str(tmp_path))


def fill(plan, value_of):
    for job in plan.jobs:
        for s in job.missing:
            store(job, s, {"non_live_overall": value_of(job, s), "live_overall": 1.0,
                           "format_rate": 50.0})


def test_every_spec_loads_and_names_only_known_things():
    names = specs.SPECS.names()
    assert [f"table{i}" for i in range(1, 10)] == sorted(n for n in names if n.startswith("table"))
    assert [f"figure{i}" for i in range(1, 9)] == sorted(n for n in names if n.startswith("figure"))
    for name in names:
        spec = specs.get(name)  # checks methods, tasks, presets and override fields
        assert spec.title and spec.kind in specs.KINDS


@pytest.mark.model
def test_a_spec_naming_an_unknown_method_fails_with_its_path(tmp_path):
    bad = tmp_path / "tableX.toml"
    bad.write_text('kind = "benchmark"\nrows = [{ label = "A", method = "gdpoo" }]\n'
                   'columns = [{ label = "c", task = "bfcl", metric = "m" }]\n'
                   '[settings.smoke]\npreset = "smoke"\nmodels = ["tiny-random"]\n')
    with pytest.raises(specs.SpecError, match=r"tableX.toml.*Did you mean 'gdpo'"):
        specs.check(specs.parse(bad))
    bad.write_text('kind = "benchmark"\nrows = [\n')
    with pytest.raises(specs.SpecError, match="tableX.toml: not valid TOML"):
        specs.parse(bad)


def test_a_setting_pins_fields_on_its_preset_and_its_runs_use_them(tmp_path):
    pinned = tmp_path / "tableY.toml"
    pinned.write_text('kind = "benchmark"\nrows = [{ label = "GDPO", method = "gdpo" }]\n'
                      'columns = [{ label = "c", task = "bfcl", metric = "m" }]\n'
                      '[settings.smoke]\npreset = "smoke-learn-30"\n'
                      'models = ["smollm2-135m-instruct"]\noverrides = { engine = "hf" }\n')
    spec = specs.parse(pinned)
    specs.check(spec)
    plan = planning.make_plan(spec, "smoke", None, str(tmp_path))
    assert dict(plan.setting.overrides) == {"engine": "hf"}
    (job,) = plan.jobs
    assert job.config.rollout.engine == "hf" and job.config.preset == "smoke-learn-30"
    # the pin is an override of the preset: it names the setting's folder
    assert result_path(job.config).parent.name.startswith("smoke-learn-30-")
    # without one, the preset's own folder
    (plain,) = table3_plan(tmp_path).jobs[2:3]
    assert result_path(plain.config).parent.name == "smoke-learn-30"
    bad = tmp_path / "tableX.toml"
    bad.write_text('kind = "benchmark"\nrows = [{ label = "A", method = "gdpo" }]\n'
                   'columns = [{ label = "c", task = "bfcl", metric = "m" }]\n'
                   '[settings.smoke]\npreset = "smoke"\nmodels = ["tiny-random"]\n'
                   'overrides = { engin = "hf" }\n')
    with pytest.raises(specs.SpecError, match=r"tableX.toml: setting 'smoke' overrides unknown"
                                              r" config field 'engin'"):
        specs.check(specs.parse(bad))


def test_table9_from_the_presets_matches_the_paper():
    from lab.reports.tables import preset_rows

    spec = specs.get("table9")
    ours = preset_rows(spec.raw["presets"])
    assert spec.paper and all(ours[k] == v for k, v in spec.paper.items())


def test_paper_cells_parse_as_printed():
    assert specs.paper_cell("74.24 ±1.26") == (74.24, 1.26)
    mean, std = specs.paper_cell("62.38")
    assert mean == 62.38 and math.isnan(std)
    assert specs.paper_cell("–") is None


def test_cells_are_mean_sample_std_and_n_over_seeds(tmp_path):
    plan = table3_plan(tmp_path)
    fill(plan, lambda job, s: {"GDPO": [10.0, 20.0, 30.0], "MRTPO": [30.0, 40.0, 50.0]}
         .get(job.row.label, [5.0, 5.0, 5.0])[s])
    grids = __import__("lab.reports.tables", fromlist=["x"]).benchmark_grids(
        table3_plan(tmp_path))
    ours = grids[0]
    col = ours.columns.index("Overall")  # the first Overall is non-live
    by_row = dict(ours.rows)
    gdpo, mrtpo, base = by_row["GDPO"][col], by_row["MRTPO"][col], by_row["Base"][col]
    assert (gdpo.mean, gdpo.std, gdpo.n) == (20.0, 10.0, 3)  # sample std of 10, 20, 30
    assert (mrtpo.mean, mrtpo.n) == (40.0, 3) and base.n == 1  # the base row has one seed
    assert gdpo.text() == "20.00 ± 10.00" and base.text() == "5.00"
    best = ours.best()[col]
    assert best == {[label for label, _ in ours.rows].index("MRTPO")}
    assert "**40.00 ± 10.00**" in render.markdown(ours)
    assert any(g.title.startswith("The paper's numbers: Qwen2.5-1.5B") for g in grids)


def test_seeds_made_with_other_settings_are_never_pooled(tmp_path):
    from dataclasses import replace

    plan = table3_plan(tmp_path)
    job = next(j for j in plan.jobs if j.row.label == "GDPO")
    store(job, 0, {"non_live_overall": 1.0})
    other = job.seed_config(1)
    other = replace(other, training=replace(other.training, lr=3e-4))
    store(job, 1, {"non_live_overall": 2.0}, config=other)
    with pytest.raises(ValueError, match=r"seed1.json was made with other settings.*'lr'"):
        table3_plan(tmp_path)
    paths = [result_path(job.seed_config(s)) for s in (0, 1)]
    assert "lr" in aggregate.settings_differ(paths)
    with pytest.raises(ValueError, match="not pooled"):
        aggregate.check_poolable(paths)


def test_dry_run_lists_exactly_the_missing_runs(tmp_path, capsys):
    plan = table3_plan(tmp_path)
    gdpo = next(j for j in plan.jobs if j.row.label == "GDPO")
    for s in (0, 1):
        store(gdpo, s, {"non_live_overall": 1.0}, wall=400.0)
    assert cli.main(["reproduce", "table3", "--dry-run", "--results-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[1]: line for line in out.splitlines() if line.startswith("  bfcl")}
    assert "stored seeds [0, 1], to run [2]" in lines["GDPO"]
    assert "stored seeds [], to run [0, 1, 2]" in lines["MRTPO"]
    assert "stored seeds [], to run [0]" in lines["Base"]
    assert "8 run(s) to do, about" in out  # 1 + 3 + 1 + 3, estimated from the stored seeds
    todo = {(j.row.label, s) for j, s in table3_plan(tmp_path).to_run()}
    assert ("GDPO", 2) in todo and ("GDPO", 0) not in todo and len(todo) == 8


def test_the_estimate_prefers_stored_seeds_that_evaluated_the_same_subset(tmp_path):
    from dataclasses import replace

    plan = table3_plan(tmp_path)
    gdpo = next(j for j in plan.jobs if j.row.label == "GDPO")
    store(gdpo, 0, {"non_live_overall": 1.0}, wall=100.0)
    full = gdpo.seed_config(1)
    full = replace(full, task=replace(full.task, eval_limit=0))
    # the same method on the whole benchmark: 50 times longer, stored in its own folder
    store(planning.Job(gdpo.row, gdpo.model_label, gdpo.task, full, (1,)), 1,
          {"non_live_overall": 1.0}, wall=5000.0)
    seconds, unknown = planning.estimate_seconds(table3_plan(tmp_path), str(tmp_path))
    # fixed part: 100 s less 30 steps * 2 s = 40 s (the full-benchmark seed would make it
    # 2490 s); 8 missing trained runs of 30 steps and the Base run of none
    assert unknown == 0 and seconds == pytest.approx(8 * (40.0 + 30 * 2.0) + 40.0)


def test_a_second_invocation_runs_nothing_and_renders(tmp_path, capsys, monkeypatch):
    import harness.launch

    fill(table3_plan(tmp_path), lambda job, s: 10.0 + s)

    def no_runs(*a, **k):
        raise AssertionError("reproduce started a run although every seed is stored")

    monkeypatch.setattr(harness.launch, "run_seeds", no_runs)
    args = ["reproduce", "table3", "--results-dir", str(tmp_path), "--output-dir", str(tmp_path)]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "0 run(s) to do" in out and "SMOKE numbers" in out
    md = (tmp_path / "tables" / "table3.md").read_text()
    assert "11.00 ± 1.00" in md  # seeds 0, 1, 2 -> 10, 11, 12
    # with more seeds asked than stored, --render-only renders what is there and runs nothing
    assert cli.main([*args, "--seeds", "4", "--render-only"]) == 0
    assert "to run [3]" in capsys.readouterr().out
    assert "11.00 ± 1.00" in (tmp_path / "tables" / "table3.md").read_text()
    csv_lines = (tmp_path / "tables" / "table3.csv").read_text().splitlines()
    assert csv_lines[0].startswith("block,row,column,mean,std,n")
    assert any(",GDPO,Non-Live Overall,11.0000,1.0000,3," in line for line in csv_lines)
    tex = (tmp_path / "tables" / "table3.tex").read_text()
    assert r"\multicolumn{5}{c}{Non-Live}" in tex and r"$\pm$" in tex


def test_cells_without_data_say_what_they_need(tmp_path):
    from lab.reports.tables import benchmark_grids

    plan = planning.make_plan(specs.get("table1"), "smoke", 1, str(tmp_path))
    blocked = [j for j in plan.jobs if j.task == "text2sql"]
    assert blocked and all("--data-dir" in j.blocked for j in blocked)
    assert not any(j.blocked for j in plan.jobs if j.task == "spider-mini")
    grid = benchmark_grids(plan)[0]
    cells = dict(grid.rows)["GDPO"]
    assert cells[grid.columns.index("Dev")].text() == "needs --data-dir"
    assert cells[grid.columns.index("spider-mini")].text() == "not run"


def test_paper_setting_names_every_missing_model_before_starting(tmp_path, capsys, monkeypatch):
    import harness.launch

    monkeypatch.setattr(harness.launch, "run_seeds", lambda *a, **k: pytest.fail("ran"))
    rc = cli.main(["reproduce", "table3", "--preset", "paper", "--model-dir", str(tmp_path),
                   "--results-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 2
    assert "Qwen2.5-1.5B-Instruct" in out and "Qwen2.5-3B-Instruct" in out
    assert "holds no HF model" in out


def test_best_marks_the_top_mean_and_ties_but_not_a_column_of_equals():
    a, b, c = Cell(((0, 1.0),)), Cell(((0, 2.0),)), Cell(((0, 2.0),))
    assert aggregate.best_rows([a, b, c]) == {1, 2}
    assert aggregate.best_rows([a, Cell(((0, 1.0),))]) == set()
    assert aggregate.best_rows([a, Cell(note="needs --data-dir")]) == set()


def test_mean_column_is_the_per_seed_mean_of_the_row():
    a = Cell(((0, 10.0), (1, 20.0)))
    b = Cell(((0, 30.0), (1, 40.0)))
    avg = aggregate.mean_of_columns([a, b, Cell(note="needs DATA_DIR/muldimif")])
    assert avg.values == ((0, 20.0), (1, 30.0))


def test_compare_gives_the_paired_per_seed_difference(tmp_path, capsys):
    plan = table3_plan(tmp_path)
    jobs = {j.row.label: j for j in plan.jobs}
    for s, (g, m) in enumerate([(10.0, 13.0), (20.0, 21.0), (30.0, 35.0)]):
        store(jobs["GDPO"], s, {"non_live_overall": g, "live_overall": 0.0, "format_rate": 1.0},
              step_time=2.0)
        store(jobs["MRTPO"], s, {"non_live_overall": m, "live_overall": 0.0, "format_rate": 1.0},
              step_time=3.0)
    folders = [str(result_path(jobs[k].config).parent) for k in ("MRTPO", "GDPO")]
    assert cli.main(["compare", *folders]) == 0
    out = capsys.readouterr().out
    assert "| mrtpo/smoke-learn-30 | **23.00 ± 11.14** |" in out  # best mean: bold
    # seconds per step: smaller is better, so GDPO's 2.00 is the bold one, not MRTPO's 3.00
    assert "| **2.00 ± 0.00** | 3 |" in out and "| 3.00 ± 0.00 | 3 |" in out
    # per seed 3, 1, 5: mean 3, sd 2, t(0.975, 2) * 2 / sqrt(3) = 4.968 -> [-1.97, +7.97],
    # covers 0: undecided; MRTPO above GDPO in 6 of 9 seed pairs -> P = 0.67
    # p = 0.122 (t = 2.598, 2 df); the other columns are equal on every seed: no test, so
    # the family is this one comparison and Holm leaves it as it is
    assert "| mrtpo/smoke-learn-30 | +3.00 [−1.97, +7.97]? P=0.67 p=0.122 (Holm 0.122) |" in out
    # these results were stored without their responses: no interval over items
    assert "over seeds and items" not in out


def test_steps_to_threshold_and_its_median_over_seeds():
    log = [{"step": i + 1, "reward/format": v} for i, v in enumerate([0.2, 0.9, 0.1, 0.8, 0.9])]
    assert figures.steps_to_threshold(log, "reward/format", 0.8) == 2
    # trailing mean of 2: 0.2, 0.55, 0.5, 0.45, 0.85 -> step 5
    assert figures.steps_to_threshold(log, "reward/format", 0.8, window=2) == 5
    assert figures.steps_to_threshold(log, "reward/format", 0.95) is None
    # a partial window at the start never counts: 0.9 alone at step 1 is not a mean of 2
    start_high = [{"step": i + 1, "reward/format": v} for i, v in enumerate([0.9, 0.1, 0.1])]
    assert figures.steps_to_threshold(start_high, "reward/format", 0.8, window=2) is None
    assert figures.quantile([1.0, 2.0, 3.0, 4.0], 0.25) == 1.75


def test_figure4_from_stored_logs(tmp_path):
    fplan = planning.make_plan(specs.get("figure4"), "smoke", 2, str(tmp_path))
    for job in fplan.jobs:
        for s in job.missing:
            rise = {"grpo": 0.02, "gdpo": 0.05, "mrtpo": 0.11}[job.row.method]
            log = [{"step": t, "reward/format": min(1.0, rise * t + 0.1 * s),
                    "reward/correctness": -3 + 0.1 * t} for t in range(1, 21)]
            store(job, s, {"non_live_overall": 10.0, "live_overall": 5.0, "format_rate": 80.0},
                  log=log)
    fplan = planning.make_plan(specs.get("figure4"), "smoke", 2, str(tmp_path))
    files, summary = figures.curves(fplan, tmp_path / "figures")
    png = files[0].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and files[1].read_bytes()[:4] == b"%PDF"
    # mrtpo: the trailing mean of 5 steps of 0.11t (+0.1 on seed 1) first reaches 0.8 at step
    # 10 (seed 0) and 9 (seed 1): Kaplan-Meier median 9.5, and two seeds make no band
    assert "- mrtpo: 9.5 [9, not reached] (2 of 2 seeds reached it); per seed: 10, 9" in summary
    assert "(paper: 13)" in summary
    # grpo's 0.02t never reaches it in 20 steps: censored at 20
    assert "- grpo: not reached by any of 2 seeds; per seed: 20+, 20+" in summary
    assert "- mrtpo against gdpo: log-rank p = " in summary and "per shared seed" not in summary


def test_figure5_names_the_methods_stored_without_evaluations_during_training(tmp_path):
    """Figure 5's setting evaluates after every step; a method whose seeds were stored by a
    run without --eval-every has no curve over training, and the summary says so and how to
    remake it (never a silent gap)."""
    fplan = planning.make_plan(specs.get("figure5"), "smoke", 1, str(tmp_path))
    for job in fplan.jobs:
        evaluated = job.row.method != "gdpo"
        log = [{"step": t, "response_length": 50.0 + t,
                **({"eval/spider-mini": 5.0 * t} if evaluated and t < 3 else {})}
               for t in range(1, 4)]
        store(job, 0, {"spider-mini": 15.0}, log=log)
    fplan = planning.make_plan(specs.get("figure5"), "smoke", 1, str(tmp_path))
    _, summary = figures.curves(fplan, tmp_path / "figures")
    note = next(line for line in summary.splitlines() if line.startswith("Without evaluations"))
    assert note.endswith("the training unchanged): gdpo. Their benchmark numbers over "
                         "training are not drawn.")
    assert "`harness run ... --eval-every 1 --force`" in note


def test_figure6_reads_the_stored_replay_diagnostics(tmp_path):
    fplan = planning.make_plan(specs.get("figure6"), "smoke", 1, str(tmp_path))
    for job in fplan.jobs:
        log = [{"step": t, "diag/format/top1": 0.2, "diag/format/top5": 0.4,
                "diag/format/top10": 0.6, "diag/format/part/tags": 0.7 + 0.1 * (t - 1),
                "diag/format/part/answer": 0.1,
                # a span-only diagnostic (no shares to draw), and a reward replayed at step 2
                # only (no group had its signal at step 1)
                "diag/execution:diff/span_ratio": 2.0,
                **({"diag/execution/top1": 0.3, "diag/execution/top5": 0.5,
                    "diag/execution/top10": 0.7, "diag/execution/part/answer": 0.9}
                   if t == 2 else {})} for t in (1, 2)]
        store(job, 0, {"spider-mini": 1.0, "non_live_overall": 1.0}, log=log)
    files, summary = figures.diagnostics(
        planning.make_plan(specs.get("figure6"), "smoke", 1, str(tmp_path)), tmp_path)
    assert files[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # mean over the steps: tags (0.7 + 0.8) / 2
    assert "- bfcl, format: top 1/5/10 % tokens hold 0.20 / 0.40 / 0.60" in summary
    assert "tags 0.75" in summary and "answer 0.10" in summary
    assert "tags 0.75 (mean of 2 steps of 1 of 1 seeds)" in summary
    assert ("- bfcl, execution: top 1/5/10 % tokens hold 0.30 / 0.50 / 0.70 of the distance; "
            "parts answer 0.90 (mean of 1 steps of 1 of 1 seeds)") in summary
    assert "execution:diff" not in summary and "nan" not in summary


@pytest.mark.model
def test_explain_figures_come_from_a_stored_run(tmp_path):
    fplan = planning.make_plan(specs.get("figure2"), "smoke", 1, str(tmp_path))
    store(fplan.jobs[0], 0, {"non_live_overall": 0.0})
    fplan = planning.make_plan(specs.get("figure2"), "smoke", 1, str(tmp_path))
    # the run's own starting model is its warm start; the 2-layer test model stands in
    files, summary = figures.explained(fplan, tmp_path, model="tiny-random")
    assert [f.name for f in files] == ["figure2.png", "figure2.html"]
    assert files[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "MRTPO" in files[1].read_text() and "explain --run" in summary
    assert sorted(f.name for f in tmp_path.iterdir() if f.is_file()) == ["figure2.html",
                                                                          "figure2.png"]
    assert not (tmp_path / "explain").exists()  # explain's own copies are not left beside


def test_table4_pools_each_constraint_type_over_steps_and_seeds(tmp_path, capsys):
    tplan = planning.make_plan(specs.get("table4"), "smoke", 2, str(tmp_path))
    (job,) = tplan.jobs
    logs = {0: [{"step": 1, "diag/type/title/dist": 0.4, "diag/type/title/tok": 0.05,
                 "diag/type/title/n": 3.0},
                {"step": 2, "diag/type/title/dist": 0.2, "diag/type/title/tok": 0.05,
                 "diag/type/title/n": 1.0, "diag/type/keyword/dist": 0.1,
                 "diag/type/keyword/tok": 0.02, "diag/type/keyword/n": 2.0}],
            1: [{"step": 1, "diag/type/title/dist": 0.3, "diag/type/title/tok": 0.03,
                 "diag/type/title/n": 2.0, "diag/type/all_violated/dist": 0.1,
                 "diag/type/all_violated/tok": 0.1, "diag/type/all_violated/n": 6.0}]}
    for s, log in logs.items():
        store(job, s, {"prompt_strict": 1.0}, log=log)
    assert cli.main(["reproduce", "table4", "--seeds", "2", "--results-dir", str(tmp_path),
                     "--output-dir", str(tmp_path)]) == 0
    md = (tmp_path / "tables" / "table4.md").read_text()
    # title: dist (0.4*3 + 0.2 + 0.3*2) / 6 = 33.3 %, tok (0.05*4 + 0.03*2) / 6 = 4.3 %
    assert "| Title | 33.3 | 4.3 | 7.7 | 6 |" in md
    assert "| Keyword | – | – | – | 2 |" in md  # fewer than five instances
    assert "| End phrase | – | – | – | 0 |" in md
    assert "| All violated | 10.0 | 10.0 | 1.0 | 6 |" in md  # the pooled rows
    assert "The paper's numbers: Qwen2.5-7B-Instruct" in md and "| Title | 24.5 | 3.2 | 7.6 |" in md


def fixture_log(steps=3):
    """Every per-step key a table or figure reads."""
    return [{"step": t, "reward/format": 0.3 * t, "reward/correctness": -3 + t,
             "response_length": 50.0 + t, "diag/format/top1": 0.1, "diag/format/top5": 0.3,
             "diag/format/top10": 0.5, "diag/format/part/tags": 0.6,
             "diag/type/title/dist": 0.3, "diag/type/title/tok": 0.05, "diag/type/title/n": 2.0}
            for t in range(1, steps + 1)]


@pytest.mark.model
@pytest.mark.parametrize("name", specs.SPECS.names())
def test_every_spec_renders_from_fixtures(name, tmp_path, monkeypatch):
    import harness.launch
    from lab.reports import reproduce

    monkeypatch.setattr(harness.launch, "run_seeds", lambda *a, **k: pytest.fail("ran"))
    spec = specs.get(name)
    if spec.settings:
        fplan = planning.make_plan(spec, "smoke", 1, str(tmp_path))
        metrics = {c.metric: 10.0 + i for i, c in enumerate(spec.columns) if c.metric}
        metrics.update({m: 5.0 for p in spec.raw.get("evaluated", ()) for m in p["metrics"]})
        for job in fplan.jobs:
            if not job.blocked:
                for s in job.missing:
                    store(job, s, metrics, log=fixture_log())
    if spec.kind == "explain":
        # the 2-layer random model writes no well-formed answer: a spec's `where` (which
        # response to show) cannot match here; tests/test_explain.py checks it
        spec = dataclasses.replace(spec, raw={k: v for k, v in spec.raw.items() if k != "where"})
        files, _ = figures.explained(planning.make_plan(spec, "smoke", 1, str(tmp_path)),
                                     tmp_path / "figures", model="tiny-random")
    else:
        args = cli.build_parser().parse_args(
            ["reproduce", name, "--seeds", "1", "--results-dir", str(tmp_path),
             "--output-dir", str(tmp_path)])
        assert reproduce.reproduce_one(name, args) == 0
        folder = tmp_path / ("figures" if name.startswith("figure") else "tables")
        files = sorted(folder.glob(f"{name}.*"))
    assert files and all(f.stat().st_size > 0 for f in files)
    if name.startswith("table"):
        assert {f.suffix for f in files} == {".md", ".csv", ".tex"}
        md = (tmp_path / "tables" / f"{name}.md").read_text()
        assert spec.title in md
        if spec.kind == "benchmark":  # a stored cell shows its value, a blocked one its need
            assert any(f"{v:.2f}" in md for v in metrics.values())
    else:
        assert any(f.suffix == ".png" and f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
                   for f in files)


def test_table8_holds_every_method_of_the_paper_and_its_registry_text():
    import methods
    from lab.reports.tables import methods_grid

    grid = methods_grid(specs.get("table8"))
    rows = dict(grid.rows)
    assert list(rows) == ["gdpo", "saw", "dara", "dvao", "sa-mrpo", "gd2po", "mrtpo", "verpo"]
    assert rows["verpo"][1].text().endswith("extra passes: evidence")
    for name, cells in rows.items():
        assert cells[0].text() == methods.get(name).help
        assert cells[2].text() == methods.get(name).source


def test_a_log_column_is_the_mean_over_steps_and_marks_no_best(tmp_path):
    from lab.reports import tables

    plan = planning.make_plan(specs.get("table7"), "smoke", None, str(tmp_path))
    jobs = [j for j in plan.jobs if j.task == "spider-mini"]
    for i, job in enumerate(jobs):
        for s in job.missing:
            store(job, s, {"spider-mini": 10.0 * i},
                  log=[{"step": 1, "alloc/kept": 0.9 - 0.1 * i, "diag/format/span_ratio": 2.0},
                       {"step": 2, "alloc/kept": 0.7 - 0.1 * i, "diag/format/span_ratio": 4.0,
                        "diag/executable/span_ratio": float("nan")}])
    grid = tables.benchmark_grids(planning.make_plan(specs.get("table7"), "smoke", None,
                                                     str(tmp_path)))[0]
    kept = grid.columns.index("kept")
    rows = dict(grid.rows)
    assert rows["0.25"][kept].values == ((0, 0.8), (1, 0.8), (2, 0.8))  # (0.9 + 0.7) / 2
    assert rows["0.75"][kept].mean == pytest.approx(0.6)
    assert grid.best()[kept] == set()  # a diagnostic: no row is "best"
    assert grid.best()[grid.columns.index("spider-mini")] == {2}
    fmt = grid.columns.index("format")
    assert rows["0.5"][fmt].mean == pytest.approx(3.0)
    assert rows["0.5"][grid.columns.index("executable")].note == "–"  # NaN on every step


def test_table4_gives_an_interval_over_seeds_where_two_have_enough_instances(tmp_path):
    tplan = planning.make_plan(specs.get("table4"), "smoke", 2, str(tmp_path))
    (job,) = tplan.jobs
    for s, (dist, tok) in enumerate([(0.4, 0.05), (0.3, 0.03)]):  # ratios 8 and 10
        store(job, s, {"prompt_strict": 1.0},
              log=[{"step": 1, "diag/type/title/dist": dist, "diag/type/title/tok": tok,
                    "diag/type/title/n": 5.0}])
    assert cli.main(["reproduce", "table4", "--seeds", "2", "--results-dir", str(tmp_path),
                     "--output-dir", str(tmp_path)]) == 0
    md = (tmp_path / "tables" / "table4.md").read_text()
    # pooled: dist 35.0 %, tok 4.0 %, ratio 8.75; per seed 8 and 10: mean 9, se 1,
    # t(0.975, 1) = 12.706 -> [-3.7, 21.7]
    assert "| Title | 35.0 | 4.0 | 8.8 [-3.7, 21.7] | 10 |" in md


def test_compare_refuses_runs_that_differ_in_more_than_the_method(tmp_path, capsys):
    plan = table3_plan(tmp_path)
    jobs = {j.row.label: j for j in plan.jobs}
    metrics = {"non_live_overall": 10.0, "live_overall": 0.0, "format_rate": 1.0}
    store(jobs["GDPO"], 0, metrics)
    other = dataclasses.replace(jobs["MRTPO"].seed_config(0), training=dataclasses.replace(
        jobs["MRTPO"].config.training, steps=3), task=dataclasses.replace(
        jobs["MRTPO"].config.task, eval_limit=300))
    store(jobs["MRTPO"], 0, metrics, config=other)
    folders = [str(result_path(jobs[k].config).parent) for k in ("MRTPO", "GDPO")]
    assert cli.main(["compare", *folders]) == 2
    err = capsys.readouterr().err
    assert "differ in more than the method" in err
    assert "steps: mrtpo/smoke-learn-30 3, gdpo/smoke-learn-30 30" in err
    assert "eval_limit: mrtpo/smoke-learn-30 300" in err
    assert cli.main(["compare", *folders, "--allow-different", "steps"]) == 2
    assert "steps:" not in capsys.readouterr().err
    assert cli.main(["compare", *folders, "--allow-different", "steps,eval-limit"]) == 0


def test_compare_refuses_an_unknown_metric(tmp_path, capsys):
    plan = table3_plan(tmp_path)
    jobs = {j.row.label: j for j in plan.jobs}
    store(jobs["GDPO"], 0, {"non_live_overall": 10.0, "format_rate": 1.0})
    folder = str(result_path(jobs["GDPO"].config).parent)
    assert cli.main(["compare", folder, "--metrics", "format_rate,non_live_overal"]) == 2
    err = capsys.readouterr().err
    assert "--metrics non_live_overal: not stored" in err and "non_live_overall" in err
    assert cli.main(["compare", folder, "--metrics", "format_rate"]) == 0


def test_a_log_column_is_checked_against_the_seeds_result(tmp_path):
    """A training log that is not the seed's (its mean differs from the one the result stored
    when the seed ran) stops the table, naming the file."""
    from lab.reports import tables

    plan = planning.make_plan(specs.get("table7"), "smoke", 1, str(tmp_path))
    for job in plan.jobs:
        for s in job.missing:
            path = store(job, s, {"spider-mini": 10.0}, log=[{"step": 1, "alloc/kept": 0.9}])
    atomic_write_jsonl(path.with_suffix(".train.jsonl"), [{"step": 1, "alloc/kept": 0.5}])
    with pytest.raises(ValueError, match=r"seed0\.train\.jsonl: its mean alloc/kept is 0\.5"):
        tables.benchmark_grids(planning.make_plan(specs.get("table7"), "smoke", 1,
                                                  str(tmp_path)))


def test_reproduce_all_runs_the_figures_that_evaluate_during_training_first():
    from lab.reports.reproduce import all_order

    names = sorted(specs.SPECS.names(), key=lambda n: all_order(n, "smoke"))
    # figure4 and figure5 evaluate during training (eval_every): a table seed of the same
    # settings is the same run, so theirs must be the ones stored
    assert names[:2] == ["figure4", "figure5"]
    assert names[2:5] == ["table1", "table2", "table3"] and names[-1] == "figure8"


def test_a_dry_run_writes_nothing(tmp_path, capsys):
    # Tables 8 and 9 need no runs: a dry run said so by rendering them over the committed ones
    out = tmp_path / "out"
    assert cli.main(["reproduce", "all", "--dry-run", "--results-dir", str(tmp_path / "r"),
                     "--output-dir", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "table8: needs no runs; would write" in printed and "table9: needs no" in printed
    assert not out.exists() and not (tmp_path / "r").exists()
    assert cli.main(["reproduce", "table9", "--results-dir", str(tmp_path / "r"),
                     "--output-dir", str(out)]) == 0
    assert (out / "tables" / "table9.md").is_file()


def test_compare_curves_pairs_each_seed_s_training_means(tmp_path, capsys):
    """--curves: each seed's mean of a per-step metric over all steps and over the last third,
    paired by seed against the reference like the metrics (by hand: seed 0 gives 0.30 and
    0.50, seed 1 0.40 and 0.70 for MRTPO; GDPO 0.20 and 0.20 on both)."""
    plan = table3_plan(tmp_path)
    jobs = {j.row.label: j for j in plan.jobs}
    metrics = {"non_live_overall": 10.0, "live_overall": 0.0, "format_rate": 1.0}
    logs = {("MRTPO", 0): [0.1, 0.3, 0.5], ("MRTPO", 1): [0.1, 0.4, 0.7],
            ("GDPO", 0): [0.2, 0.2, 0.2], ("GDPO", 1): [0.2, 0.2, 0.2]}
    for (row, seed), values in logs.items():
        store(jobs[row], seed, metrics, log=[{"step": i + 1, "reward/format": v, "loss": -v}
                                             for i, v in enumerate(values)])
    folders = [str(result_path(jobs[k].config).parent) for k in ("MRTPO", "GDPO")]
    assert cli.main(["compare", *folders, "--curves", "reward/format,loss"]) == 0
    out = capsys.readouterr().out
    assert "train reward/format, last third" in out and "train loss" in out
    assert "0.35 ± 0.07" in out  # MRTPO's whole-run means 0.30 and 0.40
    assert "+0.40 [" in out  # last third: 0.5 - 0.2 and 0.7 - 0.2, mean +0.40
    assert cli.main(["compare", *folders, "--curves", "reward/formt"]) == 2
    assert "--curves reward/formt: seed 0's training log has no such metric" in \
        capsys.readouterr().err
