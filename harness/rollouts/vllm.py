"""The vLLM engine (GPU): one engine colocated in each Ray Train worker, on that worker's GPU.

Life of one step: ``generate`` (the engine awake) -> ``sleep`` (weights offloaded, KV cache
freed, so the training engine has the GPU for replays and the update) -> ``wake_up`` of the
weights (PyTorch's cached blocks emptied first) -> ``load_weights`` (the gathered ZeRO-3
parameters, bucket by bucket, every HF name checked against the model's) -> ``wake_up`` of the
KV cache, the scheduler checked awake, the prefix cache reset -> ``check_sync`` (the engine's
log-probs of a fixed token sequence against the policy's: the first sync's gap is the two
stacks' own and is reported; stale or half-loaded weights later fail loudly here instead of
training on another policy's samples).

vLLM is imported only here and only when this engine is built: the CPU install has no vLLM.
Every vLLM name this module uses is listed in ``VLLM_API`` and checked against the installed
package by ``tests/test_vllm_api.py``.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Callable, Iterable, Sequence

import torch

from harness.rollouts.base import (Rollout, encode_prompts, eos_token_ids, left_pad,
                                   response_mask_from_ids)
from tasks.base import Example

from harness.rollouts.vllm_version import (INSTALL_HINT, SUPPORTED, VLLM_API,  # noqa: F401
                                           installed_version, version_problem)


# --- weight sync bookkeeping (pure: tested on CPU) -----------------------------------------

@dataclass
class SyncRecord:
    """What one weight sync sent, and what the engine says it loaded."""

    sent: list[tuple[str, tuple[int, ...], torch.dtype]] = field(default_factory=list)
    loaded: set[str] = field(default_factory=set)
    buckets: int = 0

    @property
    def bytes(self) -> int:
        return sum(math.prod(s) * torch.empty((), dtype=d).element_size() for _, s, d in self.sent)


def buckets(named: Iterable[tuple[str, torch.nn.Parameter]], max_bytes: int
            ) -> Iterable[list[tuple[str, torch.nn.Parameter]]]:
    """Consecutive groups of parameters whose full (unpartitioned) sizes add up to at most
    ``max_bytes`` (one larger parameter is a group of its own), so a sync never holds the whole
    gathered model at once. Sizes come from ``ds_shape`` under ZeRO-3 (the local ``shape`` is
    a partition), else ``shape``."""
    group: list = []
    size = 0
    for name, p in named:
        shape = tuple(getattr(p, "ds_shape", p.shape))
        n = math.prod(shape) * p.element_size()
        if group and size + n > max_bytes:
            yield group
            group, size = [], 0
        group.append((name, p))
        size += n
    if group:
        yield group


def engine_tensors(named: Sequence[tuple[str, torch.Tensor]], dtype: torch.dtype
                   ) -> list[tuple[str, torch.Tensor]]:
    """The gathered (name, tensor) pairs as the engine takes them: HF names (vLLM's
    ``load_weights`` maps them onto its fused layers), the engine's dtype, contiguous."""
    return [(name, t.detach().to(dtype).contiguous()) for name, t in named]


def unloaded(record: SyncRecord, engine_params: set[str]) -> set[str]:
    """Engine parameters that no sync of this record wrote (would keep stale values)."""
    return engine_params - record.loaded


def logprob_gap(policy: torch.Tensor, engine: torch.Tensor) -> tuple[float, float]:
    """[T] log-probs of the same tokens under the policy and the engine -> (mean |diff|,
    max |diff|)."""
    if policy.shape != engine.shape:
        raise ValueError(f"log-prob shapes differ: policy {tuple(policy.shape)}, engine "
                         f"{tuple(engine.shape)}")
    diff = (policy.double() - engine.double()).abs()
    return float(diff.mean()), float(diff.max())


def check_gap(policy: torch.Tensor, engine: torch.Tensor, tolerance: float, when: str,
              baseline: float = 0.0) -> float:
    """Raise if the engine's log-probs are further from the policy's than ``baseline`` (the
    first sync's gap: the two stacks' kernels) plus ``tolerance`` (mean |diff|); return the
    mean gap."""
    mean, worst = logprob_gap(policy, engine)
    if not mean <= baseline + tolerance:  # NaN fails too
        raise RuntimeError(
            f"vLLM weights are not the policy's {when}: mean |log-prob difference| {mean:.4f} "
            f"(max {worst:.4f}) over {policy.numel()} probe tokens exceeds the first sync's "
            f"{baseline:.4f} + --vllm-sync-tolerance {tolerance}. The engine would sample from "
            "another policy; this is the failure of weights lost across sleep/wake or a "
            "partial load_weights.")
    return mean


