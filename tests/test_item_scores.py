"""Each task's per-item scores make its metrics again: on every committed seed's predictions,
and on hand-made records."""
import json
import math
from pathlib import Path

import pytest

from tasks import TASKS
from tasks.base import recompose

RESULTS = Path(__file__).resolve().parents[1] / "results"


def committed():
    for path in sorted(RESULTS.glob("*/*/*/*/seed*.json")):
        predictions = path.with_suffix(".predictions.jsonl")
        if predictions.is_file():
            yield path, predictions


@pytest.mark.parametrize("path,predictions", list(committed()),
                         ids=lambda p: str(p.relative_to(RESULTS)) if isinstance(p, Path) else p)
def test_item_scores_remake_every_committed_metric(path, predictions):
    result = json.loads(path.read_text())
    task = TASKS.get(result["task"])
    if task.item_scores is None:
        pytest.skip(f"{task.name} has no per-item scores")
    records = [json.loads(line) for line in predictions.read_text().splitlines()]
    remade = recompose(task.item_scores(records))
    headline = [m for m in task.headline if m in result["metrics"]]
    assert headline and set(headline) <= set(remade)
    for name, value in remade.items():
        assert math.isclose(value, result["metrics"][name], abs_tol=1e-9), name


def test_bfcl_weights_by_hand():
    """Two simple_python items (1 right), one multiple (right), one live_simple (wrong):
    Non-Live Overall = mean(0.5, 1) over its two groups present; Live Overall = 0."""
    rows = [{"category": "simple_python", "valid": True, "format_ok": True},
            {"category": "simple_python", "valid": False, "format_ok": True},
            {"category": "multiple", "valid": True, "format_ok": True},
            {"category": "live_simple", "valid": False, "format_ok": False}]
    m = recompose(TASKS.get("bfcl").item_scores(rows))
    assert m["non_live_overall"] == pytest.approx(75.0)
    assert m["non_live_simple"] == pytest.approx(50.0) and m["live_overall"] == 0.0
    assert m["format_rate"] == pytest.approx(75.0)


def test_instruction_scores_by_hand():
    """An unscorable instruction drops its prompt from the prompt level only."""
    rows = [{"strict": [True, False], "loose": [True, True]},
            {"strict": [True, None], "loose": [True, None]},
            {"strict": [True], "loose": [True]}]
    m = recompose(TASKS.get("ifeval").item_scores(rows))
    assert m["prompt_strict"] == pytest.approx(50.0)  # 1 of the 2 scorable prompts
    assert m["inst_strict"] == pytest.approx(75.0)  # 3 of 4 scorable instructions
    assert m["prompt_loose"] == pytest.approx(100.0)
