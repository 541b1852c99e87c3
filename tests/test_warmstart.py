"""The supervised warm start: its data, its cache key, its training loop and its folder."""
import json
import math
from dataclasses import replace

import pytest
import torch

from harness.config import resolve
from harness.run import of_config
from harness.warmstart import cache
from harness.warmstart.data import benchmark_overlap, demonstrations, user_turns


def run_of(preset: str, overrides: dict):
    return of_config(resolve(preset, overrides))

TINY = {"model": "tiny-random", "max_response_tokens": 12, "eval_max_response_tokens": 8,
        "eval_limit": 6, "max_prompt_tokens": 4096, "prompts_per_step": 2, "group_size": 4,
        "warm_start_steps": 8, "warm_start_batch": 4, "warm_start_lr": 1e-2,
        "micro_batch_size": 2, "warm_start_layers": 0}


@pytest.fixture(scope="module")
def process_group():
    from harness import engine as eng

    eng.init_single_process()


def test_tool_demonstrations_earn_full_rewards_and_are_no_benchmark_items():
    from tasks import TASKS

    demos = demonstrations(run_of("smoke-learn", {"task": "bfcl"}))
    task = TASKS.get("bfcl")
    assert len(demos) == 512
    rows = task.compute_rewards([d.example for d in demos[:64]], [d.target for d in demos[:64]])
    assert all(r == [1.0, 3.0] for r in rows)  # format 1, exact-match correctness +3
    bench = task.load_eval(None)
    assert len(bench) == 2501
    assert benchmark_overlap(demos, bench) == []
    # the check itself can fail: a benchmark item slipped into the data is found
    planted = replace(demos[0], example=bench[7])
    assert benchmark_overlap([planted, *demos[1:]], bench) == [bench[7].id]


def test_sql_demonstrations_are_gold_queries_in_the_layout_and_not_dev_items():
    from tasks import TASKS
    from tasks.sql.layout import extract_sql, format_ok

    demos = demonstrations(run_of("smoke-learn", {"task": "spider-mini"}))
    task = TASKS.get("spider-mini")
    assert len(demos) == 96
    assert all(format_ok(d.target) for d in demos)
    assert all(extract_sql(d.target) == d.example.reference.strip().rstrip(";").strip()
               for d in demos)
    rows = task.compute_rewards([d.example for d in demos], [d.target for d in demos])
    assert all(r == [1.0, 1.0, 1.0] for r in rows)
    assert benchmark_overlap(demos, task.load_eval(None)) == []
    assert "library" in demos[0].target or "think" in demos[0].target
    assert all(user_turns(d.example) for d in demos)


def test_instruction_training_sets_have_no_demonstrations():
    with pytest.raises(ValueError, match="cannot warm-start"):
        demonstrations(run_of("smoke-learn", {"task": "ifeval"}))


def test_cache_key_changes_with_every_setting():
    base = resolve("smoke-learn", {"task": "bfcl"})

    def key(config, data="data"):  # the folder's key: the hash that ends its name
        return cache.folder(of_config(config), data).name.rsplit("-", 1)[1]

    changed = [
        key(base, "other data"),
        *(key(replace(base, warmstart=replace(base.warmstart, **{f: v})))
          for f, v in (("warm_start_steps", 99), ("warm_start_lr", 1e-3),
                       ("warm_start_batch", 16), ("warm_start_seed", 5),
                       ("warm_start_layers", 0))),
        key(replace(base, model=replace(base.model, model="tiny-random"))),
        key(replace(base, model=replace(base.model, dtype="bfloat16"))),
        key(replace(base, rollout=replace(base.rollout, max_prompt_tokens=64))),
        # the warm start's optimizer reads these two training settings
        key(replace(base, training=replace(base.training, weight_decay=0.1))),
        key(replace(base, training=replace(base.training, grad_clip=0.5))),
    ]
    assert len({key(base), *changed}) == len(changed) + 1
    # what does not change the weights does not change the key: the RL seed, the method
    assert key(replace(base, seed=3, method=replace(base.method, method="grpo"))) == key(base)
    # the spider-mini warm start is another folder
    assert "spider-mini-train" in run_of("smoke-learn", {"task": "spider-mini"}
                                         ).warm_start_folder.name


