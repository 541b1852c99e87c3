"""--update-dtype: the update's forward and backward under bf16 autocast, float32 weights and
optimizer; ``auto`` decided by the machine when the run is resolved; a stored seed without
the field read as float32."""
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from harness.config import RunConfig, resolve
from harness.run import of_config

TOY = str(Path(__file__).parent / "plugins" / "toy_task.py")
TINY = {"model": "tiny-random", "method": "gdpo", "steps": 1, "prompts_per_step": 2,
        "group_size": 4, "max_response_tokens": 12, "eval_max_response_tokens": 8,
        "eval_limit": 6, "lr": 1e-2, "max_prompt_tokens": 4096, "task": "toy",
        "plugins": (TOY,)}


@pytest.fixture(scope="module")
def process_group():
    from harness import engine as eng

    eng.init_single_process()


def test_auto_is_decided_by_the_machine_when_the_run_is_resolved(monkeypatch):
    from harness import autovalues

    for has, want in ((True, "bfloat16"), (False, "float32")):
        monkeypatch.setattr(autovalues, "bf16_here", lambda has=has: has)
        config = resolve("smoke", {"update_dtype": "auto"})
        assert config.training.update_dtype == want
        # the sampling dtype too, by default; a config made directly is decided by of_config
        assert config.rollout.rollout_dtype == want
        assert of_config(RunConfig()).config.rollout.rollout_dtype == want
        gpu = resolve("smoke", {"update_dtype": "auto", "use_gpu": True})
        assert gpu.training.update_dtype == "bfloat16" == gpu.rollout.rollout_dtype
        assert resolve("smoke", {"rollout_dtype": "float32"}).rollout.rollout_dtype == "float32"
    assert resolve("smoke", {"update_dtype": "float32"}).training.update_dtype == "float32"


def test_native_bf16_is_read_from_the_cpu_flags_not_onednn_s_emulation():
    from harness.autovalues import native_bf16

    # AVX-512 without BF16 (oneDNN emulates bf16 there, slower than float32), AVX2
    assert native_bf16(frozenset({"avx2", "avx512f", "avx512bw", "avx512_vnni"})) is False
    assert native_bf16(frozenset({"avx2", "fma"})) is False
    assert native_bf16(frozenset({"avx512f", "avx512_bf16"})) is True
    assert native_bf16(frozenset({"amx_tile", "amx_bf16"})) is True
    assert native_bf16(frozenset({"fp", "asimd", "bf16"})) is True  # Arm's Features line


def test_the_sampling_dtype_is_not_the_setting_and_is_named_where_unusual(tmp_path):
    """A seed sampled in float32 because its CPU lacks bf16 is another sample of the same
    setting (the folder and the pooling check agree); a cell names its dtype when it is not
    its machine's own choice."""
    from harness import provenance
    from harness.results import (atomic_write_json, check_stored, config_hash, make_record,
                                 run_dir)

    bf16, fp32 = (resolve("smoke", {"rollout_dtype": d}) for d in ("bfloat16", "float32"))
    assert run_dir(bf16) == run_dir(fp32)
    path = tmp_path / "seed0.json"
    atomic_write_json(path, make_record(bf16, {}, train={}, wall_seconds=0.0))
    check_stored(fp32, path)  # no refusal: the same setting
    assert config_hash(fp32) != config_hash(bf16)  # the hash records which dtype sampled
    amx = {"arch": "x86_64", "isa": "AVX512", "bf16": True, "amx": True, "gpus": [],
           "onednn_bf16": True}
    avx2 = {"arch": "x86_64", "isa": "AVX2", "bf16": False, "amx": False, "gpus": [],
            "onednn_bf16": False}

    def label(config, machine):
        return provenance.machine_of_result({"config": config.to_dict(),
                                             "provenance": {"machine": machine}})
    assert label(bf16, amx) == "x86_64 AVX512, bf16, AMX"  # each kind's own choice: no note
    assert label(fp32, avx2) == "x86_64 AVX2, no bf16"
    assert label(fp32, amx) == "x86_64 AVX512, bf16, AMX, sampled in float32"
    assert label(bf16, avx2) == "x86_64 AVX2, no bf16, sampled in bfloat16"
    # a record from before the flags were read (bf16 meant oneDNN's check): no note
    del avx2["onednn_bf16"]
    assert label(bf16, avx2) == "x86_64 AVX2, no bf16"


