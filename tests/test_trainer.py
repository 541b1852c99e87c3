"""The RL loop end to end on tiny-random: in-process (fast) and on Ray Train + DeepSpeed (slow)."""
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from harness.config import resolve

TOY = str(Path(__file__).parent / "plugins" / "toy_task.py")
TINY = {"model": "tiny-random", "method": "gdpo", "steps": 2, "prompts_per_step": 2,
        "group_size": 4, "max_response_tokens": 12, "eval_max_response_tokens": 8,
        "eval_limit": 6, "lr": 1e-2, "max_prompt_tokens": 4096}


@pytest.fixture(scope="module")
def process_group():
    from harness import engine as eng

    eng.init_single_process()


def test_in_process_loop_updates_parameters(tmp_path, process_group):
    from harness.trainer import Trainer

    config = resolve("smoke", {**TINY, "task": "toy", "plugins": (TOY,),
                               "results_dir": str(tmp_path), "ppo_epochs": 2})
    trainer = Trainer(config)
    before = {n: p.detach().clone() for n, p in trainer.rollout.plain_model.named_parameters()}
    history = trainer.train(None)
    after = dict(trainer.rollout.plain_model.named_parameters())
    assert any(not torch.equal(before[n], after[n]) for n in before)
    assert all(h["grad_norm"] > 0 and h["param_update_norm"] > 0 for h in history)
    # the second PPO epoch is off-policy: its ratio differs from 1
    assert any(abs(h["ratio_mean"] - 1) > 1e-6 for h in history)
    # the lean engine (bf16) sampled from the policy the update scored, to bf16's precision
    assert all(0 < h["rollout/logprob_gap"] < 0.05 for h in history)


def test_in_process_bfcl_step_evaluates_and_stores(tmp_path, process_group):
    from harness.trainer import train_worker

    config = resolve("smoke", {**TINY, "task": "bfcl", "steps": 1, "results_dir": str(tmp_path)})
    path = train_worker(config)
    data = json.loads(path.read_text())
    assert data["num_eval_items"] == 6
    assert {"non_live_overall", "live_overall", "format_rate"} <= set(data["metrics"])
    assert data["versions"]["torch"] == __import__("importlib.metadata").metadata.version("torch")
    log = [json.loads(x) for x in path.with_suffix(".train.jsonl").read_text().splitlines()]
    assert len(log) == 1 and {"reward/format", "reward/correctness"} <= set(log[0])
    preds = [json.loads(x) for x in path.with_suffix(".predictions.jsonl").read_text().splitlines()]
    assert len(preds) == 6 and all("response" in p for p in preds)


@pytest.mark.slow
def test_ray_train_deepspeed_zero3_two_workers(tmp_path):
    """One real Ray Train fit: 2 CPU workers, gloo, DeepSpeed ZeRO-3, tiny-random."""
    from harness.backend import start_ray, train_seed

    config = resolve("smoke", {**TINY, "task": "toy", "plugins": (TOY,), "workers": 2,
                               "zero_stage": 3, "ppo_epochs": 2, "results_dir": str(tmp_path)})
    start_ray(num_cpus=2)
    path = train_seed(replace(config, seed=0))
    data = json.loads(path.read_text())
    assert data["num_eval_items"] == 6 and "even_rate" in data["metrics"]
    log = [json.loads(x) for x in path.with_suffix(".train.jsonl").read_text().splitlines()]
    assert [row["step"] for row in log] == [1, 2]
    assert all(row["grad_norm"] > 0 and row["param_update_norm"] > 0 for row in log)
    assert log[0]["loss"] != log[1]["loss"]
    # both ranks' responses were gathered: 2 prompts x G=4 = 8 rewards per step
    assert data["config"]["training"]["workers"] == 2