# The first sync's gap is the two stacks' own (vLLM's bf16 kernels against the training
# forward under ZeRO-3), never measured before a run: it is reported, and later syncs are held
# to it plus the tolerance. Only a gap no kernel difference makes stops the first sync: a
# correct bf16 model scores text within hundredths of a nat per token of its fp32 forward,
# while weights that are not the policy's (zeros, random, another checkpoint, a lost buffer)
# are off by nats per token.
FIRST_SYNC_LIMIT = 0.5


def first_sync_gap(policy: torch.Tensor, engine: torch.Tensor, tolerance: float
                   ) -> tuple[float, float, str]:
    """The first sync's (mean, max) gap and a warning ('' for none) when it is above
    ``tolerance``; raise past ``FIRST_SYNC_LIMIT``."""
    mean, worst = logprob_gap(policy, engine)
    if not mean <= FIRST_SYNC_LIMIT:
        raise RuntimeError(
            f"vLLM weights are not the policy's after the first sync: mean |log-prob "
            f"difference| {mean:.4f} (max {worst:.4f}) over {policy.numel()} probe tokens, past "
            f"{FIRST_SYNC_LIMIT} nats, which no kernel difference explains")
    warning = "" if mean <= tolerance else (
        f"the first weight sync's log-prob gap is {mean:.4f} (max {worst:.4f}), above "
        f"--vllm-sync-tolerance {tolerance}: taken as the two stacks' own difference; later "
        f"syncs must stay within {mean:.4f} + {tolerance}")
    return mean, worst, warning


def missing_names(sent: Iterable[str], expected: Iterable[str]) -> list[str]:
    """The expected HF parameter names a sync does not send, sorted."""
    return sorted(set(expected) - set(sent))


def check_complete(sent: Iterable[str], expected: Iterable[str] | None, when: str) -> None:
    """Raise if a sync leaves out any of the model's HF parameter names. vLLM fuses q/k/v and
    gate/up and reports a fused parameter loaded after any one of its shards, so its own report
    cannot see a missing shard; this check compares names before vLLM sees them."""
    if expected is None:
        return
    missing = missing_names(sent, expected)
    if missing:
        raise RuntimeError(f"the weight sync {when} lacks {len(missing)} of the model's "
                           f"{len(set(expected))} parameters (e.g. {missing[:3]}): vLLM would "
                           "keep their stale values")


def model_parameter_names(source: str) -> set[str]:
    """The HF parameter names of the model at ``source`` (built on the meta device from its
    config: no weights read), as ``named_parameters`` of the policy lists them."""
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(source))
    return {n for n, _ in model.named_parameters()}


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
    else:
        kw.update(temperature=temperature, top_p=top_p, top_k=top_k)  # 0: off, in vLLM too
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
    """vLLM refuses a request longer than its context: say which and what to raise."""
    longest = max((len(p) for p in prompt_ids), default=0)
    if longest + max_new_tokens > max_model_len:
        raise ValueError(f"a prompt of {longest} tokens plus {max_new_tokens} new tokens exceeds "
                         f"the vLLM engine's context of {max_model_len} (--max-prompt-tokens + "
                         "the longer of --max-response-tokens and --eval-max-response-tokens); "
                         "raise --max-prompt-tokens")


def to_rollout(prompt_ids: list[list[int]], completions: list[list[list[int]]], pad: int,
               eos_ids: Sequence[int], decode: Callable[[list[list[int]]], list[str]]) -> Rollout:
    """Per prompt, its n completions' token ids -> the same ``Rollout`` the HF engine makes:
    rows grouped by prompt, prompts left-padded, responses right-padded, masks up to and
    including the first EOS."""
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
    return Rollout(p_ids, p_mask, resp, mask, texts, rows)


# --- the engine ----------------------------------------------------------------------------

# the fixed text whose token log-probs the engine and the policy must agree on after a sync
PROBE_TEXT = ("A weight sync is checked on a fixed text: the rollout engine and the policy score "
              "these tokens, and their log-probabilities must agree. " * 8)


