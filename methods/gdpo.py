"""GDPO: normalise each reward within its group separately, sum, whiten over the batch.

``A_k(n) = (r[n,k] - mean_g r[.,k]) / (std_g r[.,k] + eps)``; ``S = whiten(sum_k A_k(n))``
(token-level whitening by default, as verl does). Absent (NaN) rewards contribute nothing; a
response with no reward gets 0 before whitening. This is also the normaliser every reward
weighting, filter and the MRTPO allocation build on: with a weighting the sum is
``sum_k f(lambda_k, A_k)``, with a filter it is scaled per response.
Read: Liu et al. 2026 (arXiv 2601.05242), NVlabs/GDPO (verl and TRL forks), TRL
``multi_objective_aggregation="normalize_then_sum"``.
"""
from __future__ import annotations

from common.lazy import lazy

from methods.batch import RolloutBatch
from methods.compose import FILTERS, NORMALISERS, Normalised, Weights, has_reward
from methods.registry import add

torch = lazy("torch", globals())  # imported on first use: common/lazy.py


def normalise(batch: RolloutBatch, adv: torch.Tensor, w: Weights | None, filter_name,
              options) -> Normalised:
    """Per-reward contributions ``f(lambda_k, A_k(n))`` [N, K] and their sum per response."""
    a = torch.nan_to_num(adv, nan=0.0)
    if w is None:
        contrib = a
    elif w.asymmetric:
        contrib = a + (w.lam - 1.0) * a.clamp(min=0.0)
    else:
        contrib = w.lam * a
    keep, metrics = has_reward(batch), {}
    if filter_name is not None:
        scale, kept = FILTERS.get(filter_name)(adv, batch.group, options)
        contrib = contrib * scale[:, None]
        keep = keep & kept
        metrics["kept_fraction"] = float(kept.float().mean())
    return Normalised(contrib.sum(dim=1), contrib, keep, options.conv.whiten, metrics)


NORMALISERS.add("gdpo", normalise)
add("gdpo", "normalise each reward within the group, sum, whiten over the batch's tokens",
    "Liu et al. 2026, arXiv 2601.05242; NVlabs/GDPO", normaliser="gdpo")
