"""The lean rollout engine samples the policy's own distribution: its log-probs equal the HF
model's on every supported architecture, its greedy responses equal ``generate``'s, its
sampling and top-k/top-p filters are transformers', and a gap to the policy stops a run."""
import math

import pytest
import torch

from harness.rollouts.lean import (LeanDecoder, LeanRollout, filter_logits, sample_tokens,
                                   unsupported)
from harness.train.logprobs import sequence_logprobs
from tasks.base import Example


def tiny(kind: str, vocab: int):
    """A 2-layer model of each supported family, seeded, with a non-trivial attention layout
    (4 query heads on 2 key/value heads)."""
    import transformers

    common = dict(vocab_size=vocab, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                  tie_word_embeddings=kind != "mistral", rms_norm_eps=1e-6)
    config = {
        "llama": lambda: transformers.LlamaConfig(**common, rope_theta=10000.0),
        "mistral": lambda: transformers.MistralConfig(**common, sliding_window=None),
        "qwen2": lambda: transformers.Qwen2Config(**common, use_sliding_window=False),
        "qwen3": lambda: transformers.Qwen3Config(**common, head_dim=16,
                                                  use_sliding_window=False),
    }[kind]()
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():  # larger weights than the init's: peaked, order-sensitive logits
        for name, p in model.named_parameters():
            if p.dim() == 2:
                p.normal_(0, 0.15)
            elif "norm" in name:  # norm weights away from 1, so that they matter
                p.uniform_(0.5, 1.5)
    return model


@pytest.fixture(scope="module")
def tokenizer():
    from harness.models import load_tokenizer

    return load_tokenizer("tiny-random")


def prompts():
    return [Example(id=str(i), messages=({"role": "user", "content": text},), reference=None)
            for i, text in enumerate(["Hi", "Name three colours of the rainbow, please.",
                                      "What is 2 + 2?"])]


def policy_logprobs(model, ro, temperature=1.0):
    with torch.no_grad():
        return sequence_logprobs(model, ro, list(range(len(ro.texts))), temperature)


@pytest.mark.parametrize("kind", ["llama", "mistral", "qwen2", "qwen3"])
def test_fp32_lean_samples_with_the_models_own_log_probs(kind, tokenizer):
    model = tiny(kind, len(tokenizer))
    if kind == "qwen2":  # q/k/v biases are part of the family: make them count
        with torch.no_grad():
            for layer in model.model.layers:
                layer.self_attn.q_proj.bias.normal_(0, 0.3)
                layer.self_attn.k_proj.bias.normal_(0, 0.3)
    lean = LeanRollout(model, tokenizer, "float32", rows_hint=2)
    ro = lean.generate(prompts(), 2, 10, temperature=0.7, seed=3)
    assert ro.response_ids.shape[0] == 6 and ro.example_index == [0, 0, 1, 1, 2, 2]
    # prompts of different lengths (left padding), positions, shared prefill, both cache parts
    diff = (policy_logprobs(model, ro, 0.7) - ro.logprobs)[ro.response_mask.bool()].abs()
    assert diff.max() < 1e-4
    assert (ro.logprobs[ro.response_mask == 0] == 0).all()


def test_bf16_lean_stays_within_the_runs_tolerance(tokenizer):
    model = tiny("llama", len(tokenizer))
    ro = LeanRollout(model, tokenizer, "bfloat16").generate(prompts(), 2, 10, seed=1)
    diff = (policy_logprobs(model, ro) - ro.logprobs)[ro.response_mask.bool()].abs()
    assert 0 < diff.mean() < 0.05  # bf16 is not exact, and close


def test_greedy_lean_equals_transformers_generate(tokenizer):
    from harness.rollouts import HFRollout

    model = tiny("llama", len(tokenizer))
    lean = LeanRollout(model, tokenizer, "float32").generate_eval(prompts(), 12, 2)
    hf = HFRollout(model, tokenizer).generate_eval(prompts(), 12, 2)
    assert lean == hf and any(lean)


def test_same_seed_same_samples_and_sync_reads_new_weights(tokenizer):
    model = tiny("llama", len(tokenizer))
    lean = LeanRollout(model, tokenizer, "float32")
    a = lean.generate(prompts(), 2, 8, seed=5)
    b = lean.generate(prompts(), 2, 8, seed=5)
    assert torch.equal(a.response_ids, b.response_ids)
    with torch.no_grad():
        model.model.layers[1].mlp.down_proj.weight.mul_(3.0)
    lean.decoder.load()  # what sync does after copying the trained weights in
    c = lean.generate(prompts(), 2, 8, seed=5)
    diff = (policy_logprobs(model, c) - c.logprobs)[c.response_mask.bool()].abs()
    assert diff.max() < 1e-4


