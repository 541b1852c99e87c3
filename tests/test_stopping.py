"""--stop-when: a run stops at the first step whose trailing mean over a full window reaches
the value, the rule a steps-to-threshold report reads; a bad rule or an unlogged metric is a
clear error."""
import json

import pytest

from harness.train.stopping import StopRule, first_reached, parse, reached


@pytest.mark.unit
def test_the_rule_reads_a_full_trailing_window():
    values = [0.9, 0.1, 0.5, 0.9, 0.8]
    assert first_reached(values, 0.8) == 0  # the step's own value
    # window 2: (0.9+0.1)/2, (0.1+0.5)/2, (0.5+0.9)/2 = 0.7, then 0.85 at index 4
    assert first_reached(values, 0.8, 2) == 4
    assert first_reached(values, 0.8, 3) is None  # 0.5, 0.5, 0.733
    assert first_reached([0.9], 0.8, 2) is None  # no full window yet: never counts
    rows = [{"step": i + 1, "reward/format": v} for i, v in enumerate(values)]
    rule = StopRule("reward/format", 0.8, 2)
    assert [reached(rows[:k], rule) for k in range(1, 6)] == [False] * 4 + [True]
    assert not reached(rows + [{"step": 6, "reward/format": 1.0}], rule)  # met before it


@pytest.mark.unit
def test_the_report_reads_steps_to_a_threshold_by_the_same_rule():
    from lab.reports.figures import steps_to_threshold

    values = [0.2, 0.9, 0.8, 0.95]
    log = [{"step": s + 1, "reward/format": v} for s, v in enumerate(values)]
    log.insert(2, {"step": 2, "eval/format_rate": 0.1})  # a row without the key: not counted
    # window 2: 0.55, then (0.9 + 0.8) / 2 = 0.85 at step 3
    assert steps_to_threshold(log, "reward/format", 0.8, 2) == 3
    assert first_reached(values, 0.8, 2) == 2
    assert steps_to_threshold(log, "reward/format", 0.9, 2) is None


@pytest.mark.unit
@pytest.mark.parametrize("text,why", [
    ("reward/format>0.8", "not METRIC>=X"), ("reward/format>=", "not METRIC>=X"),
    ("format >= 0.8 x", "not METRIC>=X"), ("reward/format>=nan", "not METRIC>=X")])
def test_a_rule_not_of_the_form_is_a_clear_error(text, why):
    with pytest.raises(ValueError, match=why):
        parse(text, 1)
    with pytest.raises(ValueError, match="1 step or more"):
        parse("reward/format>=0.8", 0)
    assert parse("", 5) is None
    assert parse(" reward/format >= .8 ", 5) == StopRule("reward/format", 0.8, 5)


@pytest.mark.unit
def test_run_refuses_a_bad_rule_before_training(tmp_path):
    from lab import cli

    rc = cli.main(["run", "--dry-run", "--task", "bfcl", "--method", "gdpo", "--stop-when",
                   "format above 0.8", "--results-dir", str(tmp_path / "r")])
    assert rc != 0


@pytest.mark.model
def test_a_run_stops_at_the_step_it_reaches_the_value(tmp_path):
    from harness import engine as eng
    from harness.config import resolve
    from harness.trainer import Trainer, train_worker

    eng.init_single_process()
    tiny = {"model": "tiny-random", "method": "gdpo", "prompts_per_step": 2, "group_size": 4,
            "max_response_tokens": 8, "eval_max_response_tokens": 8, "eval_limit": 2,
            "max_prompt_tokens": 4096, "task": "bfcl", "results_dir": str(tmp_path)}
    # a format reward of at least -1 always: the first full window of 2 is step 2
    config = resolve("smoke", {**tiny, "steps": 4, "stop_when": "reward/format>=-1",
                               "stop_window": 2})
    path = train_worker(config)
    log = [json.loads(x) for x in path.with_suffix(".train.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2] and log[1]["stop/reached"] == 1.0
    assert "stop/reached" not in log[0]
    typo = resolve("smoke", {**tiny, "steps": 1, "stop_when": "reward/formatt>=0.5"})
    with pytest.raises(ValueError, match="does not log"):
        Trainer(typo).train(None)
