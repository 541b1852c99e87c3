"""Composition: normaliser x reward weighting x response filter -> token advantages S[N, T].

    GDPO normaliser:  S = whiten( scale(n) * sum_k w_k * f(lambda_k, A_k(n)) )
    GRPO normaliser:  S = group_normalise( sum_k lambda_k w_k r[n,k] )

``f`` is ``lambda * A`` (or DARA's asymmetric ``A + (lambda - 1) max(A, 0)``), ``scale`` is
GD^2PO's ``delta(n) kappa_g`` (1 without a filter), and whitening runs over kept responses only.
The token allocation is uniform (every valid token of a response gets its advantage).
"""
from __future__ import annotations

import torch

from methods.base import AdvantageOutput, MethodOptions, Parts
from methods.batch import RolloutBatch
from methods.filters import gd2po
from methods.gdpo import reward_advantages
from methods.stats import broadcast, group_normalise, whiten
from methods.weighting import WEIGHTINGS, Weights

NORMALISERS = ("grpo", "gdpo")
FILTERS = ("gd2po",)
ALLOCATIONS = ("uniform", "mrtpo", "cort")


def smoothstep(u: float) -> float:
    u = min(max(u, 0.0), 1.0)
    return 3 * u * u - 2 * u ** 3


def cort_token_weights(contrast: torch.Tensor, mask: torch.Tensor, clip: float, mapping: str,
                       ramp: float) -> torch.Tensor:
    """CoRT's token weights (Zhang et al. 2026, arXiv 2607.25659; reconstructed).

    Args:
        contrast: [N, T] ``delta_t = log pi(y_t|x) - log pi(y_t|x_free)``.
        mask: [N, T]. clip: c. mapping: "clip" (``clip(delta, 0, c)``) or "sigmoid"
            (``c * sigmoid(delta)``). ramp: SmoothStep value s(u) in [0, 1].
    Returns: [N, T] ``w = 1 + s(u) (w~ / mean_t w~ - 1)`` (w~ / mean is 1 where the mean is 0),
        0 on masked tokens; the mean over each response's tokens is 1.
    """
    m = mask.to(contrast.dtype)
    if mapping == "clip":
        raw = contrast.clamp(0.0, clip)
    elif mapping == "sigmoid":
        raw = clip * torch.sigmoid(contrast)
    else:
        raise ValueError(f"unknown CoRT mapping {mapping!r}; known: clip, sigmoid")
    raw = raw * m
    mean = raw.sum(dim=1) / m.sum(dim=1).clamp(min=1)
    w = torch.where((mean > 0)[:, None], raw / mean.clamp(min=1e-12)[:, None],
                    torch.ones_like(raw))
    return (1.0 + ramp * (w - 1.0)) * m


def mrtpo_token_weights(relevance: torch.Tensor, mask: torch.Tensor, beta: float,
                        shuffle: bool = False, seed: int = 0) -> torch.Tensor:
    """MRTPO's token weights ``w_k[n,t] = (1 - beta) + beta * rho_k[n,t]``.

    Args:
        relevance: [N, K, T] raw replay distances d_k (>= 0).
        mask: [N, T] valid response tokens.
        beta: allocation strength; 0 gives every token weight 1 (GDPO).
        shuffle: the ablation of Table 5: rho permuted over each response's valid tokens
            (independently per reward), with a generator seeded by ``seed``.
    Returns: [N, K, T] weights with mean 1 over each response's valid tokens, 0 elsewhere.
        ``rho = d / (mean_t d + 1e-8)``; a response whose distances are all 0 (the replay
        changed nothing) gets rho = 1, i.e. the uniform allocation.
    """
    m = mask.to(relevance.dtype)[:, None, :]
    d = relevance * m
    count = m.sum(dim=-1).clamp(min=1)
    mean = d.sum(dim=-1) / count
    rho = d / (mean[..., None] + 1e-8)
    rho = torch.where((mean > 0)[..., None], rho, torch.ones_like(rho))
    if shuffle:
        g = torch.Generator().manual_seed(seed)
        n, k, _ = rho.shape
        for i in range(n):
            valid = mask[i].nonzero().squeeze(1)
            for j in range(k):
                perm = valid[torch.randperm(len(valid), generator=g)]
                rho[i, j, valid] = rho[i, j, perm]
    return ((1.0 - beta) + beta * rho) * m


def _weights(parts: Parts, batch: RolloutBatch, adv: torch.Tensor,
             options: MethodOptions) -> Weights | None:
    if parts.weighting is None:
        return None
    return WEIGHTINGS.get(parts.weighting)(batch, adv, options)


def _lambda_metrics(batch: RolloutBatch, w: Weights | None) -> dict:
    if w is None:
        return {}
    lam = w.lam if w.lam.dim() == 1 else w.lam.mean(dim=0)  # per-group: the batch mean
    return {f"lambda/{name}": float(lam[k]) for k, name in enumerate(batch.reward_names)}


def _advantage_metrics(batch: RolloutBatch, adv: torch.Tensor) -> dict:
    out = {}
    for k, name in enumerate(batch.reward_names):
        col = adv[:, k]
        col = col[~torch.isnan(col)]
        out[f"adv/{name}/abs_mean"] = float(col.abs().mean()) if col.numel() else 0.0
        out[f"adv/{name}/nonzero"] = float((col.abs() > 1e-8).float().mean()) if col.numel() \
            else 0.0
    return out


