"""A user's mistakes are found before any work: before Ray starts, before a model loads, with
every problem listed together and its fix, exit status 2 and nothing written."""
import json

import pytest

from harness import preflight
from harness.run import of_config
from lab import cli
from harness.config import resolve


@pytest.fixture
def no_ray(monkeypatch):
    """Fails the test if anything starts Ray; returns the list of starts."""
    import ray

    started = []
    monkeypatch.setattr(ray, "init", lambda *a, **k: started.append(a))
    return started


def _readable() -> int:
    """What a plain open() would make under this process' umask (0644 under the usual 022)."""
    import os

    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def run(argv, capsys):
    try:
        rc = cli.main(["run", "--preset", "smoke", *argv])
    except SystemExit as exc:  # argparse's refusals
        rc = exc.code
    return rc, capsys.readouterr().err


def test_unwritable_output_folders_fail_before_ray_and_write_nothing(tmp_path, no_ray, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    rc, err = run(["--method", "gdpo", "--task", "bfcl", "--results-dir", str(blocker / "runs"),
                   "--checkpoint-dir", str(blocker / "ckpt")], capsys)
    assert rc == 2 and no_ray == []
    assert f"--results-dir {blocker / 'runs'}: {blocker} is a file" in err
    assert f"--checkpoint-dir {blocker / 'ckpt'}" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # nothing written


def test_folder_checks_create_nothing(tmp_path):
    target = tmp_path / "new" / "deeper"
    assert preflight.folder_problem(target, "--results-dir") is None
    assert not (tmp_path / "new").exists()
    (tmp_path / "f").write_text("")
    assert "is not a folder" in preflight.folder_problem(tmp_path / "f", "--x")
    assert "is a folder" in preflight.file_problem(tmp_path, "--output")
    assert preflight.file_problem(tmp_path / "scores.json", "--output") is None


@pytest.mark.parametrize("argv, owner", [
    (["--method", "grpo", "--replay", "joint"], "--mrtpo-replay is an option of mrtpo"),
    (["--method", "gdpo", "--sql-timeout", "7"], "--sql-timeout is an option of the sql tasks"),
    (["--method", "gdpo", "--judge", "http://localhost:1/v1"],
     "--judge is an option of the instruct tasks"),
    (["--method", "gdpo", "--engine", "hf", "--rollout-dtype", "float32"],
     "--rollout-dtype is an option of --engine lean, not of --engine hf"),
])
def test_options_of_another_method_family_or_engine_are_refused(argv, owner, tmp_path, no_ray,
                                                               capsys):
    rc, err = run(["--task", "bfcl", "--results-dir", str(tmp_path / "runs"), *argv], capsys)
    assert rc == 2 and no_ray == [], err
    assert owner in err
    assert not (tmp_path / "runs").exists()


def test_an_option_of_the_runs_own_method_passes():
    assert of_config(resolve("smoke", {"method": "mrtpo+saw", "mrtpo_replay": "joint"})
                     ).foreign == ()
    assert of_config(resolve("smoke", {"task": "spider-mini", "sql_timeout": 5.0})).foreign == ()
    # the check can fail: an option of another method is named (the resolution keeps it out of
    # the config, which holds its method's options only)
    from harness import run as runs

    assert "--mrtpo-replay is an option of" in runs.resolve(
        "smoke", {"method": "gdpo", "mrtpo_replay": "joint"}).foreign[0]
    with pytest.raises(ValueError, match="--mrtpo-replay is an option of mrtpo"):
        resolve("smoke", {"method": "gdpo", "mrtpo_replay": "joint"})


@pytest.mark.parametrize("flag", ["--eval-every", "--save-every"])
def test_periodic_work_beyond_the_last_step_is_refused(flag, tmp_path, no_ray, capsys):
    rc, err = run(["--method", "gdpo", "--task", "bfcl", "--steps", "4", flag, "5",
                   "--results-dir", str(tmp_path / "runs")], capsys)
    assert rc == 2 and no_ray == []
    assert f"is larger than steps (4): it would never happen; use {flag} 4 or less" in err
    assert preflight.schedule_problems(of_config(resolve("smoke", {"steps": 4,
                                                                   "eval_every": 4}))) == []


def test_every_problem_is_listed_at_once(tmp_path, no_ray, capsys):
    blocker = tmp_path / "f"
    blocker.write_text("")
    rc, err = run(["--method", "grpo", "--task", "spider-dev", "--replay", "joint",
                   "--eval-every", "9", "--results-dir", str(blocker / "x")], capsys)
    assert rc == 2 and no_ray == []
    for part in ("--mrtpo-replay is an option of mrtpo", "eval_every (9)", "--results-dir",
                 "spider-dev is read from --data-dir"):
        assert part in err


def test_a_broken_benchmark_file_is_named_before_ray(tmp_path, no_ray, capsys):
    spider = tmp_path / "spider"
    spider.mkdir()
    (spider / "dev.json").write_text('[{"db_id": "x", "question": "q", "query": "SELECT 1"')
    (spider / "tables.json").write_text("[]")
    (spider / "database").mkdir()
    rc, err = run(["--method", "gdpo", "--task", "spider-dev", "--data-dir", str(tmp_path),
                   "--results-dir", str(tmp_path / "runs")], capsys)
    assert rc == 2 and no_ray == []
    assert "dev.json" in err
    assert not (tmp_path / "runs").exists()


def test_every_reproduce_cell_passes_the_option_checks():
    """The committed specs set each option only on the rows of methods that read it."""
    from lab.reports import spec as specs
    from lab.reports.plan import make_plan

    checked = 0
    for name in specs.SPECS.names():
        spec = specs.get(name)
        if spec.kind in ("methods", "presets"):
            continue
        for setting in specs.SETTINGS:
            try:
                plan = make_plan(spec, setting, None, "results", None, None, True, False)
            except (KeyError, ValueError):
                continue  # a spec without this setting
            for job in plan.jobs:
                assert job.run.foreign == (), (name, setting, job.row.label)
                assert preflight.schedule_problems(job.run) == [], (name, setting, job.row.label)
                checked += 1
    assert checked > 100  # every table's and figure's runs, smoke and paper


def test_score_refuses_an_unwritable_output_before_scoring(tmp_path, capsys):
    preds = tmp_path / "p.jsonl"
    preds.write_text(json.dumps({"id": "simple_python_0", "response": "x"}) + "\n")
    blocker = tmp_path / "f"
    blocker.write_text("")
    rc = cli.main(["score", "--task", "bfcl-simple-python", "--predictions", str(preds),
                   "--partial", "--output", str(blocker / "s.json")])
    captured = capsys.readouterr()
    assert rc == 2 and "--output" in captured.err and "scored" not in captured.out


def test_score_counts_missing_predictions_as_wrong_unless_partial(tmp_path, capsys):
    from tasks import TASKS

    task = TASKS.get("bfcl-simple-python")
    items = task.load_eval(None)
    preds = tmp_path / "p.jsonl"
    preds.write_text("".join(json.dumps({"id": ex.id, "response": ex.metadata["gold_output"]})
                             + "\n" for ex in items[:2]))
    out = tmp_path / "s.json"
    assert cli.main(["score", "--task", "bfcl-simple-python", "--predictions", str(preds),
                     "--output", str(out)]) == 0
    captured = capsys.readouterr()
    assert f"{len(items) - 2} of {len(items)} items have no prediction and count as wrong" \
        in captured.err
    full = json.loads(out.read_text())
    # 2 right of all items, not 2 of 2
    expected = task.score(items, [ex.metadata["gold_output"] for ex in items[:2]]
                          + [""] * (len(items) - 2))["metrics"]
    # (recomposed from the items' scores: equal to float rounding)
    assert full["metrics"] == pytest.approx(expected) and len(full["missing"]) == len(items) - 2
    assert cli.main(["score", "--task", "bfcl-simple-python", "--predictions", str(preds),
                     "--output", str(out), "--partial"]) == 0
    assert "PARTIAL, 2 of" in capsys.readouterr().out
    partial = json.loads(out.read_text())
    assert partial["partial"] is True and partial["metrics"] != full["metrics"]


def test_score_refuses_an_empty_predictions_file(tmp_path, capsys):
    preds = tmp_path / "p.jsonl"
    preds.write_text("")
    assert cli.main(["score", "--task", "bfcl", "--predictions", str(preds)]) == 2
    assert "no predictions in it" in capsys.readouterr().err


def test_score_refuses_another_familys_options(tmp_path, capsys):
    preds = tmp_path / "p.jsonl"
    preds.write_text(json.dumps({"id": "simple_python_0", "response": "x"}) + "\n")
    assert cli.main(["score", "--task", "bfcl", "--predictions", str(preds),
                     "--sql-timeout", "3"]) == 2
    assert "--sql-timeout is an option of the sql tasks" in capsys.readouterr().err


def test_render_only_never_replaces_a_fuller_render_unless_forced(tmp_path, capsys):
    import shutil
    import stat

    out = tmp_path / "out"
    (out / "tables").mkdir(parents=True)
    committed = out / "tables" / "table7.md"
    shutil.copy("results/tables/table7.md", committed)
    before = committed.read_text()
    empty = tmp_path / "mistyped"
    args = ["reproduce", "table7", "--render-only", "--results-dir", str(empty),
            "--output-dir", str(out)]
    assert cli.main(args) == 2
    assert "fewer results (is --results-dir right?)" in capsys.readouterr().err
    assert committed.read_text() == before
    assert cli.main([*args, "--force"]) == 0
    assert committed.read_text() != before and "not run" in committed.read_text()
    for f in (out / "tables").iterdir():  # readable by others, as any file written here
        assert stat.S_IMODE(f.stat().st_mode) == _readable(), f


def test_reproduce_refuses_an_unwritable_output_dir(tmp_path, capsys):
    blocker = tmp_path / "f"
    blocker.write_text("")
    assert cli.main(["reproduce", "table7", "--render-only", "--output-dir",
                     str(blocker / "out")]) == 2
    err = capsys.readouterr().err
    assert "--output-dir" in err and "Traceback" not in err


def test_result_files_are_readable_by_others(tmp_path):
    import stat

    from harness.results import atomic_write_json

    atomic_write_json(tmp_path / "seed0.json", {"a": 1})
    assert stat.S_IMODE((tmp_path / "seed0.json").stat().st_mode) == _readable()


def test_a_data_dir_without_rlla_is_refused_not_swapped_for_the_generator(tmp_path, no_ray,
                                                                           capsys):
    data = tmp_path / "data"
    (data / "spider").mkdir(parents=True)  # a folder holding other data sets, not RLLA
    args = ["run", "--method", "gdpo", "--task", "bfcl", "--data-dir", str(data),
            "--results-dir", str(tmp_path / "runs"), "--dry-run"]
    assert cli.main(args) == 2
    out = capsys.readouterr().out
    assert "rlla" in out and "does not hold it" in out and "checks: passed" not in out
    assert cli.main([*args, "--train-data", "tools-synth"]) == 0  # asked for: used
    out = capsys.readouterr().out
    assert "training set: tools-synth (offline generator)" in out and "checks: passed" in out