def test_every_registered_method_trains_a_step(tmp_path, process_group):
    """Each preset and a few compositions go through the real loop (one step, tiny-random)."""
    import methods
    from harness.trainer import Trainer

    # built for OPSD, so the trainer holds the initial policy its teacher needs
    config = resolve("smoke", {**TINY, "task": "toy", "plugins": (TOY,), "steps": 1,
                               "method": "opsd+grpo", "results_dir": str(tmp_path)})
    trainer = Trainer(config)
    names = methods.METHODS.names() + ["gdpo+saw", "saw+gd2po", "grpo+sa-mrpo", "dvao+gd2po",
                                       "opsd+grpo",
                                       "mrtpo+saw"]
    for step, name in enumerate(names):
        trainer.method, trainer.options = methods.get(name), methods.options_of(name)()
        data, metrics = trainer.collect(step)
        metrics.update(trainer.update(data))
        assert torch.isfinite(data.advantages).all(), name
        assert all(v == v for v in metrics.values()), name  # no NaN anywhere
        parts = trainer.method.parts
        if parts.weighting:
            assert {"lambda/parity", "lambda/vowels"} <= set(metrics), name
        if parts.filter:
            assert 0.0 <= metrics["kept_fraction"] <= 1.0, name
        if set(trainer.method.needs) & {"replay", "counterfactual"}:
            assert metrics["time/replay"] > 0, name
        if "teacher" in trainer.method.needs:
            assert metrics["opsd"] > 0, name


def _captured_passes(monkeypatch) -> dict:
    """The pass outputs of the trainer's next step(s), by pass name."""
    import harness.trainer as trainer_module

    seen, run = {}, trainer_module.run_passes

    def capture(*args, **kwargs):
        out, metrics = run(*args, **kwargs)
        seen.update(out)
        return out, metrics

    monkeypatch.setattr(trainer_module, "run_passes", capture)
    return seen


def test_mrtpo_step_on_bfcl_logs_relevance_diagnostics(tmp_path, process_group, monkeypatch):
    from harness.trainer import Trainer

    config = resolve("smoke", {**TINY, "task": "bfcl", "method": "mrtpo", "steps": 1,
                               "results_dir": str(tmp_path), "mrtpo_replay_all": True})
    trainer = Trainer(config)
    passes = _captured_passes(monkeypatch)
    data, metrics = trainer.collect(0)
    assert {"diag/format/top10", "diag/correctness/top1"} <= set(metrics)
    assert 0 < metrics["diag/format/top10"] <= 1
    assert not torch.isnan(passes["replay"]).any()


def test_mrtpo_replays_only_the_rewards_with_signal_in_their_group(tmp_path, process_group,
                                                                   monkeypatch):
    """Tiny-random's responses fail every reward alike: no (response, reward) pair has
    within-group signal, so nothing is replayed (NaN rows), and the advantages are GDPO's
    zeros all the same."""
    from harness.trainer import Trainer

    config = resolve("smoke", {**TINY, "task": "bfcl", "method": "mrtpo", "steps": 1,
                               "results_dir": str(tmp_path)})
    trainer = Trainer(config)
    passes = _captured_passes(monkeypatch)
    data, metrics = trainer.collect(0)
    rewards = data.context.rewards
    assert (rewards == rewards[0]).all(), "the premise: every response scored alike"
    assert not data.context.signal.any()
    assert torch.isnan(passes["replay"]).all()
    assert not any(k.startswith("diag/") for k in metrics)
    assert torch.isfinite(data.advantages).all() and (data.advantages == 0).all()


@pytest.mark.parametrize("task, method", [("spider-mini", "mrtpo"), ("ifbench", "mrtpo+saw"),
                                          ("ifeval", "gdpo")])
def test_sql_and_instruction_tasks_train_a_step(tmp_path, process_group, task, method):
    """The families with batch rewards (SQL in the sandbox) and ragged rewards (one per
    constraint, NaN where absent) go through the real loop."""
    import math

    from harness.trainer import Trainer

    config = resolve("smoke", {**TINY, "task": task, "method": method, "steps": 1,
                               "results_dir": str(tmp_path)})
    trainer = Trainer(config)
    data, metrics = trainer.collect(0)
    metrics.update(trainer.update(data))
    assert torch.isfinite(data.advantages).all()
    assert math.isfinite(metrics["loss"])
    names = [r.name for r in trainer.task.rewards]
    assert any(not math.isnan(metrics[f"reward/{n}"]) for n in names)
    if task.startswith("if"):
        assert names[0] == "c1" and len(names) == 16


