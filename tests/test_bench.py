"""The bench suite's reports: what ran, on which machine, written where asked."""
import json

import pytest

from harness import cli

TOY_FLAGS = ["--model", "tiny-random", "--max-response-tokens", "6", "--prompts-per-step", "2",
             "--group-size", "2"]


@pytest.fixture(scope="module")
def process_group():
    from harness import engine as eng

    eng.init_single_process()


def test_bench_step_reports_every_phase_per_method(tmp_path, process_group, capsys):
    assert cli.main(["bench", "step", "--preset", "smoke", "--task", "bfcl", *TOY_FLAGS,
                     "--methods", "gdpo,mrtpo@single", "--repeats", "1", "--warmup", "0", "--label", "t",
                     "--output-dir", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["machine"]["cores"] >= 1 and data["machine"]["torch"].startswith("2.13")
    assert data["methods"] == ["gdpo", "mrtpo@single"]
    mrtpo, gdpo = data["median"]["mrtpo@single"], data["median"]["gdpo"]
    assert mrtpo["replay"] > 0 and gdpo["replay"] == 0
    assert all(gdpo[p] > 0 for p in ("generate", "step", "sync"))
    assert data["config"]["method"]["method"] == "gdpo"  # the base config; methods vary
    md = (tmp_path / "t.md").read_text()
    assert "| mrtpo@single |" in md and "ratio to gdpo" in md and "cores" in md


def test_bench_step_refuses_a_baseline_it_does_not_run(tmp_path):
    assert cli.main(["bench", "step", "--methods", "grpo", "--output-dir", str(tmp_path)]) == 2


def test_one_shot_prompt_appends_a_worked_example():
    from harness.bench.signal import with_example
    from harness.config import resolve
    from harness.warmstart.data import demonstrations

    demos = demonstrations(resolve("smoke", {"task": "bfcl"}))
    shot = with_example(demos[1].example, demos[0])
    assert shot.messages[0]["content"].startswith(demos[1].example.messages[0]["content"])
    assert shot.messages[0]["content"].endswith(demos[0].target)
    assert shot.messages[1] == demos[1].example.messages[1]


def test_bench_rollout_counts_generated_tokens(tmp_path):
    assert cli.main(["bench", "rollout", "--preset", "smoke", "--task", "bfcl", "--model",
                     "tiny-random", "--max-response-tokens", "5", "--group-size", "2",
                     "--batch-sizes", "2,4", "--label", "r", "--output-dir", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "r.json").read_text())
    assert [row[0] for row in data["rows"]] == [2, 4]
    assert all(0 < row[1] <= row[0] * 5 and row[2] > 0 for row in data["rows"])
    assert cli.main(["bench", "rollout", "--preset", "smoke", "--model", "tiny-random",
                     "--group-size", "4", "--batch-sizes", "6", "--output-dir",
                     str(tmp_path)]) == 2  # not a multiple of G


def test_probe_prompts_are_never_trained_on():
    from harness.config import resolve
    from harness.models import load_tokenizer
    from harness.warmstart.data import demonstrations, encode
    from harness.warmstart.sft import probe_examples, training_schedule

    config = resolve("smoke-learn", {"task": "spider-mini"})
    demos = demonstrations(config)
    pairs, source = encode(load_tokenizer(config.model.model), demos, 4096)
    schedule = training_schedule(len(pairs), config.warmstart)
    trained = {demos[source[i]].example.id for step in schedule for i in step}
    assert len(schedule) == 12 and all(len(s) == 4 for s in schedule)
    probe = probe_examples(demos, source, schedule, 8)
    assert len(probe) == 8 and not {e.id for e in probe} & trained