def test_a_sync_that_changes_no_weight_keeps_the_packed_decoder(tokenizer, monkeypatch):
    import copy
    from types import SimpleNamespace

    model = tiny("llama", len(tokenizer))
    lean = LeanRollout(copy.deepcopy(model), tokenizer, "float32")
    policy = SimpleNamespace(module=model)  # what sync reads of a DeepSpeed engine
    loads, load = [], lean.decoder.load
    monkeypatch.setattr(lean.decoder, "load", lambda: (loads.append(1), load())[1])
    assert lean.sync(policy)["param_update_norm"] == 0.0 and loads == []
    with torch.no_grad():
        model.model.layers[1].mlp.down_proj.weight.mul_(3.0)
    assert lean.sync(policy)["param_update_norm"] > 0 and loads == [1]
    c = lean.generate(prompts(), 2, 8, seed=5)  # samples the changed policy
    diff = (policy_logprobs(model, c) - c.logprobs)[c.response_mask.bool()].abs()
    assert diff.max() < 1e-4


def test_filters_are_transformers_top_k_and_top_p():
    from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

    torch.manual_seed(0)
    logits = torch.randn(5, 50) * 3
    for k, p in [(0, 0.9), (7, 1.0), (7, 0.5), (0, 1.0), (3, 0.99)]:
        want = logits.clone()
        if k:
            want = TopKLogitsWarper(k)(None, want)
        if p < 1:
            want = TopPLogitsWarper(p)(None, want)
        assert torch.equal(filter_logits(logits, k, p).isinf(), want.isinf()), (k, p)


def test_sampling_draws_the_softmax_distribution():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2, 0.0]])).repeat(20000, 1)
    drawn = sample_tokens(logits, torch.Generator().manual_seed(0))
    freq = torch.bincount(drawn, minlength=4).double() / len(drawn)
    assert freq[3] == 0  # a token of zero mass is never drawn
    assert torch.allclose(freq[:3], torch.tensor([0.5, 0.3, 0.2], dtype=torch.double),
                          atol=0.015)


def test_unsupported_models_are_named():
    import transformers

    assert unsupported(transformers.LlamaConfig()) == []
    why = unsupported(transformers.GPT2Config())
    assert why and "gpt2" in why[0]
    assert "sliding" in " ".join(unsupported(transformers.MistralConfig(sliding_window=4096)))
    with pytest.raises(ValueError, match="--engine hf"):
        LeanDecoder(transformers.AutoModelForCausalLM.from_config(transformers.GPT2Config(
            n_layer=1, n_embd=32, n_head=2, vocab_size=100)))


def test_lean_settings_are_checked_before_a_run():
    from harness.rollouts.checks import lean_problems
    from harness.config import resolve

    assert lean_problems(resolve("smoke", {})) == []
    assert any("--use-gpu" in p for p in lean_problems(resolve("smoke",
                                                                      {"use_gpu": True})))
    assert any("rollout_dtype" in p for p in lean_problems(
        resolve("smoke", {"rollout_dtype": "float16"})))


def test_a_model_folder_the_lean_engine_cannot_run_is_refused_from_its_config_json(tmp_path):
    import json

    from harness.rollouts.checks import lean_problems
    from harness.config import resolve

    def problems(**hf):
        (tmp_path / "config.json").write_text(json.dumps(hf))
        return lean_problems(resolve("smoke", {"model": str(tmp_path)}))

    assert problems(model_type="llama", hidden_act="silu") == []
    assert any("'gpt2'" in p and "--engine hf" in p for p in problems(model_type="gpt2"))
    assert any("sliding-window" in p for p in problems(
        model_type="qwen2", sliding_window=4096, use_sliding_window=True))
    assert problems(model_type="qwen2", sliding_window=4096, use_sliding_window=False) == []


def test_a_gap_to_the_policy_stops_the_run():
    from harness.train.update import check_sampling_gap, sampling_gap

    logp = torch.tensor([[-1.0, -2.0, -3.0]])
    engine = torch.tensor([[-1.0, -2.5, -9.0]])
    mask = torch.tensor([[1, 1, 0]])
    total, worst, n = sampling_gap(logp, engine, mask)
    assert (total, worst, n) == (0.5, 0.5, 2)  # the masked token's gap of 6 is not counted
    assert check_sampling_gap(total, worst, n, 0.3) == 0.25
    with pytest.raises(RuntimeError, match="rollout-logprob-tolerance"):
        check_sampling_gap(total, worst, n, 0.2)
    assert math.isclose(check_sampling_gap(1.0, 1.0, 4, 0.25), 0.25)
