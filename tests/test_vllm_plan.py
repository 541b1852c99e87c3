"""The per-GPU plan of the paper presets (harness/rollouts/vllm_plan.py), on hand-computed
numbers, and the dry run that prints it and refuses a plan past the card."""
import pytest

from harness import checks
from harness import config as cfg
from harness.rollouts import vllm_plan
from harness.run import of_config

GIB = 2**30


def test_the_shape_of_qwen25_3b_by_hand():
    s = vllm_plan.PUBLISHED["Qwen2.5-3B-Instruct"]
    embed = 151936 * 2048
    layer = (2048 * 2048 + 2 * 2048 * 256 + 2048 * 2048 + (2048 + 512)  # q, k+v, o, biases
             + 3 * 2048 * 11008 + 2 * 2048)  # gated MLP, two norms
    assert layer == 77_076_992
    assert s.params == embed + 36 * layer + 2048 == 3_085_938_688  # 3.09B, tied head
    assert s.kv_bytes_per_token() == 2 * 36 * 2 * 128 * 2 == 36_864
    # an untied head counts the vocabulary twice; Qwen3 has no q/k/v bias
    seven = vllm_plan.PUBLISHED["Qwen2.5-7B-Instruct"]
    assert seven.params == pytest.approx(7.62e9, rel=0.01)
    assert vllm_plan.PUBLISHED["Qwen3-4B-Instruct-2507"].params == pytest.approx(4.02e9, rel=0.01)


def test_the_3b_tool_presets_plan_by_hand():
    c = cfg.resolve("paper-tool-3b", {})
    p = vllm_plan.plan(vllm_plan.PUBLISHED["Qwen2.5-3B-Instruct"], c)
    params = 3_085_938_688
    assert p.zero3 == params * 16 // 8 == 6_171_877_376  # 6.2 GB per GPU
    assert p.vllm_awake == int(0.35 * 80 * GIB)  # 28 GiB
    assert p.kv == int(0.35 * 80 * GIB) - 2 * params - int(1.5 * GIB)
    assert p.kv_tokens == p.kv // 36_864 == 604_445
    # 512 prompts over 8 GPUs, each group's 2,048-token prompt cached once, 4 x 1,024 responses
    assert (c.rollout.max_prompt_tokens, c.rollout.max_response_tokens) == (2048, 1024)
    assert p.step_tokens == 64 * (2048 + 4 * 1024) == 393_216
    assert p.request_tokens == 2048 + 1024
    # micro-batch 4 x 3,072 tokens: fp32 logits and log-softmax, checkpointed activations
    per_layer = 4 * 3072 * 2048
    assert p.update_peak == 4 * 3072 * 151936 * 8 + 36 * per_layer * 2 + per_layer * 34
    assert vllm_plan.problems(p) == []


def test_a_plan_past_the_card_is_refused_with_its_fix():
    shape = vllm_plan.PUBLISHED["Qwen2.5-7B-Instruct"]
    greedy = vllm_plan.plan(shape, cfg.resolve("paper-if-qwen2.5-7b", {"vllm_gpu_memory": 0.95}))
    assert any("lower --vllm-gpu-memory" in x for x in vllm_plan.problems(greedy))
    big = vllm_plan.plan(shape, cfg.resolve("paper-if-qwen2.5-7b", {"micro_batch_size": 32}))
    assert any("lower --micro-batch-size" in x for x in vllm_plan.problems(big))
    small = vllm_plan.plan(shape, cfg.resolve("paper-if-qwen2.5-7b", {"vllm_gpu_memory": 0.15}))
    assert any("leaves no KV cache" in x for x in vllm_plan.problems(small))


@pytest.mark.parametrize("name", ["paper-sql-3b", "paper-sql-7b", "paper-if-qwen2.5-7b",
                                  "paper-if-qwen3-4b", "paper-tool-1.5b", "paper-tool-3b"])
def test_every_paper_preset_fits_an_80gb_card(name):
    c = cfg.resolve(name, {})
    p, source = vllm_plan.for_config(c)
    assert "published config" in source
    assert p.request_tokens == c.rollout.max_prompt_tokens + c.rollout.max_response_tokens
    assert vllm_plan.problems(p) == []


def test_the_check_refuses_and_the_dry_run_prints_the_plan(capsys):
    from lab import cli

    bad = checks.settings_problems(
        of_config(cfg.resolve("paper-tool-3b", {"micro_batch_size": 64})))
    assert any("update's peak" in x for x in bad), bad
    rc = cli.main(["run", "--preset", "paper-tool-3b", "--method", "gdpo", "--task", "bfcl",
                   "--micro-batch-size", "64", "--dry-run"])
    out = capsys.readouterr().out
    assert rc == 2
    assert "per-GPU plan (an estimate from the published config of Qwen2.5-3B-Instruct" in out
    assert "ZeRO-3 state (resident): 5.7 GiB" in out
    assert "lower --micro-batch-size" in out


def test_a_model_folders_config_is_read(tmp_path):
    import json

    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 1000,
        "tie_word_embeddings": True, "model_type": "llama"}))
    shape, source = vllm_plan.shape_of(str(folder))
    assert source.endswith("config.json")
    assert shape.params == 1000 * 64 + 2 * (64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 128
                                            + 2 * 64) + 64
    assert vllm_plan.shape_of(str(tmp_path / "unknown")) is None


def test_the_gpu_checks_plan_stage_plans_every_paper_preset(capsys, monkeypatch):
    from harness.presets import PRESETS, Preset
    from lab import gpu_plan

    assert gpu_plan.main([]) == 0
    out = capsys.readouterr().out
    for name in ("paper-sql-3b", "paper-sql-7b", "paper-if-qwen2.5-7b", "paper-if-qwen3-4b",
                 "paper-tool-1.5b", "paper-tool-3b"):
        assert f"\n{name}:\n" in out
    assert "DOES NOT FIT" not in out
    # a preset made not to fit fails the stage, naming the setting
    base = PRESETS.get("paper-tool-3b")
    monkeypatch.setitem(PRESETS._entries, "paper-tool-3b-huge", Preset(
        "paper-tool-3b-huge", "test", {**base.overrides, "micro_batch_size": 64}))
    assert gpu_plan.main(["paper-tool-3b-huge"]) == 1
    huge = capsys.readouterr().out
    assert "DOES NOT FIT" in huge and "lower --micro-batch-size" in huge
