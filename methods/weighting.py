"""Reward weightings (paper Table 8): functions that return lambda_k from a batch.

Each weighting sees the batch and the per-reward group advantages ``A [N, K]`` (NaN = absent)
and returns :class:`Weights`. The normaliser then forms ``sum_k lambda_k w_k A_k`` (GDPO) or
``sum_k lambda_k w_k r_k`` (GRPO). All lambdas are detached statistics recomputed every step;
all reduce to GDPO when every lambda is 1. Reward bounds come from the task's declarations.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch

from common.registry import Registry
from methods.base import MethodOptions
from methods.batch import RolloutBatch

_EPS = 1e-8


@dataclass(frozen=True)
class Weights:
    lam: torch.Tensor  # [K] per batch, or [N, K] per response (per-group weightings)
    asymmetric: bool = False  # DARA asym: A + (lambda - 1) * max(A, 0) instead of lambda * A
    zero: Optional[torch.Tensor] = None  # [N] bool: responses whose advantage is forced to 0
    default_whiten: Optional[str] = None  # a weighting's own whitening default (DVAO: none)


def _nan_std(x: torch.Tensor, unbiased: bool) -> torch.Tensor:
    """Column std of [M, K] ignoring NaN; NaN where fewer than 1 (+1 if unbiased) values."""
    valid = ~torch.isnan(x)
    n = valid.sum(dim=0).to(torch.float64)
    x0 = torch.where(valid, x, torch.zeros_like(x)).to(torch.float64)
    mean = x0.sum(dim=0) / n.clamp(min=1)
    dev = torch.where(valid, x0 - mean, torch.zeros_like(x0))
    denom = (n - 1) if unbiased else n
    var = (dev * dev).sum(dim=0) / denom.clamp(min=1)
    std = var.sqrt()
    return torch.where(n > (1 if unbiased else 0), std, torch.full_like(std, float("nan")))


def _nan_mean(x: torch.Tensor) -> torch.Tensor:
    valid = ~torch.isnan(x)
    n = valid.sum(dim=0).to(torch.float64)
    total = torch.where(valid, x, torch.zeros_like(x)).to(torch.float64).sum(dim=0)
    return torch.where(n > 0, total / n.clamp(min=1), torch.full_like(total, float("nan")))


def _lo_hi(batch: RolloutBatch) -> tuple[torch.Tensor, torch.Tensor]:
    b = torch.tensor(batch.reward_bounds, dtype=torch.float64)
    return b[:, 0], b[:, 1]


def saw(batch: RolloutBatch, adv: torch.Tensor, options: MethodOptions) -> Weights:
    """SAW (He et al. 2026, arXiv 2606.07705; Zhaolutuan/SAW ``gdpo-h``).

    ``r~_k = r_k - lo_k``; over the whole batch ``CV_k = std(r~_k) / (|mean(r~_k)| + 1e-8)``
    (unbiased std); ``lambda_k = K CV_k / (sum_l CV_l + 1e-8)``; all 1 if ``sum CV <= 1e-8``.
    K counts the rewards present in the batch; an absent reward keeps lambda 1.
    """
    lo, _ = _lo_hi(batch)
    shifted = batch.rewards.to(torch.float64) - lo
    present = (~torch.isnan(batch.rewards)).any(dim=0)
    cv = _nan_std(shifted, unbiased=True) / (_nan_mean(shifted).abs() + _EPS)
    cv = torch.where(present, torch.nan_to_num(cv, nan=0.0), torch.zeros_like(cv))
    k = int(present.sum())
    total = cv.sum()
    if total <= _EPS:
        lam = torch.ones_like(cv)
    else:
        lam = torch.where(present, k * cv / (total + _EPS), torch.ones_like(cv))
    return Weights(lam.to(batch.rewards.dtype))


def _group_index(group: torch.Tensor) -> tuple[torch.Tensor, int]:
    _, gidx = torch.unique(group, return_inverse=True)
    return gidx, int(gidx.max()) + 1 if gidx.numel() else 0


def dara(batch: RolloutBatch, adv: torch.Tensor, options: MethodOptions) -> Weights:
    """DARA (Zheng et al. 2026, arXiv 2610.00574; zhaihaotian/DARA).

    ``pi_k`` = fraction of prompt groups (among those where reward k is present) in which
    reward k has a nonzero advantage (``sum_{n in g} |A_k(n)| > 1e-8``);
    ``lambda_k = min(5, sqrt(max_l pi_l / pi_k))``, 1 where ``pi_k = 0``. Variant ``asym``
    (default) boosts only positive advantages: ``A_k + (lambda_k - 1) max(A_k, 0)``; ``sym``
    scales them: ``lambda_k A_k``.
    """
    gidx, g = _group_index(batch.group)
    k = adv.shape[1]
    valid = ~torch.isnan(adv)
    abs_sum = torch.zeros(g, k, dtype=torch.float64).index_add_(
        0, gidx, torch.where(valid, adv.abs(), torch.zeros_like(adv)).to(torch.float64))
    present = torch.zeros(g, k, dtype=torch.float64).index_add_(0, gidx, valid.to(torch.float64))
    groups_with = (present > 0).sum(dim=0).to(torch.float64)
    active = ((abs_sum > 1e-8) & (present > 0)).sum(dim=0).to(torch.float64)
    pi = active / groups_with.clamp(min=1)
    lam = torch.ones(k, dtype=torch.float64)
    if (pi > 0).any():
        ratio = torch.sqrt(pi.max() / pi.clamp(min=1e-30))
        lam = torch.where(pi > 0, torch.clamp(ratio, max=options.dara_cap), lam)
    if options.dara_variant not in ("asym", "sym"):
        raise ValueError(f"unknown DARA variant {options.dara_variant!r}; known: asym, sym")
    return Weights(lam.to(batch.rewards.dtype), asymmetric=options.dara_variant == "asym")


def dvao(batch: RolloutBatch, adv: torch.Tensor, options: MethodOptions) -> Weights:
    """DVAO (Jiang et al. 2026, arXiv 2605.25604; no official code, two re-implementations).

    Per group: ``sigma_k`` = population std of reward k in the group, ``b_k = 1/K``;
    ``lambda_k = b_k sigma_k / sum_l b_l sigma_l``; ``S = sum_k lambda_k A_k``, no final
    whitening by default. A group whose ``sum_l b_l sigma_l <= 1e-8``, or with one response,
    gets S = 0. K counts the rewards present in the group.
    """
    gidx, g = _group_index(batch.group)
    r = batch.rewards
    n, k = r.shape
    lam = torch.zeros(n, k, dtype=torch.float64)
    zero = torch.zeros(n, dtype=torch.bool)
    for j in range(g):
        rows = (gidx == j).nonzero().squeeze(1)
        sigma = _nan_std(r[rows], unbiased=False)  # NaN for a reward absent from the group
        present = ~torch.isnan(sigma)
        kk = int(present.sum())
        b = torch.where(present, torch.full_like(sigma, 1.0 / max(kk, 1)), torch.zeros_like(sigma))
        weighted = b * torch.nan_to_num(sigma, nan=0.0)
        total = weighted.sum()
        if len(rows) < 2 or total <= 1e-8:
            zero[rows] = True
            continue
        lam[rows] = (weighted / total)[None, :]
    return Weights(lam.to(r.dtype), zero=zero, default_whiten="none")


def sa_mrpo(batch: RolloutBatch, adv: torch.Tensor, options: MethodOptions) -> Weights:
    """SA-MRPO (Wang et al. 2026, arXiv 2608.16072; no code, read from a secondary summary).

    Saturation ``s_k = clip((mean_batch r_k - lo_k) / (hi_k - lo_k), 0, 1)``;
    ``lambda_k = (1 - s_k)^gamma``, gamma = 0.5 by default; gamma = 0 is GDPO.
    """
    lo, hi = _lo_hi(batch)
    mean = torch.nan_to_num(_nan_mean(batch.rewards), nan=0.0)  # absent reward: lambda 1 below
    sat = torch.clamp((mean - lo) / (hi - lo), 0.0, 1.0)
    present = (~torch.isnan(batch.rewards)).any(dim=0)
    lam = torch.where(present, (1.0 - sat) ** options.sa_gamma, torch.ones_like(sat))
    return Weights(lam.to(batch.rewards.dtype))


WeightingFn = Callable[[RolloutBatch, torch.Tensor, MethodOptions], Weights]
WEIGHTINGS: Registry[WeightingFn] = Registry("reward weighting")
WEIGHTINGS.add("saw", saw)
WEIGHTINGS.add("dara", dara)
WEIGHTINGS.add("dvao", dvao)
WEIGHTINGS.add("sa-mrpo", sa_mrpo)
