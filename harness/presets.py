"""Presets: named starting points of a run's settings, as data (field name -> value).

The paper's Table 9 columns (``paper-tool``, ``paper-sql``, ``paper-if``), one preset per paper
model on one node of 8 GPUs, and the CPU smoke settings. ``harness.config.resolve`` applies
field defaults, then a preset, then flags.
"""
from __future__ import annotations

from dataclasses import dataclass

from common.registry import Registry


@dataclass(frozen=True)
class Preset:
    name: str
    help: str
    overrides: dict
    # a paper setting: it trains on the family's published training set (read from --data-dir)
    # and a model folder with config.json; an offline generator or an embedded model is refused
    # instead of standing in for them (a result filed under a paper setting is the paper's)
    published: bool = False
    # it starts from the untrained embedded model: where a warm start exists for the training
    # set (its demonstrations) and is not asked for, the run says before it starts that little
    # or nothing may train (rewards rarely vary within a group)
    untrained: bool = False


PRESETS: Registry[Preset] = Registry("preset")


def published(name: str) -> bool:
    """Whether preset ``name`` is a paper setting (``Preset.published``); False for a name no
    preset has (the run's resolution refuses that name itself)."""
    return name in PRESETS and PRESETS.get(name).published

# Paper Table 9 settings shared by the three task families (and the GDPO/ToolRL code's defaults)
_PAPER_COMMON = {"lr": 1e-6, "max_prompt_tokens": 2048, "max_response_tokens": 1024,
                 "eval_max_response_tokens": 1024, "kl_coef": 0.0, "dtype": "bfloat16",
                 "use_gpu": True, "engine": "hf"}
PRESETS.add("paper-tool", Preset(
    "paper-tool",
    "paper Table 9, tool calling: Qwen2.5-1.5B/3B-Instruct (pass --model FOLDER), RLLA, "
    "512 prompts x G=4, 100 steps, temperature 1.0, lr 1e-6, max response 1024",
    {"prompts_per_step": 512, "group_size": 4, "steps": 100, "temperature": 1.0, "top_p": 1.0,
     "top_k": 0, **_PAPER_COMMON}, published=True,
))
PRESETS.add("paper-sql", Preset(
    "paper-sql",
    "paper Table 9, text-to-SQL: Qwen2.5-Coder-3B/7B-Instruct (pass --model FOLDER), Spider "
    "train (--data-dir), 32 prompts x G=8, 100 steps, temperature 1.1, lr 1e-6, max response 1024",
    {"prompts_per_step": 32, "group_size": 8, "steps": 100, "temperature": 1.1, "top_p": 1.0,
     "top_k": 0, **_PAPER_COMMON}, published=True,
))
PRESETS.add("paper-if", Preset(
    "paper-if",
    "paper Table 9, instruction following: Qwen2.5-7B-Instruct or Qwen3-4B-Instruct-2507 (pass "
    "--model FOLDER), HIR-16K (--data-dir), 64 prompts x G=8, 300 steps, temperature 1.0, "
    "top-p 0.99, top-k 100, lr 1e-6, max response 1024",
    {"prompts_per_step": 64, "group_size": 8, "steps": 300, "temperature": 1.0, "top_p": 0.99,
     "top_k": 100, **_PAPER_COMMON}, published=True,
))
# One preset per paper model: its family's Table 9 settings on one node of 8 x 80 GB GPUs
# (one Ray Train worker per GPU, ZeRO-3, vLLM colocated and asleep during updates), the model
# read by name from --model-dir. Micro-batches are sized for 80 GB from the arithmetic below
# (not measured here: no GPU run of these sizes was made). Per GPU, ZeRO-3 holds 1/8 of the
# bf16 weights, fp32 master weights and Adam moments (16 bytes x params / 8: 7B -> 14 GB); the
# largest activation is the fp32 logits of a micro-batch, micro x 3,072 tokens x 152k vocab x
# 4 bytes (1.9 GB per response, plus as much again for their log-softmax), with gradient
# checkpointing keeping the layers' share small; vLLM, awake only while generating, takes
# vllm_gpu_memory (0.35 = 28 GB). Accumulation = the worker's responses per optimizer step /
# micro-batch (see harness.engine.ds_config).
_PAPER_MODELS = (
    # preset, family, model folder name, micro-batch
    ("paper-sql-3b", "paper-sql", "Qwen2.5-Coder-3B-Instruct", 4),
    ("paper-sql-7b", "paper-sql", "Qwen2.5-Coder-7B-Instruct", 2),
    ("paper-if-qwen2.5-7b", "paper-if", "Qwen2.5-7B-Instruct", 2),
    ("paper-if-qwen3-4b", "paper-if", "Qwen3-4B-Instruct-2507", 4),
    ("paper-tool-1.5b", "paper-tool", "Qwen2.5-1.5B-Instruct", 8),
    ("paper-tool-3b", "paper-tool", "Qwen2.5-3B-Instruct", 4),
)
for _name, _family, _model, _micro in _PAPER_MODELS:
    PRESETS.add(_name, Preset(
        _name,
        f"{_family} on {_model} (read from --model-dir), one node of 8 x 80 GB GPUs: 8 "
        f"workers, ZeRO-3, vLLM rollouts, micro-batch {_micro}",
        {**PRESETS.get(_family).overrides, "model": _model, "engine": "vllm", "workers": 8,
         "gpus_per_worker": 1.0, "zero_stage": 3, "gradient_checkpointing": True,
         "micro_batch_size": _micro}, published=True,
    ))


PRESETS.add("smoke", Preset(
    "smoke",
    "CPU, minutes: the embedded SmolLM2-135M, 4 steps of 2 prompts x G=4, short responses, "
    "a 20-item stratified BFCL subset (2 per category)",
    {"prompts_per_step": 2, "group_size": 4, "steps": 4, "temperature": 1.0, "top_p": 1.0,
     "top_k": 0, "lr": 1e-5, "max_prompt_tokens": 1024, "max_response_tokens": 96,
     "eval_max_response_tokens": 128, "eval_limit": 20, "micro_batch_size": 4,
     "dtype": "float32", "use_gpu": False, "workers": 1,
     # one worker: ZeRO-3 has nothing to partition and costs ~2 s per optimizer step here;
     # at micro-batch 4 the activations fit without recomputation (bench step)
     "zero_stage": 0, "gradient_checkpointing": False}, untrained=True,
))


PRESETS.add("smoke-learn", Preset(
    "smoke-learn",
    "the smoke setting after a supervised warm start (cached), so that the embedded model "
    "writes the response layout often enough for rewards to vary within groups; 3 steps",
    # 3 steps instead of 4 shorten the main job (scripts/main.sh), which also runs setup and the
    # warm start on a fresh clone
    {**PRESETS.get("smoke").overrides, "warm_start": True, "steps": 3},
))


PRESETS.add("smoke-learn-30", Preset(
    "smoke-learn-30",
    "smoke-learn for 30 steps: the smoke Table 3 and Figure 4 (curves long enough for the "
    "format reward to rise)",
    {**PRESETS.get("smoke-learn").overrides, "steps": 30},
))
