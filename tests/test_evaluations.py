"""One training evaluated on several benchmarks (``--task A,B`` / ``--also-evaluate``): one
result per benchmark, each the result a run of that benchmark alone would store."""
import json
from dataclasses import replace

import pytest

from harness import config as cfg
from harness.config import resolve

TINY = {"model": "tiny-random", "method": "gdpo", "steps": 1, "prompts_per_step": 2,
        "group_size": 4, "max_response_tokens": 12, "eval_max_response_tokens": 8,
        "eval_limit": 4, "lr": 1e-2, "max_prompt_tokens": 4096}


@pytest.fixture(scope="module")
def process_group():
    from harness import engine as eng

    eng.init_single_process()


def test_task_list_splits_into_the_task_and_the_benchmarks_after_it():
    c = resolve("smoke", {"task": "ifeval, ifbench", "also_evaluate": "muldimif"})
    assert c.task.task == "ifeval" and cfg.benchmarks(c) == ("ifeval", "ifbench", "muldimif")
    first, second, third = cfg.evaluations(c)
    assert (first.task.task, second.task.task, third.task.task) == ("ifeval", "ifbench",
                                                                     "muldimif")
    assert all(e.task.also_evaluate == "" for e in (first, second, third))
    # the benchmarks evaluated do not change a result's setting: one run of ifbench alone has
    # the same folder and hash as ifbench's result of the joint run
    from harness.results import config_hash, run_dir

    alone = resolve("smoke", {"task": "ifbench"})
    assert run_dir(second) == run_dir(alone) and config_hash(second) == config_hash(alone)
    assert cfg.benchmarks(resolve("smoke", {"task": "ifeval,ifeval"})) == ("ifeval",)


def test_preflight_refuses_a_benchmark_another_training_would_serve(tmp_path):
    from harness.preflight import data_problems
    from harness.run import of_config

    c = resolve("smoke", {"task": "ifeval,bfcl,nosuch", "results_dir": str(tmp_path)})
    problems = data_problems(of_config(c))
    assert any("bfcl" in p and "instruct" in p for p in problems), problems
    assert any("unknown task 'nosuch'" in p for p in problems), problems
    assert data_problems(of_config(resolve("smoke", {"task": "ifeval,ifbench"}))) == []


@pytest.mark.model
def test_one_training_stores_a_result_per_benchmark_equal_to_a_run_alone(tmp_path,
                                                                        process_group):
    from harness.launch import pending_seeds, still_missing
    from harness.results import load_result, result_path
    from harness.run import of_config
    from harness.trainer import train_worker

    joint = resolve("smoke", {**TINY, "task": "ifeval,ifbench",
                              "results_dir": str(tmp_path / "joint")})
    run = of_config(joint)
    assert pending_seeds(run) == [0]
    train_worker(joint)
    ifeval, ifbench = (load_result(result_path(c)) for c in cfg.evaluations(joint))
    assert ifeval["task"] == "ifeval" and ifbench["task"] == "ifbench"
    assert ifeval["evaluated_with"] == ifbench["evaluated_with"] == ["ifeval", "ifbench"]
    assert ifeval["provenance"] == ifbench["provenance"]
    assert ifeval["train"] == ifbench["train"]  # one training
    assert ifeval["data"]["eval"] != ifbench["data"]["eval"]
    logs = [result_path(c).with_suffix(".train.jsonl").read_text()
            for c in cfg.evaluations(joint)]
    assert logs[0] == logs[1] and logs[0].count("\n") == 1
    assert pending_seeds(run) == []

    # the same seed of ifbench alone: the same training, so the same parameters and scores
    alone = replace(cfg.evaluations(joint)[1], results_dir=str(tmp_path / "alone"))
    single = load_result(train_worker(alone))
    assert single["config_hash"] == ifbench["config_hash"]
    assert single["train"]["final_param_sha256"] == ifbench["train"]["final_param_sha256"]
    assert single["metrics"] == ifbench["metrics"]
    assert "evaluated_with" not in single

    # a seed with one benchmark stored evaluates only the other: a stored result stays
    result_path(cfg.evaluations(joint)[0]).unlink()
    assert pending_seeds(run) == [0]
    narrowed = still_missing(run, 0)
    assert cfg.benchmarks(narrowed.config) == ("ifeval",)
    assert narrowed.result == result_path(narrowed.config)
    assert json.loads(result_path(cfg.evaluations(joint)[1]).read_text()) == ifbench
