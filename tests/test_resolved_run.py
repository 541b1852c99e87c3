"""The resolved ``Run`` is what the layers below the command line read: after
``harness.run.resolve`` (or ``of_config`` / ``from_stored``) no registry is read again
(``common.registry.sealed`` makes every read raise), the training set is chosen once per
process, and the check, data, warm-start and launch layers take the ``Run``, not a config."""
import ast
import io
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from common.registry import ReadAfterResolution, Registry, sealed
from harness import run as runs

ROOT = Path(__file__).resolve().parent.parent
TINY = {"model": "tiny-random", "max_response_tokens": 8, "eval_max_response_tokens": 4,
        "eval_limit": 2, "prompts_per_step": 2, "group_size": 2, "micro_batch_size": 2,
        "steps": 1, "report_to": "none"}


def test_a_sealed_registry_refuses_every_read_and_names_it():
    reg: Registry[int] = Registry("widget")
    reg.add("a", 1)
    with sealed("the test resolved it"):
        for read in (lambda: reg.get("a"), reg.names, lambda: "a" in reg, reg.items):
            with pytest.raises(ReadAfterResolution, match="widget registry read .* after the "
                                                          "test resolved it"):
                read()
    assert reg.get("a") == 1 and reg.names() == ["a"]  # open again after the block


@pytest.mark.parametrize("overrides", [
    {"method": "mrtpo", "task": "bfcl"},
    {"method": "gdpo+saw", "task": "ifeval,ifbench", "eval_limit": 4},
    {"method": "grpo", "task": "spider-mini", "warm_start": True, "sql_timeout": 5.0},
    {"method": "gdpo", "task": "bfcl", "mrtpo_beta": 0.3, "group_size": 1},  # refused
])
def test_a_dry_run_reads_no_registry_after_the_resolution(tmp_path, overrides):
    from lab.dryrun import dry_run

    run = runs.resolve("smoke", {**overrides, "results_dir": str(tmp_path / "r"),
                                 "checkpoint_dir": str(tmp_path / "c")})
    out = io.StringIO()
    with sealed(), redirect_stdout(out):
        rc = dry_run(run)
    refused = overrides.get("group_size") == 1
    assert rc == (2 if refused else 0), out.getvalue()
    assert ("is an option of mrtpo" in out.getvalue()) == refused


def test_a_reproduce_dry_run_reads_no_registry_after_its_plan(tmp_path):
    from lab.reports import spec as specs
    from lab.reports.plan import make_plan
    from lab.reports.reproduce import describe

    plan = make_plan(specs.get("table3"), "smoke", None, str(tmp_path))
    with sealed("the plan is resolved"):
        text = describe(plan, str(tmp_path))
    assert "GDPO" in text and "to run [0, 1, 2]" in text


@pytest.mark.model
def test_an_in_process_worker_reads_no_registry_after_its_run(tmp_path, monkeypatch):
    """The worker's own resolution (from the stored config, as Ray's workers make it: one
    training-set choice), then a step, the evaluation and the stored result, sealed."""
    import harness.data
    from harness import engine as eng
    from harness.results import load_result, stored_config
    from harness.trainer import train_worker

    driver = runs.resolve("smoke", {**TINY, "method": "mrtpo", "task": "bfcl",
                                    "results_dir": str(tmp_path / "r"),
                                    "checkpoint_dir": str(tmp_path / "c")})
    eng.init_single_process()
    chosen, choose = [], harness.data.choose_train_set
    monkeypatch.setattr(harness.data, "choose_train_set",
                        lambda config: chosen.append(config.task.task) or choose(config))
    run = runs.from_stored(stored_config(driver.config))
    with sealed("the worker's run is resolved"):
        path = train_worker(run)
    assert load_result(path)["train"]["steps"] == 1 and chosen == ["bfcl"]


def test_the_training_set_is_chosen_once_per_process(tmp_path, monkeypatch):
    """One choice in the resolution; the check, the dry run, the data and the warm start read
    ``Run.train_set`` (and the warm start's demonstrations are read once per run)."""
    import harness.data
    from lab.dryrun import dry_run

    chosen, loads = [], []
    choose, load = harness.data.choose_train_set, harness.data.load_train
    monkeypatch.setattr(harness.data, "choose_train_set",
                        lambda config: chosen.append(config.task.task) or choose(config))
    monkeypatch.setattr(harness.data, "load_train",
                        lambda run, seed=None: loads.append(seed) or load(run, seed))
    run = runs.resolve("smoke", {"method": "gdpo", "task": "bfcl", "warm_start": True,
                                 "results_dir": str(tmp_path)}, purpose="sft")
    with redirect_stdout(io.StringIO()):
        assert dry_run(run) == 0
    assert chosen == ["bfcl"]
    # the RL seed's examples (the data check) and the warm start's (its own seed), once each
    assert loads == [None, 0]
    assert run.warm_start_folder.name.startswith("smollm2-135m-instruct-tools-synth-")
    assert chosen == ["bfcl"] and len(loads) == 2  # the folder came from what was read


# the layers below the command line that take the resolved Run; a function here may take a
# RunConfig only when it makes the Run (its constructors' helpers) or reads one benchmark's own
# config from ``Run.evaluated`` (each benchmark is evaluated on its own config)
RUN_LAYERS = ("harness/preflight.py", "harness/checks.py", "harness/data.py",
              "harness/launch.py", "harness/warmstart/cache.py", "harness/warmstart/data.py",
              "harness/warmstart/sft.py", "harness/trainer.py")
TAKES_A_CONFIG = {
    "harness/checks.py": {"type_problems"},  # of_config checks the values' types first
    "harness/data.py": {"intended_train_set", "choose_train_set",  # of_config's choice
                        "benchmark_items", "load_eval"},  # one benchmark of Run.evaluated
    # a Run, or a config an in-process caller gives (resolved there, through of_config); and
    # one benchmark's config from Run.evaluated
    "harness/trainer.py": {"__init__", "train_worker", "evaluate", "engine_context"},
}


def test_the_layers_below_the_cli_take_the_run_not_a_config():
    found = []
    for rel in RUN_LAYERS:
        for node in ast.walk(ast.parse((ROOT / rel).read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                if any(a.annotation is not None and "RunConfig" in ast.unparse(a.annotation)
                       for a in args) and node.name not in TAKES_A_CONFIG.get(rel, set()):
                    found.append(f"{rel}:{node.lineno} {node.name}")
    assert found == [], "take the resolved harness.run.Run: " + ", ".join(found)
