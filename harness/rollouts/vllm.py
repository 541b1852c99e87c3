"""The vLLM engine: one engine colocated in each Ray Train worker, in the worker's process.

Life of one step: ``generate`` (sampling log-probs returned), after which the engine goes to
sleep by itself where the build can (weights offloaded, KV cache freed, so the training engine
has the GPU for replays and the update; the CPU build declares no sleep) -> the weight sync:
the weights woken, vLLM's in-place ``reload_weights`` fed by a generator that gathers the ZeRO-3
parameters bucket by bucket (HF names, every one checked against the model's before any is
sent), the KV cache woken, the prefix cache reset -> two checks: an exact read-back (integer
checksums of the bits of every engine parameter that keeps its HF name and shape, against the
bf16-rounded policy's: one stale step flips the rounding of a share of a large tensor's
elements) and the log-prob probe (the engine's log-probs of a fixed text against the policy's:
the first sync's gap is the two stacks' own and is reported; a later sync's gap past it plus
the tolerance fails).

The life-cycle rule (when the engine wakes and sleeps) is ``vllm_life``'s, written once there.

What the CPU and GPU builds do differently is declared in ``vllm_version.BUILDS``. vLLM is
imported only here and in ``vllm_calls`` (the LLM's construction, requests and outputs, and
what runs in vLLM's worker), and only when this engine is built: the main install has no vLLM.
Every vLLM name they use is listed in ``vllm_version.VLLM_API`` and checked against the
installed package by ``tests/test_vllm_api.py``.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Callable, Iterable, Sequence

import torch

from harness.rollouts import vllm_calls
from harness.rollouts.base import Rollout, encode_prompts, eos_token_ids
from harness.rollouts.vllm_calls import (check_lengths, empty_torch_cache, prompt_seeds,
                                         sampling_kwargs, to_rollout)
from harness.rollouts.vllm_sync import (SyncRecord, buckets, check_complete, check_gap,
                                        check_readback, checksum, engine_tensor,
                                        first_probe, head_name,
                                        model_parameter_names, policy_logprobs,
                                        readable_names, readback_problems)
from harness.rollouts.vllm_life import Lifecycle
from harness.rollouts.vllm_version import installed, installed_problem
from tasks.base import Example


# --- the engine ----------------------------------------------------------------------------

# the fixed text whose token log-probs the engine and the policy must agree on after a sync
PROBE_TEXT = ("A weight sync is checked on a fixed text: the rollout engine and the policy score "
              "these tokens, and their log-probabilities must agree. " * 8)

# hidden dimensions whose output-head column is read back through the head's kernel after
# every sync: 4 x the vocabulary (196,608 values for SmolLM2), where one lr-1e-6 step flips the
# bf16 rounding of about 1 %
HEAD_COLUMNS = (0, 1, 2, 3)

# vLLM serves one engine per process (its allocator and global state refuse a second), and a
# process may build several trainers (bench step: one per method): they share the first
# engine built, whose weights each trainer's first sync replaces. Key: what fixes the engine.
_BUILT: dict[str, tuple[tuple, object]] = {}


class VLLMRollout(Lifecycle):
    """The rollout-engine protocol (``harness.rollouts.base.RolloutEngine``) over a colocated
    ``vllm.LLM``."""

    plain_model = None

    def __init__(self, llm, tokenizer, eos_ids: Sequence[int], sync_bucket_bytes: int,
                 dtype: torch.dtype, device: str = "cuda", sampling_params=None,
                 tokens_prompt=dict, max_model_len: int = 2**31 - 1,
                 sleep_level: int = 1, expected_names: set[str] | None = None,
                 empty_cache: Callable[[], None] = empty_torch_cache, sleep: bool = True
                 ) -> None:
        """``llm``: a ``vllm.LLM`` (or an object with its interface); ``sampling_params`` and
        ``tokens_prompt``: ``vllm.SamplingParams`` and ``vllm.inputs.TokensPrompt`` (a
        TypedDict: a dict with ``prompt_token_ids``); ``device``: where synced tensors go;
        ``expected_names``: the HF parameter names every sync must send (None: unchecked);
        ``empty_cache``: called before each wake (PyTorch's cached blocks back to the device);
        ``sleep``: the build frees the device when asked (declared: ``Build.sleep``)."""
        self.capabilities = frozenset({"sleep"} if sleep else ())
        self.llm = llm
        self.device = device
        self.sampling_params = sampling_params or (lambda **kw: SimpleNamespace(**kw))
        self.tokens_prompt = tokens_prompt
        self.max_model_len = max_model_len
        self.sleep_level = sleep_level
        self.expected_names = expected_names
        self.empty_cache = empty_cache
        self.tokenizer = tokenizer
        self.eos_ids = sorted(set(eos_ids))
        self.sync_bucket_bytes = sync_bucket_bytes
        self.dtype = dtype
        # the engine's own state, read from vLLM (a process's engine is shared by the trainers
        # it builds: the one before may have left it asleep, its weights perhaps discarded)
        self.awake = llm is None or not llm.llm_engine.is_sleeping()
        self.weights_current = self.awake
        self.generating_depth = 0  # nested generations (evaluation's chunks): one wake, one sleep
        self.policy = None  # what the last sync loaded from: a level-2 wake loads it again
        self.resyncs = 0  # generations that found the weights discarded and loaded them again
        # the device's use (GB) at the end of the latest generation, before the engine slept
        self.awake_used_gb = float("nan")
        self.last_sync = SyncRecord()
        self.check_every, self.tolerance = 1, 0.05  # the log-prob check after syncs
        self.synced = 0  # syncs so far
        self.last_gap = float("nan")  # the latest check's mean |log-prob difference|
        # the first check's probe: both log-prob vectors and their gap (later checks are held
        # to its gap plus the tolerance)
        self.first_probe: dict | None = None
        self.probe = tokenizer(PROBE_TEXT, add_special_tokens=False)["input_ids"][:256]
        # the parameters read back after every sync (found at the first), and the HF name of
        # the output head's weight (read back through its kernel; None: not checked)
        self.readback: list[str] | None = None
        self.head: str | None = None
        self._truncated: bool | None = None  # see reports_truncated

    @classmethod
    def build(cls, source: str, tokenizer, seed: int, dtype: str, max_model_len: int,
              gpu_memory_utilization: float, sync_bucket_mb: int, colocated: bool = True,
              sleep_level: int = 1, check_every: int = 1, tolerance: float = 0.05,
              kv_cache_gb: float = 0.0) -> "VLLMRollout":
        """``source``: a model name as ``--model`` takes it (an embedded name is resolved to
        its folder) or a folder; ``colocated``: inside a training worker (its torch.distributed
        group, its device); off: a stand-alone engine (``bench rollout``)."""
        problem = installed_problem()
        if problem:
            raise RuntimeError(problem)
        build, _ = installed()
        from harness.models import resolve

        source = resolve(source)  # vLLM reads a folder; "smollm2-135m-instruct" is no hub id
        kv = int(kv_cache_gb * 2**30) if kv_cache_gb > 0 else build.default_kv_cache_bytes
        key = (source, dtype, max_model_len, kv, gpu_memory_utilization, colocated)
        if "llm" in _BUILT and _BUILT["llm"][0] != key:
            raise RuntimeError(f"this process already built a vLLM engine for {_BUILT['llm'][0]}"
                               f", and vLLM serves one per process; {key} needs its own process")
        if "llm" not in _BUILT:
            _BUILT["llm"] = (key, vllm_calls.new_llm(build, source, seed, dtype, max_model_len,
                                               gpu_memory_utilization, kv, colocated))
        llm = _BUILT["llm"][1]
        from transformers import GenerationConfig
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        try:
            eos = GenerationConfig.from_pretrained(source).eos_token_id
        except OSError:
            eos = None
        engine = cls(llm, tokenizer, eos_token_ids(eos, tokenizer), sync_bucket_mb << 20,
                     getattr(torch, dtype), build.device, SamplingParams, TokensPrompt,
                     max_model_len, sleep_level, expected_names=model_parameter_names(source),
                     sleep=build.sleep)
        engine.check_every, engine.tolerance = check_every, tolerance
        return engine

    # --- generation (same contract as HFRollout) -------------------------------------------
    def encode(self, examples: Sequence[Example]) -> list[list[int]]:
        return encode_prompts(self.tokenizer, examples)

    def _generate(self, prompt_ids: list[list[int]], **sampling
                  ) -> tuple[list[list[list[int]]], list[list[list[float]]] | None]:
        """Per prompt, its completions' token ids and (when sampled) their log-probs."""
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
        ids = [[list(c.token_ids) for c in o.outputs] for o in outs]
        return ids, None if sampling.get("logprobs") is None else [
            [[pos[tok].logprob for pos, tok in zip(c.logprobs, c.token_ids)] for c in o.outputs]
            for o in outs]

    def generate(self, examples: Sequence[Example], n: int, max_new_tokens: int,
                 temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0,
                 greedy: bool = False, seed: int | None = None,
                 prompt_ids: list[list[int]] | None = None, share_prefill: bool = True
                 ) -> Rollout:
        """``n`` responses per example, with the log-prob each sampled token was drawn with
        (``Rollout.logprobs``; None for greedy). ``share_prefill``: always (prefix caching)."""
        ids = prompt_ids if prompt_ids is not None else self.encode(examples)
        with self.generating():
            truncates = not greedy and (top_k > 0 or top_p < 1.0) and self.reports_truncated()
            comps, logps = self._generate(ids, **sampling_kwargs(n, max_new_tokens, temperature,
                                                                 top_p, top_k, greedy, seed,
                                                                 self.eos_ids))
        out = to_rollout(ids, comps, self.tokenizer.pad_token_id, self.eos_ids,
                         lambda rows: self.tokenizer.batch_decode(rows,
                                                                  skip_special_tokens=True),
                         logps)
        out.logprobs_truncated = truncates
        return out

    def reports_truncated(self) -> bool:
        """Whether the engine reports a sampled token's log-prob after top-k/top-p (renormalised
        over the kept tokens: V1's sampler) or before (the policy's definition). Asked of the
        engine once, not of its version: a token sampled with top-k 1 after a one-token prompt
        has log-prob 0 after the truncation, below 0 before it."""
        if self._truncated is None:
            _, logps = self._generate([self.probe[:1]], **sampling_kwargs(
                1, 1, 1.0, 1.0, 1, False, 0, self.eos_ids))
            self._truncated = logps[0][0][0] > -1e-6
        return self._truncated

    def generate_eval(self, examples: Sequence[Example], max_new_tokens: int,
                      batch_size: int, progress=None) -> list[str]:
        """Greedy responses; vLLM batches itself, so ``batch_size`` only paces progress."""
        ids = self.encode(examples)
        out: list[str] = []
        size = max(batch_size, 1) * 8
        # one wake for the whole benchmark, on every rank (a rank with no items too: a level-2
        # wake loads the policy's weights, a gather every rank joins)
        with self.generating():
            for start in range(0, len(ids), size):
                chunk = ids[start:start + size]
                r = self.generate([examples[start + i] for i in range(len(chunk))], 1,
                                  max_new_tokens, greedy=True, prompt_ids=chunk)
                out.extend(r.texts)
                if progress is not None:
                    progress(len(chunk))
        return out

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

    def load(self, pairs: Iterable[tuple[str, torch.Tensor]],
             shapes: dict[str, tuple[int, ...]] | None = None) -> None:
        """Load (HF name, tensor) pairs (the whole model, drawn lazily: a generator that
        gathers bucket by bucket) through vLLM's in-place reload, then check them: every
        expected name sent, and the read-back parameters holding exactly the bits sent.
        ``shapes``: the policy's full parameter shapes, from which the first load finds the
        parameters to read back (None: no read-back until then)."""
        self.begin_sync()
        if self.readback is None and shapes is not None:
            self.find_readback(shapes)
        record = self.last_sync
        watch = set(self.readback if self.readback is not None else ())

        def send():
            for name, t in pairs:
                t = engine_tensor(t, self.dtype, self.device)
                record.sent.append((name, tuple(t.shape), t.dtype))
                if name in watch:
                    record.sums[name] = checksum(t)
                if name == self.head:
                    record.head = t[:, list(HEAD_COLUMNS)].T.float().cpu()
                    record.head_hidden = t.shape[1]
                yield name, t

        self.llm.collective_rpc(vllm_calls.reload, args=(send(),))
        self.end_sync()

    def end_sync(self) -> None:
        """After the load: every parameter must have been sent and the read-back ones must
        hold what was; then the KV cache is back, the scheduler awake, and the old policy's
        cached prefixes dropped."""
        when = f"{self.synced + 1}"
        check_complete([n for n, _, _ in self.last_sync.sent], self.expected_names, when)
        if self.readback is not None:
            sums = dict(self.last_sync.sums)
            for name in set(self.readback) - set(sums):  # never sent: stale for sure
                sums[name] = (None, None)
            engine = self.llm.collective_rpc(vllm_calls.checksums, args=(sorted(sums),))[0]
            check_readback(sums, engine, when)
        if self.head is not None:
            self.check_head(self.last_sync.head, when)
        if not self.awake:
            self._wake(["kv_cache"])
            self._check_scheduling()
            self.awake = True
        if self.llm.reset_prefix_cache() is False:
            raise RuntimeError("vLLM refused to drop its cached prefixes after the weight sync "
                               "(reset_prefix_cache returned False: requests still running); "
                               "they were computed with the old policy")
        self.weights_current = True

    def head_rows(self, hidden: int) -> torch.Tensor:
        """[len(HEAD_COLUMNS), V] the engine's output head, read through its kernel."""
        return self.llm.collective_rpc(vllm_calls.head_columns, args=(HEAD_COLUMNS, hidden,
                                                             self.dtype))[0]

    def check_head(self, sent: torch.Tensor | None, when: str) -> None:
        """Raise unless the head's kernel computes with the weight that was sent: the read-back
        of stored parameters cannot see a kernel's own copy of them."""
        if sent is None:
            raise RuntimeError(f"the weight sync {when} did not send the output head's weight "
                               f"{self.head!r}")
        engine = self.head_rows(self.last_sync.head_hidden)[:, :sent.shape[1]]
        if not torch.equal(engine, sent):
            bad = int((engine != sent).sum())
            raise RuntimeError(
                f"vLLM's output head computes with other weights than were sent after sync "
                f"{when}: {bad} of {sent.numel()} head values read through its kernel differ "
                "(a kernel copy of a tied head left stale) and the engine would sample from "
                "another policy")

    def find_readback(self, policy_shapes: dict[str, tuple[int, ...]]) -> list[str]:
        """The engine parameters every sync reads back (``readable_names``); raise if none."""
        self.readback = readable_names(self.llm.collective_rpc(vllm_calls.shapes)[0], policy_shapes)
        if not self.readback:
            raise RuntimeError("no vLLM parameter keeps its HF name and shape, so no sync could "
                               "be read back: stale weights would go unseen")
        return self.readback

    def stale(self, named: Iterable[tuple[str, torch.Tensor]]) -> list[str]:
        """The read-back parameters whose engine bits differ from these (name, tensor) pairs
        in the engine's dtype: [] when the engine holds them exactly."""
        watch = set(self.readback or ())
        sent = {n: checksum(engine_tensor(t, self.dtype, self.device))
                for n, t in named if n in watch}
        return readback_problems(sent, self.llm.collective_rpc(vllm_calls.checksums,
                                                               args=(sorted(sent),))[0])

    def sync(self, policy) -> dict:
        """Load the policy's weights gathered from ZeRO-3 bucket by bucket (every HF name
        checked against the model's before any is sent; the read-back ones checked after),
        then (every ``check_every``-th sync, the first always) compare the engine's log-probs
        of the probe text with the policy's: the first sync's gap is reported (a warning above
        the tolerance) and later ones may exceed it by at most the tolerance."""
        from harness.engine import gathered_parameters

        named = list(policy.module.named_parameters())
        check_complete([n for n, _ in named], self.expected_names,
                       f"{self.synced + 1} (before loading)")
        if self.head is None:
            self.head = head_name(policy.module, named)
        def gathered():
            for group in buckets(named, self.sync_bucket_bytes):
                with gathered_parameters(policy.module, group) as full:
                    yield from full
                self.last_sync.buckets += 1

        self.load(gathered(), {n: tuple(getattr(p, "ds_shape", p.shape)) for n, p in named})
        self.policy = policy
        self.synced += 1
        if self.check_every and (self.synced - 1) % self.check_every == 0:
            self.last_gap = self.check_probe(policy_logprobs(policy, self.probe),
                                             self.prompt_logprobs(self.probe))
        out = {"param_update_norm": float("nan"), "vllm/sync_logprob_gap": self.last_gap,
               "vllm/readback_tensors": float(len(self.last_sync.sums)),
               "vllm/resyncs": float(self.resyncs)}
        if self.first_probe is not None:
            out["vllm/first_sync_logprob_gap"] = self.first_probe["mean"]
        return out

    def check_probe(self, policy: torch.Tensor, engine: torch.Tensor) -> float:
        """The probe's mean gap: the first one measured and reported, later ones checked
        against it (``check_gap``)."""
        if self.first_probe is None:
            self.first_probe = first_probe(policy, engine, self.tolerance)
            return self.first_probe["mean"]
        return check_gap(policy, engine, self.tolerance, f"after sync {self.synced}",
                         baseline=self.first_probe["mean"])

    def prompt_logprobs(self, ids: Sequence[int]) -> torch.Tensor:
        """[len(ids) - 1] the engine's log-probs of ids[1:] given their prefixes (raw logits,
        temperature 1). Part of a sync, after which the engine is awake and stays so."""
        if not self.awake:
            raise RuntimeError("internal: prompt log-probs on a sleeping vLLM engine")
        out = self.llm.generate([self.tokens_prompt(prompt_token_ids=list(ids))],
                                sampling_params=self.sampling_params(
                                    max_tokens=1, prompt_logprobs=0, temperature=1.0,
                                    detokenize=False),
                                use_tqdm=False)[0]
        return torch.tensor([pos[tok].logprob for pos, tok in zip(out.prompt_logprobs[1:],
                                                                   ids[1:])])
