"""``score`` on a run's predictions gives the run's stored metrics (its own items: the run's
subset, beside the file or named with ``--like``), and an item without a prediction counts as
wrong for every task, even where the task's scorer accepts an empty response."""
import json
import shutil
from pathlib import Path

import pytest

from lab import cli

ROOT = Path(__file__).resolve().parents[1]
# a committed spider-mini seed: 20 of the 54 items (--eval-limit 20), at least one of them right
RUN = ROOT / "results" / "spider-mini" / "grpo" / "smollm2-135m-instruct" / "smoke-learn" \
    / "seed0.json"
PREDICTIONS = RUN.with_name("seed0.predictions.jsonl")
TOY = str(ROOT / "tests" / "plugins" / "toy_task.py")
TOY_IDS = [f"toy-{i}" for i in range(100, 112)]  # the toy task's 12 items

# a toy task like tests/plugins/toy_task.py (an empty response has an even length: its scorer
# gives it 1), with per-item scores, and a metric where smaller is better
SCORED_TOY = '''
from tasks import TASKS
from tasks.base import Example, Task

def _score(examples, responses):
    even = [len(r) % 2 == 0 for r in responses]
    return {"metrics": {"even_rate": 100.0 * sum(even) / len(even),
                        "odd_rate": 100.0 * (len(even) - sum(even)) / len(even)},
            "items": [{"id": e.id, "even": v} for e, v in zip(examples, even)]}

def _items(records):
    return {"even_rate": [(float(r["even"]), 1.0) for r in records],
            "odd_rate": [(float(not r["even"]), 1.0) for r in records]}

if "toy-scored" not in TASKS:
    TASKS.add("toy-scored", Task(
        "toy-scored", "toy", "a test task with per-item scores", (), ("toy-train",),
        lambda data_dir: [Example(id=f"toy-{i}", messages=({"role": "user", "content": "x"},),
                                  reference=None) for i in range(100, 112)],
        _score, ("even_rate",), lower_is_better=("odd_rate",), item_scores=_items))
'''


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write(path: Path, predictions: list[tuple[str, str]]) -> Path:
    path.write_text("".join(json.dumps({"id": i, "response": r}) + "\n" for i, r in predictions))
    return path


def score(args: list[str], tmp_path: Path) -> tuple[int, dict | None]:
    out = tmp_path / "scores.json"
    out.unlink(missing_ok=True)
    rc = cli.main(["score", *args, "--output", str(out)])
    return rc, json.loads(out.read_text()) if out.is_file() else None


def test_a_runs_own_predictions_give_its_stored_metrics(tmp_path, capsys):
    stored = json.loads(RUN.read_text())
    rc, scored = score(["--predictions", str(PREDICTIONS)], tmp_path)
    assert rc == 0
    # every stored metric again, of a run that got something right (not a trivial all-0 match)
    assert scored["metrics"] == stored["metrics"] and stored["metrics"]["spider-mini"] > 0
    assert scored["missing"] == [] and scored["run"] == str(RUN)
    out = capsys.readouterr().out
    assert f"the items of run {RUN}: a 20-item subset (seed 1234) of its 54" in out
    assert "20 of 20 items scored" in out and "the run's stored metrics, every one" in out
    # --task may be given, if it is the run's
    rc, again = score(["--task", "spider-mini", "--predictions", str(PREDICTIONS)], tmp_path)
    assert rc == 0 and again["metrics"] == stored["metrics"]


def test_like_scores_a_copied_file_on_the_runs_items(tmp_path, capsys):
    copy = tmp_path / "preds.jsonl"
    shutil.copy(PREDICTIONS, copy)
    rc, scored = score(["--predictions", str(copy), "--like", str(RUN)], tmp_path)
    assert rc == 0 and scored["metrics"] == json.loads(RUN.read_text())["metrics"]
    assert f"the items of run {RUN}: a 20-item subset" in capsys.readouterr().out
    # without --like it is scored against the whole benchmark: 34 of 54 items missing, wrong
    correct = sum(r["correct"] for r in rows(PREDICTIONS))
    rc, whole = score(["--task", "spider-mini", "--predictions", str(copy)], tmp_path)
    assert rc == 0 and whole["metrics"]["spider-mini"] == pytest.approx(100.0 * correct / 54)
    assert len(whole["missing"]) == 34 and whole["run"] is None
    # and so is the run's own file with --all-items
    rc, every = score(["--task", "spider-mini", "--predictions", str(PREDICTIONS),
                       "--all-items"], tmp_path)
    assert rc == 0 and every["metrics"] == whole["metrics"]