@pytest.mark.parametrize("loss_agg, zero_stage", [("token-mean", 3), ("seq-mean-token-mean", 0)])
def test_zero_advantage_responses_are_skipped_exactly(tmp_path, process_group, loss_agg,
                                                      zero_stage):
    """Responses whose advantage is 0 everywhere get no forward/backward, and the update equals
    the one that runs them all (forced here by a zero-weight KL term, which keeps every row)."""
    from harness.trainer import Trainer

    config = resolve("smoke", {**TINY, "task": "toy", "plugins": (TOY,), "steps": 1,
                               "micro_batch_size": 2, "loss_agg": loss_agg,
                               "zero_stage": zero_stage, "results_dir": str(tmp_path)})
    a, b = Trainer(config), Trainer(config)
    data, _ = a.collect(0)
    adv = torch.zeros_like(data.advantages)
    adv[1], adv[6] = 1.5, -0.5  # two live rows, packed into one micro-batch of 2
    data.advantages = adv
    out_a = a.update(data)
    assert out_a["update_rows"] == 2 and out_a["skipped_updates"] == 0
    full = replace(data, ref_logp=torch.zeros_like(data.advantages))
    b.config = replace(config, training=replace(config.training, kl_coef=0.0))
    out_b = b.update(full)
    assert out_b["update_rows"] == 8
    pa = dict(a.rollout.plain_model.named_parameters())
    pb = dict(b.rollout.plain_model.named_parameters())
    assert out_a["param_update_norm"] > 0
    assert out_a["grad_norm"] == pytest.approx(out_b["grad_norm"], rel=1e-6)
    # Adam's first step is lr * g / (|g| + eps): for a gradient near eps (1e-8) the float
    # rounding of g shows, up to ~2e-4 with lr 1e-2 (seen); a wrong gradient moves a
    # parameter by ~lr
    assert all(torch.allclose(pa[n], pb[n], atol=1e-3) for n in pa)
    # no signal anywhere: no forward, no optimizer step, no parameter change, and no sync
    # (the engine already holds these weights), which the step's log says
    assert out_a["optimizer_steps"] == 1 and "sync/skipped" not in out_a
    synced = []
    a.rollout.sync = lambda policy: synced.append(policy) or {}
    data.advantages = torch.zeros_like(adv)
    out = a.update(data)
    assert out["skipped_updates"] == 1 and out["update_rows"] == 0
    assert out["optimizer_steps"] == 0 and out["sync/skipped"] == 1.0 and synced == []
    assert out["param_update_norm"] == 0.0


def test_a_plugin_token_level_method_trains_without_harness_edits(tmp_path, process_group):
    """A method from a file passed with --plugin brings its own extra pass, token allocation,
    loss term and option; the loop runs them by name and trains two steps."""
    from harness import launch
    from harness.run import of_config
    from harness.trainer import Trainer

    plugin = str(Path(__file__).parent / "plugins" / "toy_method.py")
    config = resolve("smoke", {**TINY, "task": "toy", "plugins": (TOY, plugin),
                               "method": "toy-credit", "results_dir": str(tmp_path)})
    launch.validate(of_config(config))  # the plugin's method is found, its options check themselves
    trainer = Trainer(config)
    before = {n: p.detach().clone() for n, p in trainer.rollout.plain_model.named_parameters()}
    history = trainer.train(None)
    assert [h["step"] for h in history] == [1, 2]
    for h in history:
        assert h["time/replay"] > 0 and h["toy/max_weight"] >= 1.0
        assert h["toy_anchor_loss"] >= 0.0  # the loss term ran on every micro-batch
        assert h["loss"] == pytest.approx(h["pg_loss"] + 0.5 * h["toy_anchor_loss"])
    after = dict(trainer.rollout.plain_model.named_parameters())
    assert any(not torch.equal(before[n], after[n]) for n in before)


