"""SAW: GDPO with lambda_k from each reward's coefficient of variation over the batch.

He et al. 2026 (arXiv 2606.07705; Zhaolutuan/SAW ``gdpo-h``): ``r~_k = r_k - lo_k``; over the
whole batch ``CV_k = std(r~_k) / (|mean(r~_k)| + 1e-8)`` (unbiased std);
``lambda_k = K CV_k / (sum_l CV_l + 1e-8)``; all 1 if ``sum CV <= 1e-8``. K counts the rewards
present in the batch; an absent reward keeps lambda 1.
"""
from __future__ import annotations

from common.lazy import lazy

from methods.batch import RolloutBatch
from methods.compose import WEIGHTINGS, Weights
from methods.registry import add
from methods.stats import nan_mean, nan_std

torch = lazy("torch", globals())  # imported on first use: common/lazy.py

_EPS = 1e-8


def saw(batch: RolloutBatch, adv: torch.Tensor, options) -> Weights:
    lo, _ = batch.lo_hi()
    shifted = batch.rewards.to(torch.float64) - lo
    present = (~torch.isnan(batch.rewards)).any(dim=0)
    cv = nan_std(shifted, unbiased=True) / (nan_mean(shifted).abs() + _EPS)
    cv = torch.where(present, torch.nan_to_num(cv, nan=0.0), torch.zeros_like(cv))
    k = int(present.sum())
    total = cv.sum()
    if total <= _EPS:
        lam = torch.ones_like(cv)
    else:
        lam = torch.where(present, k * cv / (total + _EPS), torch.ones_like(cv))
    return Weights(lam.to(batch.rewards.dtype))


WEIGHTINGS.add("saw", saw)
add("saw", "GDPO with lambda_k from each reward's coefficient of variation over the batch",
    "He et al. 2026, arXiv 2606.07705; Zhaolutuan/SAW", weighting="saw", reference="gdpo")