def test_a_task_other_than_the_runs_is_refused(tmp_path, capsys):
    copy = shutil.copy(PREDICTIONS, tmp_path / "preds.jsonl")
    for args in (["--task", "bfcl", "--predictions", str(PREDICTIONS)],
                 ["--task", "bfcl", "--predictions", str(copy), "--like", str(RUN)]):
        assert score(args, tmp_path) == (2, None)
        err = capsys.readouterr().err
        assert f"--task bfcl disagrees with run {RUN}, which evaluated 'spider-mini'" in err
    assert score(["--predictions", str(copy), "--like", str(RUN), "--all-items"],
                 tmp_path) == (2, None)
    assert "give one of them" in capsys.readouterr().err


def test_items_missing_from_a_runs_subset_count_as_wrong(tmp_path, capsys):
    """5 of the run's 20 predictions: the 15 others are wrong in every metric (never their
    scorer's verdict on an empty response); gold_failures, which the per-item scores do not
    make, is left out and named."""
    given = rows(PREDICTIONS)[:5]
    copy = write(tmp_path / "preds.jsonl", [(r["id"], r["response"]) for r in given])
    rc, scored = score(["--predictions", str(copy), "--like", str(RUN)], tmp_path)
    assert rc == 0 and len(scored["missing"]) == 15
    assert scored["metrics"]["spider-mini"] == pytest.approx(
        100.0 * sum(r["correct"] for r in given) / 20)
    assert scored["metrics"]["format_rate"] == pytest.approx(
        100.0 * sum(r["format_ok"] for r in given) / 20)
    assert scored["left_out_metrics"] == ["gold_failures"]
    assert {"id": scored["missing"][0], "missing": True} in scored["items"]
    out = capsys.readouterr().out
    assert "20 of 20 items scored, 15 of them without a prediction (counted as wrong" in out
    assert "left out: gold_failures" in out and "not the run's stored metrics" in out


def test_missing_items_count_as_wrong_even_where_an_empty_response_scores(tmp_path, capsys):
    """The toy scorers give an empty response full marks (an even length); 2 predictions of
    the 12 items, one even and one odd."""
    preds = write(tmp_path / "preds.jsonl", [("toy-100", "ab"), ("toy-101", "abc")])
    # a task with per-item scores: the 10 missing are wrong, in a metric where smaller is
    # better too (not 11 of 12 even, as an empty response would score)
    plugin = tmp_path / "toy_scored_task.py"
    plugin.write_text(SCORED_TOY)
    rc, scored = score(["--plugin", str(plugin), "--task", "toy-scored", "--predictions",
                        str(preds)], tmp_path)
    assert rc == 0
    assert scored["metrics"] == pytest.approx({"even_rate": 100.0 * 1 / 12,
                                               "odd_rate": 100.0 * 11 / 12})
    assert scored["missing"] == TOY_IDS[2:]
    assert "counted as wrong" in capsys.readouterr().out
    # a task without per-item scores: refused (not 91.67), saying what to do
    assert score(["--plugin", TOY, "--task", "toy", "--predictions", str(preds)],
                 tmp_path) == (2, None)
    err = capsys.readouterr().err
    assert "10 items of task 'toy' have no prediction" in err and "--partial" in err
    # --partial scores the 2 given, and says so; every item given scores as usual
    rc, partial = score(["--plugin", TOY, "--task", "toy", "--predictions", str(preds),
                         "--partial"], tmp_path)
    assert rc == 0 and partial["metrics"] == {"even_rate": 50.0}
    assert "PARTIAL, 2 of 12 items scored" in capsys.readouterr().out
    full = write(tmp_path / "full.jsonl", [(i, "") for i in TOY_IDS])
    rc, complete = score(["--plugin", TOY, "--task", "toy", "--predictions", str(full)],
                         tmp_path)
    assert rc == 0 and complete["metrics"] == {"even_rate": 100.0}
