"""The CLI around the engine: list, score, the evaluation subset, clear errors."""
import json

import pytest

from lab import cli
from harness.config import resolve
from harness.data import stratified_subset
from tasks import TASKS


def test_list_shows_every_registry(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    for name in ("gdpo", "grpo", "bfcl", "bfcl-live", "rlla", "tools-synth", "smoke", "paper-tool"):
        assert name in out


def test_score_agrees_with_the_task_scorer(tmp_path, capsys):
    task = TASKS.get("bfcl-simple-python")
    items = task.load_eval(None)[:6]
    # three gold answers and three broken ones
    responses = [ex.metadata["gold_output"] for ex in items[:3]] + ["no call", "<tool_call>\n{",
                                                                    ""]
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps({"id": ex.id, "response": r}) + "\n"
                             for ex, r in zip(items, responses)))
    out_json = tmp_path / "scores.json"
    assert cli.main(["score", "--task", "bfcl-simple-python", "--predictions", str(preds),
                     "--output", str(out_json), "--partial"]) == 0
    expected = task.score(items, responses)["metrics"]
    stored = json.loads(out_json.read_text())["metrics"]
    assert stored == expected
    assert stored["format_rate"] == pytest.approx(50.0)  # 3 of 6 parse
    assert "PARTIAL, 6 of 400 items scored" in capsys.readouterr().out


def test_score_names_the_file_and_line_of_bad_input(tmp_path, capsys):
    preds = tmp_path / "preds.jsonl"
    preds.write_text('{"id": "simple_python_0", "response": "x"}\n{not json\n')
    assert cli.main(["score", "--task", "bfcl", "--predictions", str(preds)]) == 2
    assert f"{preds}:2" in capsys.readouterr().err
    preds.write_text('{"id": "no-such-item", "response": "x"}\n')
    assert cli.main(["score", "--task", "bfcl", "--predictions", str(preds)]) == 2
    assert "not items of task 'bfcl'" in capsys.readouterr().err


def test_eval_subset_is_fixed_and_covers_every_category():
    items = TASKS.get("bfcl").load_eval(None)
    a = stratified_subset(items, 40, seed=1234)
    b = stratified_subset(items, 40, seed=1234)
    assert [x.id for x in a] == [x.id for x in b] and len(a) == 40
    cats = {x.metadata["category"] for x in a}
    assert len(cats) == 10  # 4 items from each of the 10 categories
    assert [x.id for x in stratified_subset(items, 40, seed=7)] != [x.id for x in a]


@pytest.mark.model
def test_published_training_set_needs_its_folder(tmp_path, capsys):
    assert cli.main(["run", "--method", "gdpo", "--task", "bfcl", "--train-data", "rlla"]) == 2
    assert "--data-dir" in capsys.readouterr().err
    # a folder without the published files: the error lists what is expected
    from harness.run import of_config

    run = of_config(resolve("smoke", {"train_data": "rlla", "data_dir": str(tmp_path)}))
    assert "train.parquet" in run.train_problem


