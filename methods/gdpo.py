"""GDPO's first step: normalise each reward within its group separately.

``A_k(n) = (r[n,k] - mean_g r[.,k]) / (std_g r[.,k] + eps)``;
``S = whiten(sum_k w_k A_k(n))`` (token-level whitening by default, as verl does).
Absent (NaN) rewards contribute nothing; a response with no reward gets 0 before whitening.
Read: Liu et al. 2026 (arXiv 2601.05242), NVlabs/GDPO (verl and TRL forks), TRL
``multi_objective_aggregation="normalize_then_sum"``.
"""
from __future__ import annotations

import torch

from methods.base import MethodOptions
from methods.batch import RolloutBatch
from methods.stats import group_normalise


def reward_advantages(batch: RolloutBatch, options: MethodOptions) -> torch.Tensor:
    """[N, K] per-reward group-normalised advantages A_k(n), NaN where the reward is absent."""
    return group_normalise(batch.rewards, batch.group, options.conv.group_eps,
                           options.conv.single)
