"""DVAO: per-group lambda_k proportional to reward k's std in the group; no whitening.

Jiang et al. 2026 (arXiv 2605.25604; no official code, two re-implementations). Per group:
``sigma_k`` = population std of reward k in the group, ``b_k = 1/K``;
``lambda_k = b_k sigma_k / sum_l b_l sigma_l``; ``S = sum_k lambda_k A_k``, no final whitening
by default. A group whose ``sum_l b_l sigma_l <= 1e-8``, or with one response, gets S = 0. K
counts the rewards present in the group.
"""
from __future__ import annotations

from common.lazy import lazy

from methods.batch import RolloutBatch
from methods.compose import WEIGHTINGS, Weights
from methods.registry import add
from methods.stats import group_index, nan_std

torch = lazy("torch", globals())  # imported on first use: common/lazy.py


def dvao(batch: RolloutBatch, adv: torch.Tensor, options) -> Weights:
    gidx, g = group_index(batch.group)
    r = batch.rewards
    n, k = r.shape
    lam = torch.zeros(n, k, dtype=torch.float64)
    zero = torch.zeros(n, dtype=torch.bool)
    for j in range(g):
        rows = (gidx == j).nonzero().squeeze(1)
        sigma = nan_std(r[rows], unbiased=False)  # NaN for a reward absent from the group
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


WEIGHTINGS.add("dvao", dvao)
add("dvao", "per-group lambda_k proportional to reward k's std in the group; no whitening",
    "Jiang et al. 2026, arXiv 2605.25604 (re-implementations)", weighting="dvao",
    reference="gdpo")