def test_a_stored_seed_without_the_field_ran_in_float32():
    data = resolve("smoke", {"update_dtype": "bfloat16"}).to_dict()
    assert RunConfig.from_dict(data).training.update_dtype == "bfloat16"
    del data["training"]["update_dtype"]
    assert RunConfig.from_dict(data).training.update_dtype == "float32"


def test_an_unknown_update_dtype_is_refused_by_the_run_s_check():
    from harness.checks import settings_problems

    config = resolve("smoke", {"update_dtype": "float16"})
    assert any("unknown update_dtype 'float16'" in p for p in settings_problems(of_config(config)))


@pytest.mark.model
def test_a_bf16_update_computes_in_bf16_and_matches_float32(tmp_path, process_group):
    """On the same rollouts: the decoder's products ran in bf16, the head in float32; the
    gradient and the step agree with float32's to bf16's precision; weights stay float32 and
    the head's forward is the class's again afterwards."""
    from harness.trainer import Trainer

    config = resolve("smoke", {**TINY, "results_dir": str(tmp_path)})
    a, b = Trainer(config), Trainer(config)
    data, _ = a.collect(0)
    b.config = replace(config, training=replace(config.training, update_dtype="bfloat16"))
    model = b.engine.module
    seen = {}
    proj = model.model.layers[0].mlp.down_proj

    def record(name):
        def hook(module, inputs, output):
            seen.setdefault(name, output.dtype)  # returns None: the output is kept
        return hook

    hooks = [proj.register_forward_hook(record("proj")),
             model.lm_head.register_forward_hook(record("head"))]
    out_a = a.update(data)
    out_b = b.update(data)
    for h in hooks:
        h.remove()
    assert seen == {"proj": torch.bfloat16, "head": torch.float32}
    assert "forward" not in model.lm_head.__dict__
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert out_b["grad_norm"] == pytest.approx(out_a["grad_norm"], rel=0.05)
    assert out_b["loss"] == pytest.approx(out_a["loss"], abs=0.02)
    # the weights after the step (the engine's copy the rollouts use, synced by update)
    before = {n: p.detach().clone() for n, p in Trainer(config).rollout.plain_model
              .named_parameters()}
    step_a = torch.cat([(p.detach() - before[n]).flatten()
                        for n, p in a.rollout.plain_model.named_parameters()])
    step_b = torch.cat([(p.detach() - before[n]).flatten()
                        for n, p in b.rollout.plain_model.named_parameters()])
    # AdamW's first step is ~lr x sign(g): the two steps point the same way, up to the signs
    # of gradients near 0, which rounding flips
    assert step_a.norm() > 0 and step_b.norm() > 0
    assert torch.nn.functional.cosine_similarity(step_a, step_b, dim=0) > 0.9


@pytest.mark.model
def test_autocast_keeps_a_float32_head_and_a_bf16_model_s_own_head():
    """The head's logits: float32 from float32 weights; from bf16 weights (--dtype bfloat16)
    bf16, not an error; the head's forward is the class's again afterwards."""
    from harness.models import load_model
    from harness.train.update import autocast

    ids = torch.tensor([[1, 2, 3, 4]])
    for dtype, want in ((torch.float32, torch.float32), (torch.bfloat16, torch.bfloat16)):
        model = load_model("tiny-random", seed=0).to(dtype)
        with autocast("bfloat16", model):
            logits = model(input_ids=ids).logits
        assert logits.dtype == want
        assert "forward" not in model.lm_head.__dict__
    with autocast("float32", model):
        assert "forward" not in model.lm_head.__dict__
