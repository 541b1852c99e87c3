"""Stages 5-7: the micro-batch plan, the loss per micro-batch, and the optimizer.

DeepSpeed averages micro-batch losses over gradient-accumulation steps and ranks. For
``token-mean`` each micro-batch's token sum is divided by the valid-token count of the whole
mini-batch (all ranks) and multiplied back by steps x ranks, so the gradient is the exact token
mean however the mini-batch is split. The sequence modes divide by the configured micro-batch
size, which makes them exact too. Logged losses are per-micro-batch token means.

When the loss is the policy gradient alone (no KL, no loss term), a response whose advantage
is 0 on every token adds exactly nothing to the gradient, so it gets no forward or backward:
the responses with signal are packed into as few micro-batches as every rank needs, and the
optimizer steps after the last one. A mini-batch without any signal on any rank takes no
optimizer step (``skipped_updates``): with a zero gradient AdamW would only replay its momentum.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from harness import engine as eng
from harness.console.progress import stage
from harness.loss import aggregate, kl_penalty, ppo_clip_loss
from harness.rollouts import Rollout
from harness.train.logprobs import grad_norm, sequence_logprobs


@dataclass
class StepData:
    rollout: Rollout
    advantages: torch.Tensor  # [n_local, T]
    old_logp: torch.Tensor | None
    ref_logp: torch.Tensor | None
    terms: dict[str, Any] = field(default_factory=dict)  # loss term name -> prepared rows
    context: Any = None  # the PassContext the loss terms read (head, temperature)


def plan(advantages: torch.Tensor, mask: torch.Tensor, rows: list[int], micro: int,
         pg_only: bool) -> list[list[int]]:
    """The micro-batches of one mini-batch (``rows``). With the policy gradient alone, rows
    with signal first and only as many micro-batches as the busiest rank needs (every rank runs
    the same number: ZeRO-3 gathers parameters collectively in each forward; a rank with fewer
    rows with signal fills up with zero-advantage ones, which add nothing)."""
    if pg_only:
        live = (advantages[rows] * mask[rows]).abs().sum(dim=1) > 0
        active = [r for r, a in zip(rows, live.tolist()) if a]
        need = max(eng.all_gather_objects(-(-len(active) // micro)))
        rest = [r for r in rows if r not in set(active)]
        rows = (active + rest)[:need * micro]
    return [rows[s:s + micro] for s in range(0, len(rows), micro)]


def micro_loss(logp, logits, rows: list[int], data: StepData, method, options, config,
               agg: dict, mb: int) -> tuple[torch.Tensor, dict]:
    """PPO-clip on the token advantages, plus the KL to the reference and the method's loss
    terms, for one micro-batch (``mb``: the configured micro-batch size)."""
    t = config.training
    old = data.old_logp[rows] if data.old_logp is not None else logp.detach()
    mask = data.rollout.response_mask[rows]
    loss, info = ppo_clip_loss(logp, old, data.advantages[rows], mask, t.clip_eps_low,
                               t.clip_eps_high, t.loss_agg, **agg)
    if t.loss_agg != "token-mean":  # a mean over mb rows, however many ran
        loss = loss * len(rows) / mb
    total = info["pg_loss"]
    if data.ref_logp is not None:
        kl = kl_penalty(logp, data.ref_logp[rows], t.kl_type)
        loss = loss + t.kl_coef * aggregate(kl, mask, t.loss_agg, **agg)
        info["kl"] = float(aggregate(kl.detach(), mask, "token-mean"))
        total += t.kl_coef * info["kl"]
    for term in method.loss_terms:
        per_token = term.loss(logits, data.terms[term.name][rows], data.context, options)
        coef = term.coef(options)
        loss = loss + coef * aggregate(per_token, mask, t.loss_agg, **agg)
        info[term.name] = float(aggregate(per_token.detach(), mask, "token-mean"))
        total += coef * info[term.name]
    info["loss"] = total
    return loss, info


def sampling_gap(logp: torch.Tensor, engine_logp: torch.Tensor, mask: torch.Tensor
                 ) -> tuple[float, float, int]:
    """[n, T] the policy's and the rollout engine's log-probs of the same sampled tokens, [n, T]
    {0, 1} mask -> (sum |diff|, max |diff|, tokens) over the masked tokens."""
    diff = (logp.double() - engine_logp.double()).abs()[mask.bool()]
    if diff.numel() == 0:
        return 0.0, 0.0, 0
    return float(diff.sum()), float(diff.max()), int(diff.numel())


def as_sampled(logp: torch.Tensor, logits: torch.Tensor, tokens: torch.Tensor,
               truncated: bool, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """[n, T] the policy's log-probs of the sampled tokens under the definition the engine
    reports its own in: at the temperature (``logp`` itself), or, for an engine that reports
    them after top-k/top-p (``Rollout.logprobs_truncated``), renormalised over the tokens
    top-k/top-p keep, as its sampler computes them (``logits`` [n, T, V], unscaled; row by row,
    without gradient). A sampled token our filter drops (a tie at the boundary, bf16 against
    fp32) keeps the untruncated value, which differs by the log of the kept mass only."""
    if not truncated or (not top_k and top_p >= 1.0):
        return logp
    from harness.rollouts.lean import filter_logits

    rows = []
    with torch.no_grad():
        for r in range(logits.shape[0]):
            kept = filter_logits(logits[r].float() / temperature, top_k, top_p)
            lp = kept.log_softmax(dim=-1).gather(1, tokens[r].to(kept.device)[:, None])[:, 0]
            rows.append(lp.cpu())
    out = torch.stack(rows).to(logp.dtype)
    return torch.where(torch.isinf(out), logp.detach().cpu(), out)


def check_sampling_gap(total: float, worst: float, tokens: int, tolerance: float) -> float:
    """The mean gap; raise past ``tolerance`` (the engine sampled from another policy)."""
    mean = total / tokens
    if not mean <= tolerance:  # NaN fails too
        raise RuntimeError(
            f"the rollout engine sampled from another policy than the one trained: mean "
            f"|log-prob difference| {mean:.4f} (max {worst:.4f}) over {tokens} sampled tokens "
            f"exceeds --rollout-logprob-tolerance {tolerance}. A weight sync that missed "
            "parameters or an engine bug would do this; --rollout-dtype float32 samples the "
            "policy's exact distribution")
    return mean


# A missed weight sync moves the sampler-vs-policy gap by far less than the absolute tolerance
# (--rollout-logprob-tolerance, sized for bf16 sampling's own gap of ~0.01): vLLM's CPU build in
# float32 measured 8.6e-6 when synced and 1.55e-2 with the sync removed, one lr-1e-2 step on
# tiny-random later. So every step is also held to the run's own first gap (engine and policy
# then hold the same weights by construction: the gap is the two stacks' own): at most
# GAP_DRIFT_RATIO times it, never less than GAP_DRIFT_FLOOR (a float32 engine's gap is noise
# near 1e-6), never more than the absolute tolerance. bf16 sampling's own gap times the ratio
# is above the tolerance, so there the tolerance alone decides, as before.
GAP_DRIFT_RATIO = 10.0
GAP_DRIFT_FLOOR = 1e-3


def gap_limit(baseline: float | None, tolerance: float) -> float:
    """The largest mean sampler-vs-policy gap a step may have, given the run's first step's
    gap (``baseline``; None before it is measured: the absolute ``tolerance``)."""
    if baseline is None:
        return tolerance
    return min(tolerance, max(GAP_DRIFT_RATIO * baseline, GAP_DRIFT_FLOOR))


def check_gap_drift(gap: float, baseline: float | None, tolerance: float, step: int) -> None:
    """Raise when a step's gap is past ``gap_limit``: the engine sampled from weights the
    policy no longer holds (a weight sync that did not happen or did not arrive)."""
    limit = gap_limit(baseline, tolerance)
    if not gap <= limit:
        raise RuntimeError(
            f"step {step}: the rollout engine sampled from another policy than the one "
            f"trained: mean |log-prob difference| {gap:.3g} against the run's first step's "
            f"{baseline:.3g}, past {limit:.3g} (the lesser of --rollout-logprob-tolerance "
            f"{tolerance} and {GAP_DRIFT_RATIO:g} x the first gap, at least {GAP_DRIFT_FLOOR:g}"
            "). A weight sync that was skipped or did not reach the engine does this")


@contextlib.contextmanager
def autocast(dtype: str, *models):
    """The policy's forwards in ``dtype`` (``--update-dtype``; the update's, and the passes'
    and the old/reference log-probs'): torch's autocast on the models' device, so the
    transformer's matrix products run in bf16 on float32 weights (their gradients, the
    optimizer and its state stay float32; the backward follows the forward's casts). bf16 has
    float32's exponent range, so no loss scaling is needed. Each model's output head stays
    float32: bf16 logits would round the log-probability of a logit near 20 by ~0.05, and the
    head runs on the response tokens only, a small share of the FLOPs. float32: nothing
    changes. Weights loaded in bf16 (``--dtype bfloat16``) keep their bf16 head."""
    if dtype == "float32":
        yield
        return
    modules = [getattr(m, "module", m) for m in models if m is not None]  # DeepSpeed wraps
    device = next(modules[0].parameters()).device.type if modules else "cpu"
    heads = {id(h): h for h in (m.get_output_embeddings() for m in modules
                                if hasattr(m, "get_output_embeddings")) if h is not None}
    saved = []
    for head in heads.values():
        plain, own = head.forward, head.__dict__.get("forward")
        head.forward = _float_forward(plain, device, head.weight.dtype)
        saved.append((head, own))
    try:
        with torch.autocast(device_type=device, dtype=getattr(torch, dtype)):
            yield
    finally:
        for head, own in saved:
            if own is None:
                del head.forward  # the class's forward again
            else:
                head.forward = own


def _float_forward(plain, device: str, dtype: torch.dtype):
    """The head's forward outside autocast, in its weights' own dtype (float32 weights: float32
    logits; a model loaded in bf16 keeps its bf16 head)."""
    def forward(hidden):
        with torch.autocast(device_type=device, enabled=False):
            return plain(hidden.to(dtype))
    return forward


def update(engine, ds_config: dict, world: int, data: StepData, method, options, config,
           pad_id: int) -> dict:
    """PPO epochs x mini-batches of optimizer steps over this step's rollouts; metrics."""
    t = config.training
    mb = ds_config["train_micro_batch_size_per_gpu"]
    scale = ds_config["gradient_accumulation_steps"] * world
    n = data.advantages.shape[0]
    mini = n // t.ppo_mini_batches
    mask_all = data.rollout.response_mask
    agg: dict = dict(max_len=config.rollout.max_response_tokens)
    pg_only = data.ref_logp is None and not method.loss_terms
    stats: dict[str, list[float]] = {}
    skipped = stepped = forwarded = 0
    plain_norm = None
    clock = {"forward": 0.0, "backward": 0.0, "optimizer": 0.0}
    engine_logp = data.rollout.logprobs  # how the engine sampled, where it says
    gap = [0.0, 0.0, 0]  # sum, max, tokens: on the forwards before the first optimizer step
    for _ in range(t.ppo_epochs):
        for m0 in range(0, n, mini):
            if t.loss_agg == "token-mean":
                local = int(mask_all[m0:m0 + mini].sum())
                agg["total_tokens"] = max(1, sum(eng.all_gather_objects(local))) / scale
            chunks = plan(data.advantages, mask_all, list(range(m0, m0 + mini)), mb, pg_only)
            if not chunks:
                skipped += 1
                continue
            stepped += 1
            for c, rows in enumerate(chunks):
                stage(f"update, micro-batch {c + 1}/{len(chunks)}")
                forwarded += len(rows)
                t0 = time.perf_counter()
                with autocast(t.update_dtype, engine):
                    logp, logits = sequence_logprobs(engine, data.rollout, rows,
                                                     config.rollout.temperature, True,
                                                     pack=t.pack_prompts, pad_id=pad_id)
                    loss, info = micro_loss(logp, logits, rows, data, method, options, config,
                                            agg, mb)
                if engine_logp is not None and stepped == 1:  # the policy that sampled
                    r = config.rollout
                    mine = as_sampled(logp.detach().cpu(), logits,
                                      data.rollout.response_ids[rows],
                                      data.rollout.logprobs_truncated, r.temperature, r.top_k,
                                      r.top_p)
                    g = sampling_gap(mine, engine_logp[rows], mask_all[rows])
                    gap = [gap[0] + g[0], max(gap[1], g[1]), gap[2] + g[2]]
                # the optimizer steps after this mini-batch's last micro-batch, however many
                # ran (DeepSpeed's own count assumes all of them)
                engine.set_gradient_accumulation_boundary(c == len(chunks) - 1)
                t1 = time.perf_counter()
                engine.backward(loss)
                t2 = time.perf_counter()
                if c == len(chunks) - 1 and ds_config["zero_optimization"]["stage"] == 0:
                    plain_norm = grad_norm(engine.module)  # DeepSpeed reports none
                engine.step()
                clock["forward"] += t1 - t0
                clock["backward"] += t2 - t1
                clock["optimizer"] += time.perf_counter() - t2
                for key, v in info.items():
                    stats.setdefault(key, []).append(v)
    out = {k: sum(v) / len(v) for k, v in stats.items()}
    if not stats:  # nothing ran: every advantage was 0, and so is the policy-gradient loss
        out.update(loss=0.0, pg_loss=0.0)
    out["skipped_updates"] = float(skipped)
    out["optimizer_steps"] = float(stepped)  # the same on every rank (plan agrees on chunks)
    out["update_rows"] = float(forwarded)
    norm = (engine.get_global_grad_norm() if plain_norm is None else plain_norm) \
        if stepped else None
    if norm is not None:
        out["grad_norm"] = float(norm)
    out.update({f"time/{k}": v for k, v in clock.items()})
    if gap[2]:
        out["rollout/logprob_gap"] = check_sampling_gap(
            *gap, config.rollout.rollout_logprob_tolerance)
        out["rollout/logprob_gap_max"] = gap[1]
    return out