class VLLMRollout:
    """The rollout-engine protocol (``harness.rollouts.base.RolloutEngine``) over a colocated
    ``vllm.LLM``."""

    capabilities = frozenset({"sleep"})
    plain_model = None

    def __init__(self, llm, tokenizer, eos_ids: Sequence[int], sync_bucket_bytes: int,
                 dtype: torch.dtype, device: str = "cuda", sampling_params=None,
                 tokens_prompt=dict, max_model_len: int = 2**31 - 1,
                 sleep_level: int = 1, expected_names: set[str] | None = None,
                 empty_cache: Callable[[], None] = empty_torch_cache) -> None:
        """``llm``: a ``vllm.LLM`` (or an object with its interface); ``sampling_params`` and
        ``tokens_prompt``: ``vllm.SamplingParams`` and ``vllm.inputs.TokensPrompt`` (a
        TypedDict: a dict with ``prompt_token_ids``); ``expected_names``: the HF parameter
        names every sync must send (None: unchecked); ``empty_cache``: called before each
        wake (PyTorch's cached blocks back to the device)."""
        self.llm = llm
        self.device = device
        self.sampling_params = sampling_params or (lambda **kw: SimpleNamespace(**kw))
        self.tokens_prompt = tokens_prompt
        self.max_model_len = max_model_len
        self.sleep_level = sleep_level
        self.expected_names = expected_names
        self.empty_cache = empty_cache
        self.weights_current = True  # False after a level-2 sleep, until the next sync
        self.tokenizer = tokenizer
        self.eos_ids = sorted(set(eos_ids))
        self.sync_bucket_bytes = sync_bucket_bytes
        self.dtype = dtype
        self.awake = True
        self.last_sync = SyncRecord()
        self._syncing = False  # between begin_sync and end_sync
        self.check_every, self.tolerance = 1, 0.05  # the log-prob check after syncs
        self.synced = 0  # syncs so far
        self.last_gap = float("nan")  # the latest check's mean |log-prob difference|
        # the first check's probe: both log-prob vectors and their gap (later checks are held
        # to its gap plus the tolerance)
        self.first_probe: dict | None = None
        self.probe = tokenizer(PROBE_TEXT, add_special_tokens=False)["input_ids"][:256]

    @classmethod
    def build(cls, source: str, tokenizer, seed: int, dtype: str, max_model_len: int,
              gpu_memory_utilization: float, sync_bucket_mb: int, colocated: bool = True,
              sleep_level: int = 1, check_every: int = 1, tolerance: float = 0.05
              ) -> "VLLMRollout":
        """``colocated``: inside a training worker (its torch.distributed group, its GPU);
        off: a stand-alone engine (``bench rollout``)."""
        problem = version_problem(installed_version())
        if problem:
            raise RuntimeError(problem)
        extra = {}
        if colocated:
            # one engine per Ray Train worker, in the worker's own process and torch.distributed
            # group: the external launcher (no engine processes of vLLM's own); its engine core
            # then runs in this process, which colocation with the training engine needs
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
            extra = dict(distributed_executor_backend="external_launcher")
        from transformers import GenerationConfig
        from vllm import LLM, SamplingParams
        from vllm.inputs import TokensPrompt

        llm = LLM(model=source, tokenizer=source, dtype=dtype, seed=seed,
                  gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len,
                  enable_prefix_caching=True, enable_sleep_mode=True, tensor_parallel_size=1,
                  **extra)
        try:
            eos = GenerationConfig.from_pretrained(source).eos_token_id
        except OSError:
            eos = None
        engine = cls(llm, tokenizer, eos_token_ids(eos, tokenizer), sync_bucket_mb << 20,
                     getattr(torch, dtype), "cuda", SamplingParams, TokensPrompt, max_model_len,
                     sleep_level, expected_names=model_parameter_names(source))
        engine.check_every, engine.tolerance = check_every, tolerance
        return engine

    # --- generation (same contract as HFRollout) -------------------------------------------
    def encode(self, examples: Sequence[Example]) -> list[list[int]]:
        return encode_prompts(self.tokenizer, examples)

    def _generate_ids(self, prompt_ids: list[list[int]], **sampling) -> list[list[list[int]]]:
        if not self.awake:
            raise RuntimeError("internal: generate on a sleeping vLLM engine (wake_up first)")
        if not self.weights_current:
            raise RuntimeError("internal: generate after a level-2 sleep before a weight sync "
                               "(the engine holds the checkpoint's weights, not the policy's)")
        check_lengths(prompt_ids, sampling["max_tokens"], self.max_model_len)
        seeds = prompt_seeds(sampling.pop("seed", None), len(prompt_ids))
        # prompts by position (vLLM has made that parameter positional-only before)
        outs = self.llm.generate([self.tokens_prompt(prompt_token_ids=list(p))
                                  for p in prompt_ids],
                                 sampling_params=[self.sampling_params(**sampling, seed=s)
                                                  for s in seeds],
                                 use_tqdm=False)
        return [[list(c.token_ids) for c in o.outputs] for o in outs]

    def generate(self, examples: Sequence[Example], n: int, max_new_tokens: int,
                 temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0,
                 greedy: bool = False, seed: int | None = None,
                 prompt_ids: list[list[int]] | None = None, share_prefill: bool = True
                 ) -> Rollout:
        """``n`` responses per example. ``share_prefill``: always (prefix caching)."""
        ids = prompt_ids if prompt_ids is not None else self.encode(examples)
        comps = self._generate_ids(ids, **sampling_kwargs(n, max_new_tokens, temperature, top_p,
                                                          top_k, greedy, seed, self.eos_ids))
        return to_rollout(ids, comps, self.tokenizer.pad_token_id, self.eos_ids,
                          lambda rows: self.tokenizer.batch_decode(rows,
                                                                   skip_special_tokens=True))

    def generate_eval(self, examples: Sequence[Example], max_new_tokens: int,
                      batch_size: int, progress=None) -> list[str]:
        """Greedy responses; vLLM batches itself, so ``batch_size`` only paces progress."""
        ids = self.encode(examples)
        out: list[str] = []
        size = max(batch_size, 1) * 8
        for start in range(0, len(ids), size):
            chunk = ids[start:start + size]
            r = self.generate([examples[start + i] for i in range(len(chunk))], 1,
                              max_new_tokens, greedy=True, prompt_ids=chunk)
            out.extend(r.texts)
            if progress is not None:
                progress(len(chunk))
        return out

    # --- sharing the GPU with training -----------------------------------------------------
    def sleep(self) -> None:
        """Free the GPU for the training engine. Level 1 (the default) offloads the weights
        to CPU memory (a copy per worker: 14 GB for a 7B model) and drops the KV cache. Level 2
        drops the weights too and keeps only named buffers, which loses other state some models
        hold (vLLM issue #29341): the next sync reloads the checkpoint (``reload_weights``)
        before loading the policy's weights over it, and nothing generates before that sync."""
        if self.awake:
            self.llm.sleep(level=self.sleep_level)
            self.awake = False
            if self.sleep_level == 2:
                self.weights_current = False

    def _wake(self, tags: list[str] | None) -> None:
        self.empty_cache()  # the update's cached blocks back first, then vLLM maps its own
        self.llm.wake_up(tags=tags)

    def _check_scheduling(self) -> None:
        """After the last wake: vLLM resumes its paused scheduler only once everything is
        awake, and ``LLM.wake_up`` returns nothing to say whether it did; a scheduler left
        paused makes the next generate wait forever."""
        engine = self.llm.llm_engine
        if engine.is_sleeping():
            self.llm.wake_up(tags=["scheduling"])
            if engine.is_sleeping():
                raise RuntimeError("the vLLM engine still reports sleeping after waking its "
                                   "weights, KV cache and scheduler: generate would wait "
                                   "forever")

    def wake_up(self) -> None:
        if not self.awake:
            self._wake(None)
            if self.sleep_level == 2:  # the buffers a level-2 sleep dropped come back
                self.llm.collective_rpc("reload_weights")
            self._check_scheduling()
            self.awake = True

    # --- weight sync -----------------------------------------------------------------------
    def begin_sync(self) -> None:
        """Wake the weights only: the KV cache comes back after the load, so the gathered
        buckets and the cache never hold the GPU at once. After a level-2 sleep the
        checkpoint is reloaded first (what the sleep dropped beyond the parameters)."""
        if not self.awake:
            self._wake(["weights"])
            if self.sleep_level == 2:
                self.llm.collective_rpc("reload_weights")
        self.last_sync = SyncRecord()
        self._syncing = True

    def load_weights(self, named_tensors: Sequence[tuple[str, torch.Tensor]]) -> float:
        """Load one bucket of gathered (name, tensor) pairs, between ``begin_sync`` and
        ``end_sync``; NaN (the update's norm is measured on a plain HF copy only: here it would
        need a second copy of the weights)."""
        if not self._syncing:
            raise RuntimeError("internal: load_weights outside begin_sync / end_sync")
        tensors = engine_tensors(named_tensors, self.dtype)
        device_tensors = [(n, t.to(self.device, non_blocking=True)) for n, t in tensors]
        loaded = self.llm.apply_model(lambda model: model.load_weights(device_tensors))
        self.last_sync.sent.extend((n, tuple(t.shape), t.dtype) for n, t in tensors)
        self.last_sync.buckets += 1
        for part in loaded or ():
            self.last_sync.loaded |= set(part or ())
        return float("nan")

    def end_sync(self) -> None:
        """After the last bucket: every parameter must have been sent and written; then the KV
        cache is back, the scheduler awake, and the old policy's cached prefixes dropped."""
        self._syncing = False
        check_complete([n for n, _, _ in self.last_sync.sent], self.expected_names,
                       f"{self.synced + 1}")
        names = self.llm.apply_model(lambda model: {n for n, _ in model.named_parameters()})
        missing = unloaded(self.last_sync, set().union(*[set(x) for x in names]))
        if missing:
            raise RuntimeError(f"weight sync left {len(missing)} vLLM parameters unwritten "
                               f"(e.g. {sorted(missing)[:3]}): they would keep stale values")
        if not self.awake:
            self._wake(["kv_cache"])
            self._check_scheduling()
            self.awake = True
        if self.llm.reset_prefix_cache() is False:
            raise RuntimeError("vLLM refused to drop its cached prefixes after the weight sync "
                               "(reset_prefix_cache returned False: requests still running); "
                               "they were computed with the old policy")
        self.weights_current = True

    def sync(self, policy) -> dict:
        """Load the policy's weights gathered from ZeRO-3 bucket by bucket (every HF name
        checked against the model's before any is sent), then (every ``check_every``-th sync,
        the first always) compare the engine's log-probs of the probe text with the policy's:
        the first sync's gap is reported (a warning above the tolerance) and later ones may
        exceed it by at most the tolerance."""
        from harness.engine import gathered_parameters

        check_complete([n for n, _ in policy.module.named_parameters()], self.expected_names,
                       f"{self.synced + 1} (before loading)")
        self.begin_sync()
        for group in buckets(policy.module.named_parameters(), self.sync_bucket_bytes):
            with gathered_parameters(policy.module, group) as named:
                self.load_weights(named)
        self.end_sync()
        self.synced += 1
        if self.check_every and (self.synced - 1) % self.check_every == 0:
            self.last_gap = self.check_probe(policy_logprobs(policy, self.probe),
                                             self.prompt_logprobs(self.probe))
        out = {"param_update_norm": float("nan"), "vllm/sync_logprob_gap": self.last_gap}
        if self.first_probe is not None:
            out["vllm/first_sync_logprob_gap"] = self.first_probe["mean"]
        return out

    def check_probe(self, policy: torch.Tensor, engine: torch.Tensor) -> float:
        """The probe's mean gap: the first one measured and reported, later ones checked
        against it (``check_gap``)."""
        if self.first_probe is None:
            import logging
            import warnings

            mean, worst, warning = first_sync_gap(policy, engine, self.tolerance)
            self.first_probe = {"policy": policy.tolist(), "engine": engine.tolist(),
                                "mean": mean, "max": worst}
            logging.getLogger(__name__).warning(
                "vLLM first-sync probe: mean gap %.5f, max %.5f; policy log-probs %s; engine "
                "log-probs %s", mean, worst, [round(x, 4) for x in policy.tolist()],
                [round(x, 4) for x in engine.tolist()])
            if warning:
                warnings.warn(warning, RuntimeWarning, stacklevel=2)
            return mean
        return check_gap(policy, engine, self.tolerance, f"after sync {self.synced}",
                         baseline=self.first_probe["mean"])

    def prompt_logprobs(self, ids: Sequence[int]) -> torch.Tensor:
        """[len(ids) - 1] the engine's log-probs of ids[1:] given their prefixes (raw logits,
        temperature 1)."""
        out = self.llm.generate([self.tokens_prompt(prompt_token_ids=list(ids))],
                                sampling_params=self.sampling_params(
                                    max_tokens=1, prompt_logprobs=0, temperature=1.0,
                                    detokenize=False),
                                use_tqdm=False)[0]
        return torch.tensor([pos[tok].logprob for pos, tok in zip(out.prompt_logprobs[1:],
                                                                   ids[1:])])


@torch.no_grad()
def policy_logprobs(policy, ids: Sequence[int]) -> torch.Tensor:
    """[len(ids) - 1] the training engine's log-probs of ids[1:] (temperature 1, as vLLM's
    prompt log-probs); a forward of every rank together under ZeRO-3."""
    device = next(policy.module.parameters()).device
    t = torch.tensor([list(ids)], device=device)
    logits = policy.module(input_ids=t).logits[0, :-1].float()
    return torch.log_softmax(logits, dim=-1).gather(1, t[0, 1:, None])[:, 0].cpu()