def test_the_training_set_asked_for_is_read_or_refused_never_swapped(tmp_path):
    from harness.data import choose_train_set

    assert choose_train_set(resolve("smoke", {})).name == "tools-synth"
    # a data folder without RLLA (e.g. one holding Spider only) is refused, naming the set, its
    # layout and the way to ask for the offline generator ...
    with pytest.raises(ValueError, match="rlla.*does not hold it.*--train-data tools-synth"):
        choose_train_set(resolve("smoke", {"data_dir": str(tmp_path)}))
    assert choose_train_set(resolve("smoke", {"data_dir": str(tmp_path),
                                              "train_data": "tools-synth"})).name == "tools-synth"
    with pytest.raises(ValueError, match="does not exist"):
        choose_train_set(resolve("smoke", {"data_dir": str(tmp_path / "nowhere")}))
    # ... and one that holds RLLA's train file reads the published set
    (tmp_path / "train.parquet").write_bytes(b"")
    assert choose_train_set(resolve("smoke", {"data_dir": str(tmp_path)})).name == "rlla"
    for task, published, path in (("spider-dev", "spider", "spider/train_spider.json"),
                                  ("ifeval", "hir", "HIR_trainv1.jsonl")):
        here = tmp_path / task
        here.mkdir()
        with pytest.raises(ValueError, match=f"{published}.*does not hold it"):
            choose_train_set(resolve("smoke", {"task": task, "data_dir": str(here)}))
        (here / path).parent.mkdir(parents=True, exist_ok=True)
        (here / path).write_text("[]")
        assert choose_train_set(resolve("smoke", {"task": task, "data_dir": str(here)})).name \
            == published
    # a paper preset reads its published set only: no folder, or a generator asked for, is refused
    with pytest.raises(ValueError, match="preset 'paper-tool' trains on it"):
        choose_train_set(resolve("paper-tool", {}))
    with pytest.raises(ValueError, match="published data only"):
        choose_train_set(resolve("paper-tool", {"train_data": "tools-synth"}))


def test_seed_list_runs_exactly_the_seeds_given(capsys):
    parser = cli.build_parser()
    assert parser.parse_args(["run", "--seed-list", "2,0"]).seed_list == [2, 0]
    assert parser.parse_args(["run", "--seeds", "3"]).seed_list is None
    for bad in ("1,x", "1,1", "-1", ","):
        with pytest.raises(SystemExit):
            parser.parse_args(["run", "--seed-list", bad])
        assert "--seed-list" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # one way of naming the seeds at a time
        parser.parse_args(["run", "--seeds", "2", "--seed-list", "1"])


def test_a_run_whose_benchmark_is_missing_fails_before_ray(monkeypatch, capsys):
    # the benchmark is first read by the workers after the last training step: a run without
    # its data must fail in the driver, in seconds, not after the training
    import ray

    from lab import cli

    started = []
    monkeypatch.setattr(ray, "init", lambda *a, **k: started.append(a))
    rc = cli.main(["run", "--method", "gdpo", "--task", "spider-dev", "--preset", "smoke",
                   "--results-dir", "/nonexistent/never-written"])
    assert rc == 2 and started == []
    assert "spider-dev is read from --data-dir" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--seeds", "0"], "give 1 or more seeds"),
    (["--seeds", "-1"], "give 1 or more seeds"),
    (["--eval-limit", "-5"], "eval_limit is -5; use 0 (the whole benchmark)"),
])
def test_meaningless_values_fail_before_any_work(argv, message, monkeypatch, capsys):
    import ray

    from lab import cli

    started = []
    monkeypatch.setattr(ray, "init", lambda *a, **k: started.append(a))
    try:
        rc = cli.main(["run", "--method", "gdpo", "--task", "bfcl", "--preset", "smoke",
                       "--results-dir", "/nonexistent/never-written", *argv])
    except SystemExit as exc:  # argparse refuses a bad type with exit status 2
        rc = exc.code
    assert rc == 2 and started == []
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"], ["list"], ["compare"]])
def test_help_list_and_compare_do_not_import_torch(argv, tmp_path):
    # they build every method's options and read JSON: torch would cost them seconds
    import subprocess
    import sys

    if argv == ["compare"]:
        from harness.results import atomic_write_json

        for method in ("gdpo", "mrtpo"):
            folder = tmp_path / "bfcl" / method / "m" / "smoke"
            atomic_write_json(folder / "seed0.json", {
                "task": "bfcl", "method": method, "model": "m", "seed": 0,
                "metrics": {"format_rate": 1.0}, "num_eval_items": 20, "train": {},
                "wall_seconds": 1.0, "versions": {}, "git_commit": "test",
                "config": resolve("smoke", {"method": method}).to_dict()})
            argv = [*argv, str(folder)]
    code = ("import sys\nfrom lab import cli\ntry:\n    rc = cli.main(sys.argv[1:])\n"
            "except SystemExit as e:\n    rc = e.code\n"
            "heavy = [m for m in ('torch', 'transformers', 'ray', 'scipy.stats') "
            "if m in sys.modules]\nassert rc == 0 and not heavy, (rc, heavy)\n")
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_run_without_a_method_or_task_starts_nothing(monkeypatch, capsys):
    import ray

    started = []
    monkeypatch.setattr(ray, "init", lambda *a, **k: started.append(a))
    assert cli.main(["run"]) == 2 and started == []
    assert "say what to run: --method and --task" in capsys.readouterr().err
    assert cli.main(["run", "--method", "gdpo"]) == 2 and started == []
    assert "say what to run: --task" in capsys.readouterr().err


