"""What a vLLM weight sync sends and how it is checked: bucketing, the name check, the exact
read-back (checksums of bits), the log-prob gaps, the tied modules a reload must reprocess.
Pure tensor and bookkeeping code, importable without vLLM (tested on CPU)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import torch

# --- weight sync bookkeeping (pure: tested on CPU) -----------------------------------------

@dataclass
class SyncRecord:
    """What one weight sync sent."""

    sent: list[tuple[str, tuple[int, ...], torch.dtype]] = field(default_factory=list)
    buckets: int = 0
    # name -> checksum of what was sent, for the parameters read back after the sync
    sums: dict[str, tuple[int, int]] = field(default_factory=dict)
    # [len(HEAD_COLUMNS), V] the output head's weight columns sent, and its hidden size
    head: torch.Tensor | None = None
    head_hidden: int = 0

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


def engine_tensor(t: torch.Tensor, dtype: torch.dtype, device: str) -> torch.Tensor:
    """A gathered tensor as the engine takes it (and as its read-back is compared): the
    engine's dtype, on its device, contiguous."""
    return t.detach().to(dtype).to(device).contiguous()


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


def first_probe(policy: torch.Tensor, engine: torch.Tensor, tolerance: float) -> dict:
    """The first sync's probe (``first_sync_gap``) as the engine keeps it, logged with both
    sides' log-probs; a warning when it is above ``tolerance``."""
    import logging
    import warnings

    mean, worst, warning = first_sync_gap(policy, engine, tolerance)
    logging.getLogger("harness.rollouts.vllm").warning(
        "vLLM first-sync probe: mean gap %.5f, max %.5f; policy log-probs %s; engine "
        "log-probs %s", mean, worst, [round(x, 4) for x in policy.tolist()],
        [round(x, 4) for x in engine.tolist()])
    if warning:
        warnings.warn(warning, RuntimeWarning, stacklevel=3)
    return {"policy": policy.tolist(), "engine": engine.tolist(), "mean": mean, "max": worst}


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


# --- the exact read-back -------------------------------------------------------------------

_WORDS = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def checksum(t: torch.Tensor) -> tuple[int, int]:
    """Two integers that equal tensors share and different bits almost never do: the sum of the
    tensor's words (its bits read as integers), and the sums of its rows and of its columns
    (as a [shape[0], -1] matrix) each weighted by their index + 1, all in int64 (exact: no
    rounding, no dependence on the order of summation, the same on every device). Computed
    where the tensor lies, without an int64 copy of it (the reductions widen as they go)."""
    words = t.detach().contiguous().view(_WORDS[t.element_size()])
    m = words.view(words.shape[0] if words.dim() > 1 else 1, -1)
    rows = m.sum(dim=1, dtype=torch.int64)
    cols = m.sum(dim=0, dtype=torch.int64)
    weighted = (rows * torch.arange(1, rows.numel() + 1, device=rows.device)).sum() \
        + (cols * torch.arange(1, cols.numel() + 1, device=cols.device)).sum()
    return int(rows.sum()), int(weighted)


def readable_names(engine_shapes: dict[str, tuple[int, ...]],
                   policy_shapes: dict[str, tuple[int, ...]]) -> list[str]:
    """The engine parameters that can be read back against the policy's: those that keep their
    HF name and shape in vLLM. vLLM fuses q/k/v and gate/up under new names, and the CPU build
    repacks every linear weight into its kernel's layout (shape (0,) by name): those are
    covered by the name check before a sync and by the probe, not here."""
    return sorted(n for n, s in engine_shapes.items() if policy_shapes.get(n) == tuple(s))


def readback_problems(sent: dict[str, tuple[int, int]], engine: dict[str, tuple[int, int]]
                      ) -> list[str]:
    """The names whose engine checksum differs from the one sent (or is missing), sorted."""
    return sorted(n for n in sent if engine.get(n) != sent[n])


def check_readback(sent: dict[str, tuple[int, int]], engine: dict[str, tuple[int, int]],
                   when: str) -> None:
    """Raise unless every tensor read back from the engine has the bits that were sent."""
    if not sent:
        raise RuntimeError(f"the weight sync {when} read back nothing: no engine parameter keeps "
                           "its HF name and shape, so stale weights would go unseen")
    bad = readback_problems(sent, engine)
    if bad:
        raise RuntimeError(
            f"vLLM's weights read back after sync {when} differ from the policy's in {len(bad)} "
            f"of {len(sent)} tensors checked (e.g. {bad[:3]}): the engine holds other weights "
            "than those it was sent (a stale or partial load) and would sample from another "
            "policy")


def tied_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The modules that hold a parameter another module holds too (tied weights)."""
    holders: dict[int, list[torch.nn.Module]] = {}
    for module in model.modules():
        for p in module.parameters(recurse=False):
            holders.setdefault(id(p), []).append(module)
    seen: dict[int, torch.nn.Module] = {}
    for mods in holders.values():
        if len(mods) > 1:
            for m in mods:
                seen.setdefault(id(m), m)
    return list(seen.values())


def head_name(module, named: Sequence[tuple[str, torch.nn.Parameter]]) -> str | None:
    """The HF name under which ``module``'s output head weight is sent (a tied head: the
    embedding's), or None where the model has no output embeddings."""
    get = getattr(module, "get_output_embeddings", None)
    head = get() if get is not None else None
    weight = getattr(head, "weight", None)
    return next((n for n, p in named if p is weight), None)


@torch.no_grad()
def policy_logprobs(policy, ids: Sequence[int]) -> torch.Tensor:
    """[len(ids) - 1] the training engine's log-probs of ids[1:] (temperature 1, as vLLM's
    prompt log-probs); a forward of every rank together under ZeRO-3."""
    device = next(policy.module.parameters()).device
    t = torch.tensor([list(ids)], device=device)
    logits = policy.module(input_ids=t).logits[0, :-1].float()
    return torch.log_softmax(logits, dim=-1).gather(1, t[0, 1:, None])[:, 0].cpu()
