"""GDPO: normalise each reward within its group separately, sum, then whiten the batch.

``A_k(n) = (r[n,k] - mean_g r[.,k]) / (std_g r[.,k] + eps)``;
``S = whiten(sum_k w_k A_k(n))`` (token-level whitening by default, as verl does).
Absent (NaN) rewards contribute nothing; a response with no reward gets 0 before whitening.
Read: Liu et al. 2026 (arXiv 2601.05242), NVlabs/GDPO (verl and TRL forks), TRL
``multi_objective_aggregation="normalize_then_sum"``.
"""
from __future__ import annotations

import torch

from methods.base import AdvantageOutput, MethodOptions
from methods.batch import RolloutBatch
from methods.stats import broadcast, group_normalise, whiten


def reward_advantages(batch: RolloutBatch, options: MethodOptions) -> torch.Tensor:
    """[N, K] per-reward group-normalised advantages A_k(n), NaN where the reward is absent."""
    return group_normalise(batch.rewards, batch.group, options.conv.group_eps)


def weighted_sum(adv: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """[N, K] advantages (NaN = absent), [K] or [N, K] weights -> [N] NaN-aware weighted sum."""
    return torch.nan_to_num(adv, nan=0.0).mul(weights).sum(dim=1)


def gdpo(batch: RolloutBatch, options: MethodOptions) -> AdvantageOutput:
    adv = reward_advantages(batch, options)
    summed = weighted_sum(adv, batch.weights())
    scores = broadcast(summed, batch.response_mask)
    mode = options.whiten or options.conv.whiten
    scores = whiten(scores, batch.response_mask, mode, options.conv.whiten_eps)
    metrics = {}
    for k, name in enumerate(batch.reward_names):
        col = adv[:, k]
        col = col[~torch.isnan(col)]
        metrics[f"adv/{name}/abs_mean"] = float(col.abs().mean()) if col.numel() else 0.0
    return AdvantageOutput(scores, metrics)
