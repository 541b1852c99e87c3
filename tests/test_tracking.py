"""Experiment tracking (--report-to) and evaluation during training (--eval-every): a tiny-random
job's TensorBoard events and MLflow store are read back (every logged metric at every step, the
config as parameters, the provenance as tags); W&B's offline run folder when wandb is installed;
unknown or missing trackers fail before anything starts; evaluating during training leaves the
training itself unchanged."""
import importlib.util
import json
from pathlib import Path

import pytest

from harness import tracking
from harness.config import resolve

TOY = str(Path(__file__).parent / "plugins" / "toy_task.py")
TINY = {"model": "tiny-random", "method": "gdpo", "task": "toy", "plugins": (TOY,), "steps": 3,
        "prompts_per_step": 2, "group_size": 4, "max_response_tokens": 12,
        "eval_max_response_tokens": 8, "eval_limit": 4, "lr": 1e-2, "max_prompt_tokens": 4096}


@pytest.fixture(scope="module")
def process_group():
    from harness import engine as eng

    eng.init_single_process()


def test_report_to_names_are_checked_and_a_missing_library_names_its_extra(monkeypatch):
    assert tracking.parse("none") == () and tracking.parse("") == ()
    assert tracking.parse("TensorBoard, mlflow,tensorboard") == ("tensorboard", "mlflow")
    assert "unknown tracker(s) ['comet']" in tracking.problems("tensorboard,comet")[0]
    assert tracking.problems("none,mlflow")  # none mixed with others
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "wandb" else real(name, *a))
    (problem,) = tracking.problems("tensorboard,wandb")
    assert "wandb package is not installed" in problem and ".[wandb]" in problem


def test_a_run_asking_for_a_missing_tracker_fails_before_anything_starts(monkeypatch, tmp_path,
                                                                         capsys):
    from lab import cli

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "mlflow" else real(name, *a))
    assert cli.main(["run", "--method", "gdpo", "--model", "tiny-random", "--task", "toy",
                     "--plugin", TOY,
                     "--report-to", "tensorboard,mlflow", "--results-dir", str(tmp_path)]) != 0
    err = capsys.readouterr().err
    assert "mlflow package is not installed" in err and ".[mlflow]" in err
    assert not list(tmp_path.rglob("*"))  # nothing was written, no Ray started


def _run(tmp_path, **overrides):
    from harness.trainer import train_worker

    config = resolve("smoke", {**TINY, "results_dir": str(tmp_path), **overrides})
    path = train_worker(config)
    log = [json.loads(x) for x in path.with_suffix(".train.jsonl").read_text().splitlines()]
    return path, json.loads(path.read_text()), log


@pytest.mark.model
def test_tensorboard_and_mlflow_receive_every_step_metric_and_the_evaluations(tmp_path,
                                                                              process_group):
    from mlflow.tracking import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    path, result, log = _run(tmp_path, report_to="tensorboard,mlflow", eval_every=1)
    # evaluated after steps 1 and 2 during training; after step 3 by the final evaluation
    assert [("eval/even_rate" in r) for r in log] == [True, True, False]
    assert all(r["time/eval"] > 0 for r in log[:2])
    logged = {k for r in log for k, v in r.items() if k != "step"
              and isinstance(v, (int, float))}
    final = {f"eval/{k}": v for k, v in result["metrics"].items()}

    events = EventAccumulator(str(path.parent / "tensorboard" / "seed0")).Reload()
    tags = set(events.Tags()["scalars"])
    assert logged | set(final) <= tags
    steps = {k: [r["step"] for r in log if k in r] + ([3] if k in final else []) for k in logged}
    for key in logged:
        assert [e.step for e in events.Scalars(key)] == steps[key]
    assert events.Scalars("loss")[1].value == pytest.approx(log[1]["loss"])
    assert [e.value for e in events.Scalars("eval/even_rate")] == pytest.approx(
        [log[0]["eval/even_rate"], log[1]["eval/even_rate"], result["metrics"]["even_rate"]])

    client = MlflowClient(f"sqlite:///{path.parent / 'mlflow.db'}")
    (exp,) = [e for e in client.search_experiments() if e.name != "Default"]
    assert exp.name == path.parent.relative_to(tmp_path).as_posix()
    (run,) = client.search_runs([exp.experiment_id])
    assert run.info.run_name == "seed0" and run.info.status == "FINISHED"
    assert run.data.params["training.lr"] == "0.01" and run.data.params["method.method"] == "gdpo"
    assert run.data.tags["fingerprint"] == result["provenance"]["fingerprint"]
    assert run.data.tags["commit"] == result["provenance"]["commit"]
    for key in logged:
        history = client.get_metric_history(run.info.run_id, key)
        assert sorted(m.step for m in history) == steps[key]
    assert client.get_metric_history(run.info.run_id, "loss")[0].value == \
        pytest.approx(log[0]["loss"])
    assert {m.step for m in client.get_metric_history(run.info.run_id, "eval/even_rate")} \
        == {1, 2, 3}


