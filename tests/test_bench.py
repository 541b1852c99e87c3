"""The bench suite's reports: what ran, on which machine, written where asked."""
import json
import math

import pytest

from lab import cli

TOY_FLAGS = ["--model", "tiny-random", "--max-response-tokens", "6", "--prompts-per-step", "2",
             "--group-size", "2"]


@pytest.fixture(scope="module")
def process_group():
    from harness import engine as eng

    eng.init_single_process()


def test_bench_step_reports_every_phase_per_method(tmp_path, process_group, capsys):
    assert cli.main(["bench", "step", "--preset", "smoke", "--task", "bfcl", *TOY_FLAGS,
                     "--methods", "gdpo,mrtpo@single", "--repeats", "1", "--warmup", "0", "--label", "t",
                     "--evaluate", "--eval-limit", "2", "--output-dir", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["machine"]["cores"] >= 1 and data["machine"]["torch"] == __import__("torch").__version__
    assert data["methods"] == ["gdpo", "mrtpo@single"]
    mrtpo, gdpo = data["median"]["mrtpo@single"], data["median"]["gdpo"]
    assert mrtpo["replay"] > 0 and gdpo["replay"] == 0
    assert all(gdpo[p] > 0 for p in ("generate", "step", "sync"))
    assert data["config"]["method"]["method"] == "gdpo"  # the base config; methods vary
    md = (tmp_path / "t.md").read_text()
    assert "| mrtpo@single |" in md and "ratio to gdpo" in md and "cores" in md
    assert 0 <= data["machine"]["other_cpu_share"] <= 1 and "other processes used" in md
    # --evaluate: each method's last repeat scored 2 benchmark items with the stepped policy
    last = data["runs"]["gdpo"][-1]
    assert last["eval_items"] == 2 and any(k.startswith("eval/") for k in last)
    assert "eval_items" in md and "evaluates 2 benchmark items" in md


def test_bench_step_refuses_a_baseline_it_does_not_run(tmp_path):
    assert cli.main(["bench", "step", "--methods", "grpo", "--output-dir", str(tmp_path)]) == 2


def test_one_shot_prompt_appends_a_worked_example():
    from lab.bench.signal import with_example
    from harness.config import resolve
    from harness.warmstart.data import demonstrations

    from harness.run import of_config

    demos = demonstrations(of_config(resolve("smoke", {"task": "bfcl"})))
    shot = with_example(demos[1].example, demos[0])
    assert shot.messages[0]["content"].startswith(demos[1].example.messages[0]["content"])
    assert shot.messages[0]["content"].endswith(demos[0].target)
    assert shot.messages[1] == demos[1].example.messages[1]


def test_bench_rollout_counts_generated_tokens(tmp_path):
    assert cli.main(["bench", "rollout", "--preset", "smoke", "--task", "bfcl", "--model",
                     "tiny-random", "--max-response-tokens", "5", "--group-size", "2",
                     "--batch-sizes", "2,4", "--candidates", "hf,lean-fp32", "--repeats", "1",
                     "--label", "r", "--output-dir", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "r.json").read_text())
    assert [row[:2] for row in data["rows"]] == [["hf", 2], ["lean-fp32", 2], ["hf", 4],
                                                 ["lean-fp32", 4]]
    assert all(0 < row[2] <= row[1] * 5 and row[3] > 0 for row in data["rows"])
    # hf reports no sampling log-probs; the fp32 lean engine samples the policy's own
    assert math.isnan(data["rows"][0][7]) and data["rows"][1][7] < 1e-4
    assert 0 <= data["machine"]["other_cpu_share"] <= 1
    assert cli.main(["bench", "rollout", "--preset", "smoke", "--model", "tiny-random",
                     "--group-size", "4", "--batch-sizes", "6", "--output-dir",
                     str(tmp_path)]) == 2  # not a multiple of G


def test_probe_prompts_are_never_trained_on():
    from harness.config import resolve
    from harness.models import load_tokenizer
    from harness.warmstart.data import demonstrations, encode
    from harness.warmstart.sft import probe_examples, training_schedule

    from harness.run import of_config

    config = resolve("smoke-learn", {"task": "spider-mini"})
    demos = demonstrations(of_config(config))
    pairs, source = encode(load_tokenizer(config.model.model), demos, 4096)
    schedule = training_schedule(len(pairs), config.warmstart)
    trained = {demos[source[i]].example.id for step in schedule for i in step}
    assert len(schedule) == 12 and all(len(s) == 4 for s in schedule)
    probe = probe_examples(demos, source, schedule, 8)
    assert len(probe) == 8 and not {e.id for e in probe} & trained


def test_bench_replay_times_each_k_and_probes_memory_per_length(tmp_path):
    assert cli.main(["bench", "replay", "--model", "tiny-random", "--ks", "2,3", "--responses", "2",
                     "--tokens", "8", "--repeats", "1", "--memory-tokens", "16,32",
                     "--memory-chunk", "8", "--memory-responses", "2", "--label", "rp",
                     "--output-dir", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "rp.json").read_text())
    assert [(r["k"], r["floor"]) for r in data["timing"]] == [(2, 3), (3, 4)]
    assert all(r["forward_s"] > 0 and r["replay_s"] > 0 and len(r["runs"]["replay"]) == 1
               for r in data["timing"])
    mem = data["memory"]
    assert [(m["tokens"], m["chunk"]) for m in mem] == [(16, 8), (32, 8), (16, 16)]
    assert all(m["vocab"] == 151936 and m["distance_peak_mb"] >= 0 for m in mem)
    assert abs(mem[0]["checksum"] - mem[2]["checksum"]) < 1e-4 * max(1.0, abs(mem[0]["checksum"]))
    md = (tmp_path / "rp.md").read_text()
    assert "| 3 |" in md and "floor (K+1)" in md and "distance MB" in md
    assert 0 <= data["machine"]["other_cpu_share"] <= 1


def test_vs_trl_takes_per_round_medians_of_steps_after_the_first():
    from lab.bench.vs_trl import PHASES, summarise

    def side(steps, startup, peak):
        keys = ("step", *PHASES, "length", "groups_with_signal", "updated", "skipped")
        return {"startup": startup, "peak_rss_gb": peak,
                "steps": [{k: float(s) for k in keys} for s in steps]}

    # step 1 (100) is a fresh process's first and never counts; round medians 3, 5, 20
    rounds = [side([100, 2, 3, 4], 10, 1.0), side([100, 5, 5, 6], 30, 3.0),
              side([100, 20, 20, 20], 20, 2.0)]
    med = summarise(rounds)
    assert med["rounds"] == [3.0, 5.0, 20.0]
    assert med["step"] == 5.0 and med["generate"] == 5.0
    assert med["startup"] == 20 and med["peak_rss_gb"] == 2.0


@pytest.mark.parametrize("side", ["trl", "trl-gdpo", "trl-mrtpo"])
def test_vs_trl_side_refuses_a_distributed_environment(tmp_path, monkeypatch, side):
    from lab.bench.vs_trl import side_main

    job = tmp_path / "job.json"
    job.write_text("{}")
    monkeypatch.setenv("WORLD_SIZE", "1")
    with pytest.raises(RuntimeError, match="plain process.*WORLD_SIZE"):
        side_main(["--side", side, "--job", str(job), "--out", str(tmp_path / "o.json")])


def test_reports_go_under_runs_bench_unless_output_dir_says_otherwise(tmp_path, monkeypatch):
    # results/bench/ holds the committed reports: only --output-dir results/bench refreshes them
    from lab.bench import report

    monkeypatch.chdir(tmp_path)
    js, md = report.write("r", {"bench": "x"}, "# r\n")
    folder = (tmp_path / "runs" / "bench").resolve()
    assert (js.resolve(), md.resolve()) == (folder / "r.json", folder / "r.md")
    assert not (tmp_path / "results").exists()
    js, _ = report.write("r", {}, "", tmp_path / "results" / "bench")
    assert js == tmp_path / "results" / "bench" / "r.json"
    which = cli.build_parser()._subparsers._group_actions[0].choices["bench"]
    for name, p in which._subparsers._group_actions[0].choices.items():
        for a in p._actions:
            if "--output-dir" in a.option_strings:
                assert a.default is None and "runs/bench" in a.help, name