def compute(parts: Parts, batch: RolloutBatch, options: MethodOptions) -> AdvantageOutput:
    if parts.extra_loss is not None and parts.normaliser is None:
        if parts.weighting or parts.filter or parts.allocation:
            raise ValueError(f"{parts.extra_loss} alone has no reward term; name a normaliser "
                             f"(e.g. {parts.extra_loss}+grpo) to combine it with reward parts")
        # the loss is the extra term alone (OPSD as published): no policy-gradient advantage
        return AdvantageOutput(torch.zeros(batch.response_mask.shape), {})
    normaliser = parts.normaliser or "gdpo"
    if normaliser not in NORMALISERS:
        raise ValueError(f"unknown normaliser {normaliser!r}; known: {', '.join(NORMALISERS)}")
    if parts.filter is not None and parts.filter not in FILTERS:
        raise ValueError(f"unknown response filter {parts.filter!r}; known: {', '.join(FILTERS)}")
    allocation = parts.allocation or "uniform"
    if allocation not in ALLOCATIONS:
        raise ValueError(f"unknown token allocation {allocation!r}; known: {', '.join(ALLOCATIONS)}")
    adv = reward_advantages(batch, options)  # [N, K], NaN = absent
    w = _weights(parts, batch, adv, options)
    metrics = {**_advantage_metrics(batch, adv), **_lambda_metrics(batch, w)}
    # a response with no reward at all carries no signal: advantage 0, and it stays out of the
    # whitening statistics (as TRL does with its "unscorable" completions)
    keep = (~torch.isnan(batch.rewards)).any(dim=1)
    token_w = None
    if normaliser == "grpo":
        if allocation == "mrtpo":
            raise ValueError(f"{allocation} allocates each reward's advantage separately; "
                             "compose it with gdpo")
        if parts.filter is not None:
            raise ValueError("gd2po filters on per-reward advantages; compose it with gdpo")
        if w is not None and w.asymmetric:
            raise ValueError("DARA's asymmetric form acts on per-reward advantages: compose it "
                             "with gdpo, or pass --dara-variant sym")
        r = batch.rewards
        lam = w.lam if w is not None else torch.ones(r.shape[1], dtype=r.dtype)
        present = ~torch.isnan(r)
        total = (torch.where(present, r, torch.zeros_like(r)) * lam * batch.weights()).sum(dim=1)
        total = torch.where(present.any(dim=1), total, torch.full_like(total, float("nan")))
        per_response = group_normalise(total[:, None], batch.group, options.conv.group_eps,
                                       options.conv.single)[:, 0]
        per_response = torch.nan_to_num(per_response, nan=0.0)
        default_mode = "none"  # verl's GRPO does not whiten
    else:
        a = torch.nan_to_num(adv, nan=0.0)
        if w is None:
            contrib = a
        elif w.asymmetric:
            contrib = a + (w.lam - 1.0) * a.clamp(min=0.0)
        else:
            contrib = w.lam * a
        contrib = contrib * batch.weights()  # [N, K]
        if parts.filter == "gd2po":
            scale, kept = gd2po(adv, batch.group, options)
            contrib = contrib * scale[:, None]
            keep = keep & kept
            metrics["kept_fraction"] = float(kept.float().mean())
        per_response = contrib.sum(dim=1)
        if allocation == "mrtpo":
            if batch.relevance is None:
                raise ValueError("mrtpo needs the replay relevance (RolloutBatch.relevance "
                                 "[N, K, T]); the trainer computes it for methods that need "
                                 "'replay'")
            token_w = mrtpo_token_weights(batch.relevance, batch.response_mask,
                                          options.mrtpo_beta, options.shuffle_relevance,
                                          seed=batch.step)
            # S[n,t] = sum_k w_k[n,t] * contrib[n,k]
            token_w = torch.einsum("nkt,nk->nt", token_w, contrib)
        default_mode = options.conv.whiten
    if allocation == "cort":
        if batch.contrast is None:
            raise ValueError("cort needs the counterfactual contrast (RolloutBatch.contrast "
                             "[N, T]); the trainer computes it for methods that need "
                             "'counterfactual'")
        warm = max(1.0, options.cort_warmup * batch.total_steps)
        ramp = smoothstep(batch.step / warm)
        token_w = cort_token_weights(batch.contrast, batch.response_mask, options.cort_clip,
                                     options.cort_map, ramp) * per_response[:, None]
        metrics["cort/ramp"] = ramp
    if w is not None and w.default_whiten is not None:
        default_mode = w.default_whiten
    scores = broadcast(per_response, batch.response_mask) if token_w is None else token_w
    if w is not None and w.zero is not None:
        scores = torch.where(w.zero[:, None], torch.zeros_like(scores), scores)
        metrics["zeroed_fraction"] = float(w.zero.float().mean())
    mode = options.whiten or default_mode
    scores = whiten(scores, batch.response_mask, mode, options.conv.whiten_eps, keep=keep)
    return AdvantageOutput(scores, metrics)