@pytest.mark.model
def test_evaluating_during_training_leaves_the_training_unchanged(tmp_path, process_group):
    _, plain, plain_log = _run(tmp_path / "a", report_to="none")
    _, evald, eval_log = _run(tmp_path / "b", report_to="none", eval_every=1)
    assert plain["train"]["final_param_sha256"] == evald["train"]["final_param_sha256"]
    assert [r["loss"] for r in plain_log] == [r["loss"] for r in eval_log]
    assert plain["metrics"] == evald["metrics"]
    assert not list((tmp_path / "a").rglob("events.out.tfevents*"))  # none: nothing written


@pytest.mark.skipif(importlib.util.find_spec("wandb") is None,
                    reason="wandb is not installed (the wandb extra: pip install -e '.[wandb]')")
def test_wandb_writes_an_offline_run_folder(tmp_path, process_group, monkeypatch):
    monkeypatch.setattr(tracking, "wandb_logged_in", lambda: False)
    path, _, _ = _run(tmp_path, report_to="wandb", steps=2)
    runs = list((path.parent / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and list(runs[0].glob("*.wandb"))


def test_figure_curves_read_the_evaluations_during_training():
    from lab.reports import figures

    logs = [[{"step": 1, "eval/acc": 10.0}, {"step": 2}, {"step": 3, "eval/acc": 30.0},
             {"step": 4}],
            [{"step": 1, "eval/acc": 20.0}, {"step": 2}, {"step": 3, "eval/acc": 50.0},
             {"step": 4}]]
    steps, values = figures.over_training(logs, "acc", [60.0, 80.0], 4)
    assert steps == [1, 3, 4]
    assert values == [[10.0, 20.0], [30.0, 50.0], [60.0, 80.0]]
    # the band: the seeds' range where the spec says so (never below the lowest seed), else std
    assert figures.band_of([0.0, 10.0, 0.0], "range") == (10 / 3, 0.0, 10.0)
    mean, lo, hi = figures.band_of([0.0, 10.0, 0.0], "std")
    assert (round(lo, 4), round(hi, 4)) == (round(10 / 3 - 5.7735, 4), round(10 / 3 + 5.7735, 4))
    assert figures.band_of([5.0], "std") == (5.0, 5.0, 5.0)  # one seed: no band, not NaN
    assert figures.band_of([0.0, 10.0, 20.0, 30.0], "iqr") == (15.0, 7.5, 22.5)
    assert figures.over_training([[{"step": 1}]], "acc", [1.0], 1) is None  # final bars only


def test_a_seed_started_again_from_step_0_starts_its_tracker_folders_afresh(tmp_path):
    # a rerun after a failure must not show both attempts as one TensorBoard run
    from harness.config import resolve

    config = resolve("smoke", {**TINY, "report_to": "tensorboard,mlflow"})
    prov = {"commit": "c", "dirty": False, "fingerprint": "f"}
    logdir = tmp_path / "tensorboard" / "seed0"
    first = tracking.Trackers(config, tmp_path, "exp", prov)
    first.log({"reward/a": 1.0}, 1)  # the attempt dies here: never closed
    assert len(list(logdir.glob("events.*"))) == 1
    second = tracking.Trackers(config, tmp_path, "exp", prov)
    second.log({"reward/a": 2.0}, 1)
    second.close()
    assert len(list(logdir.glob("events.*"))) == 1  # the first attempt's file is gone
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = client.get_experiment_by_name("exp")
    runs = client.search_runs([exp.experiment_id])
    assert sorted(r.info.status for r in runs) == ["FINISHED", "KILLED"]
    # a resume (from a checkpoint) keeps the folder and continues
    third = tracking.Trackers(config, tmp_path, "exp", prov, start_step=1)
    third.log({"reward/a": 3.0}, 2)
    third.close()
    assert len(list(logdir.glob("events.*"))) == 2