def test_dry_run_shows_the_resolved_settings_and_the_verdict_and_writes_nothing(tmp_path, capsys,
                                                                               monkeypatch):
    import ray

    started = []
    monkeypatch.setattr(ray, "init", lambda *a, **k: started.append(a))
    results = tmp_path / "runs"
    rc = cli.main(["run", "--method", "mrtpo", "--task", "bfcl", "--seeds", "2", "--group-size",
                   "8", "--results-dir", str(results), "--dry-run"])
    out = capsys.readouterr().out
    assert rc == 0 and started == [] and not results.exists()
    assert f"seed 1: {results}/bfcl/mrtpo/smollm2-135m-instruct/" in out and "[to run]" in out
    assert "differs from preset smoke: group_size, method, results_dir" in out
    assert "* group_size                   8" in out and "checks: passed" in out
    # a problem is reported with the rest, exit 2
    rc = cli.main(["run", "--method", "grpo", "--task", "bfcl", "--replay", "joint",
                   "--results-dir", str(results), "--dry-run"])
    out = capsys.readouterr().out
    assert rc == 2 and "checks: 1 problem(s)" in out and "--mrtpo-replay is an option of mrtpo" in out


def test_help_is_grouped_with_defaults_method_and_task_first(capsys):
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    out = capsys.readouterr().out
    lines = out.splitlines()
    # the program as it was called (from a fresh shell: the project's interpreter)
    assert lines[0] == f"usage: {cli.prog()} run --method NAME --task NAME [options]"
    assert cli.prog() in ("python -m harness", ".venv/bin/python -m harness")
    flags = [line.split()[0] for line in lines if line.startswith("  --")]
    assert flags[:2] == ["--method", "--task"]
    for group in ("what to run:", "rollouts and engine:", "evaluation:", "tracking:",
                  "output, checkpoints and resuming:"):
        assert group in lines
    assert "[smoke]" in out and "[4]" in out  # the smoke preset's G
    assert len(lines) < 300


def test_errors_are_one_line_with_hints_for_trl_names(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", "--method", "gdpo", "--task", "bfcl", "--steps", "x"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "invalid int value" in err
    assert cli.main(["run", "--method", "gdpo", "--task", "bfcl", "--gruop-size", "3",
                     "--per-device-train-batch-size", "4"]) == 2
    err = capsys.readouterr().err
    assert "did you mean --group-size" in err and "--prompts-per-step counts prompts" in err
    # TRL's names for the same quantity are aliases
    args = cli.build_parser().parse_args(["run", "--num-generations", "8", "--learning-rate",
                                          "3e-6", "--beta", "0.04",
                                          "--max-completion-length", "256"])
    assert (args.group_size, args.lr, args.kl_coef, args.max_response_tokens) == \
        (8, 3e-6, 0.04, 256)


def test_version(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("mrtpo-harness ")


def test_reproduce_help_needs_no_setup(tmp_path):
    # on a fresh clone `./reproduce.sh --help` answers at once instead of installing first
    import shutil
    import subprocess
    from pathlib import Path

    script = tmp_path / "reproduce.sh"
    shutil.copy(Path(__file__).parents[1] / "reproduce.sh", script)
    done = subprocess.run(["bash", str(script), "--help"], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0 and "Regenerate a paper table or figure" in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reproduce.sh"]  # nothing set up
