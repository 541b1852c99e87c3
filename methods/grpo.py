"""GRPO: sum the rewards, then normalise within each prompt group.

``R[n] = sum_k w_k r[n,k]``; ``S[n,t] = (R[n] - mean_g R) / (std_g R + eps)`` on every valid
token. verl's GRPO does no batch whitening (default ``whiten="none"``).
Read: verl ``core_algos.compute_grpo_outcome_advantage``; TRL ``GRPOTrainer``.
"""
from __future__ import annotations

import torch

from methods.base import AdvantageOutput, MethodOptions
from methods.batch import RolloutBatch
from methods.stats import broadcast, group_normalise, whiten


def summed_reward(batch: RolloutBatch) -> torch.Tensor:
    """[N] weighted sum of the present rewards; NaN where a response has no reward at all."""
    r = batch.rewards
    present = ~torch.isnan(r)
    total = torch.where(present, r, torch.zeros_like(r)) @ batch.weights()
    return torch.where(present.any(dim=1), total, torch.full_like(total, float("nan")))


def grpo(batch: RolloutBatch, options: MethodOptions) -> AdvantageOutput:
    adv = group_normalise(summed_reward(batch)[:, None], batch.group, options.conv.group_eps)[:, 0]
    adv = torch.nan_to_num(adv, nan=0.0)  # a response with no reward gets advantage 0
    scores = broadcast(adv, batch.response_mask)
    mode = options.whiten or "none"
    scores = whiten(scores, batch.response_mask, mode, options.conv.whiten_eps)
    return AdvantageOutput(scores, {"adv/abs_mean": float(adv.abs().mean())})