def test_policy_source_refuses_a_missing_warm_start(tmp_path, monkeypatch):
    assert cache.policy_source(run_of("smoke", {**TINY, "task": "bfcl"})) == "tiny-random"
    monkeypatch.setattr(cache, "folder", lambda run, data_hash, cache_dir=None: tmp_path / "no")
    with pytest.raises(FileNotFoundError, match="harness sft"):
        cache.policy_source(run_of("smoke-learn", {**TINY, "task": "bfcl"}))


def test_sft_loss_decreases_and_folder_loads_back(tmp_path, process_group, monkeypatch):
    from harness.models import load_model, load_tokenizer
    from harness.trainer import Trainer
    from harness.warmstart import sft

    target = tmp_path / "ws"
    monkeypatch.setattr(cache, "folder", lambda run, data_hash, cache_dir=None: target)
    config = resolve("smoke-learn", {**TINY, "task": "bfcl", "results_dir": str(tmp_path)})
    path = sft.sft_worker(of_config(config), probe_prompts=2, probe_steps=(0, 4))
    assert path == target and cache.is_complete(target)
    info = json.loads((target / cache.MARKER).read_text())
    losses = [h["loss"] for h in info["history"]]
    assert len(losses) == 8 and all(math.isfinite(x) for x in losses)
    assert losses[-1] < 0.8 * losses[0]
    assert info["key"]["steps"] == 8 and info["demonstrations"] == 512
    assert [p["step"] for p in info["probes"]] == [0, 4, 8]
    probe = info["probes"][-1]
    assert 0.0 <= probe["groups_with_signal"] <= 1.0 and 0.0 <= probe["format_rate"] <= 1.0
    # the folder is a plain HF model with the base tokenizer and chat template
    base_tok, tok = load_tokenizer("tiny-random"), load_tokenizer(str(target))
    assert tok.get_vocab() == base_tok.get_vocab()
    assert tok.chat_template == base_tok.chat_template
    msgs = [{"role": "user", "content": "hi"}]
    assert tok.apply_chat_template(msgs, tokenize=False) == \
        base_tok.apply_chat_template(msgs, tokenize=False)
    trained, base = load_model(str(target)), load_model("tiny-random")
    assert any(not torch.equal(a, b) for a, b in zip(trained.parameters(), base.parameters()))
    # an RL run with --warm-start starts from exactly these weights
    trainer = Trainer(replace(config, training=replace(config.training, steps=0)))
    got = dict(trainer.rollout.plain_model.named_parameters())
    assert all(torch.equal(p, got[n]) for n, p in trained.named_parameters())


def test_warm_start_refuses_benchmark_items_before_training(monkeypatch):
    from harness.warmstart.data import benchmark_items_problem
    from tasks import TASKS

    run = run_of("smoke-learn", {"task": "spider-mini"})
    dev = TASKS.get("spider-mini").load_eval(None)
    assert benchmark_items_problem(run, run.demonstrations, dev) is None  # the real data passes
    leaked = [replace(run.demonstrations[0], example=dev[3]), *run.demonstrations[1:]]
    assert "1 warm-start demonstrations are benchmark items" in \
        benchmark_items_problem(run, leaked, dev)


def test_warm_start_layers_freezes_everything_below_the_top_blocks():
    from harness.models import load_model
    from harness.warmstart.sft import top_layers

    assert top_layers(0) is None  # train every parameter
    model = load_model("tiny-random")
    top_layers(1)(model)
    trained = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trained and all(n.startswith(("model.layers.1.", "model.norm.")) for n in trained)
    assert "model.norm.weight" in trained and not any("embed" in n for n in trained)
    with pytest.raises(ValueError, match="has 2 blocks"):
        top_layers(3)(load_model("tiny-random"))