@pytest.mark.slow
def test_a_two_node_cluster_spreads_the_workers_and_matches_one_node(tmp_path):
    """The multi-node path for real: a two-node Ray cluster on this machine (Ray's
    cluster_utils: a head and a second raylet, one CPU each), joined with --ray-address, two
    workers placed STRICT_SPREAD. They run on different nodes, and the result (metrics, every
    step's log, the final parameters) equals the one-node two-worker run's."""
    import ray
    from ray.cluster_utils import Cluster

    from lab import cli

    flags = ["run", "--task", "toy", "--plugin", TOY, "--workers", "2", "--zero-stage", "3"]
    for name, value in TINY.items():
        flags += [f"--{name.replace('_', '-')}", str(value)]

    def result(folder):
        path = next((tmp_path / folder).rglob("seed0.json"))
        log = path.with_suffix(".train.jsonl").read_text().splitlines()
        return json.loads(path.read_text()), [json.loads(x) for x in log]

    assert cli.main(flags + ["--results-dir", str(tmp_path / "one")]) == 0
    ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    try:
        # without --ray-address a run starts its own instance, not joining the running cluster
        own = subprocess.run(
            [sys.executable, "-c", "import ray; from harness.backend import start_ray; "
             "start_ray(num_cpus=1); print(ray.get_runtime_context().gcs_address)"],
            capture_output=True, text=True, timeout=300, cwd=Path(__file__).parents[1])
        assert own.returncode == 0, own.stderr[-2000:]
        assert own.stdout.strip().splitlines()[-1] != cluster.address
        assert cli.main(flags + ["--results-dir", str(tmp_path / "two"), "--ray-address",
                                 cluster.address, "--placement-strategy", "STRICT_SPREAD"]) == 0
    finally:
        ray.shutdown()
        cluster.shutdown()
    (one, one_log), (two, two_log) = result("one"), result("two")
    assert len({w["node"] for w in one["workers"]}) == 1
    assert len({w["node"] for w in two["workers"]}) == 2  # one worker per node
    assert two["train"]["final_param_sha256"] == one["train"]["final_param_sha256"]
    assert two["metrics"] == one["metrics"]
    drop = ("time/", "gpu/")
    assert [{k: v for k, v in row.items() if not k.startswith(drop)} for row in two_log] == \
        [{k: v for k, v in row.items() if not k.startswith(drop)} for row in one_log]


@pytest.mark.slow
def test_a_worker_on_a_node_whose_disk_lacks_the_results_folder_refuses_before_training(
        tmp_path):
    """Two nodes whose disks differ where the results go: the second node runs in a mount
    namespace of its own with an empty file system over the results folder (a node-local
    disk), the head node has no CPU for workers, so rank 0 runs on the second node. It refuses
    before training, naming the folder, instead of writing the result where the driver never
    reads it."""
    import os
    import shutil
    import signal

    import ray
    from ray.cluster_utils import Cluster

    from lab import cli

    if shutil.which("unshare") is None or subprocess.run(
            ["unshare", "-m", "true"], capture_output=True).returncode != 0:
        pytest.skip("no mount namespaces here (unshare -m)")
    results = tmp_path / "results"
    results.mkdir()
    ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    ray_cli = str(Path(sys.executable).parent / "ray")
    node = subprocess.Popen(
        ["unshare", "-m", "--propagation", "private", "sh", "-c",
         f'mount -t tmpfs tmpfs "{results}" && exec "{ray_cli}" start --address '
         f'"{cluster.address}" --num-cpus 2 --block'],
        start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import time

        ray.init(address=cluster.address)
        deadline = time.monotonic() + 120
        while sum(n["Alive"] for n in ray.nodes()) < 2:  # the second node has joined
            assert time.monotonic() < deadline, "the second Ray node did not start"
            time.sleep(1)
        ray.shutdown()
        flags = ["run", "--task", "toy", "--plugin", TOY, "--workers", "1",
                 "--results-dir", str(results), "--checkpoint-dir", str(tmp_path / "ck"),
                 "--ray-address", cluster.address]
        for name, value in TINY.items():
            flags += [f"--{name.replace('_', '-')}", str(value)]
        with pytest.raises(RuntimeError, match="is not the driver's here on rank 0's node"):
            cli.main(flags)
    finally:
        ray.shutdown()
        os.killpg(node.pid, signal.SIGTERM)
        node.wait(60)
        cluster.shutdown()
    assert not list(results.rglob("seed0.json"))
