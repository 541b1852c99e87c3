"""GRPO: sum the rewards, then normalise the sum within the prompt group (no batch whitening).

``S(n) = (R(n) - mean_g R) / (std_g R + eps)`` with ``R(n) = sum_k lambda_k r[n,k]`` (lambda 1
without a weighting); absent rewards add nothing, a response with none gets 0.
Read: Shao et al. 2024; verl ``compute_grpo_outcome_advantage``.
"""
from __future__ import annotations

from common.lazy import lazy

from methods.batch import RolloutBatch
from methods.compose import NORMALISERS, Normalised, Weights, has_reward
from methods.registry import add
from methods.stats import group_normalise

torch = lazy("torch", globals())  # imported on first use: common/lazy.py


def normalise(batch: RolloutBatch, adv: torch.Tensor, w: Weights | None, filter_name,
              options) -> Normalised:
    if filter_name is not None:
        raise ValueError(f"{filter_name} filters on per-reward advantages; compose it with gdpo")
    if w is not None and w.asymmetric:
        raise ValueError("DARA's asymmetric form acts on per-reward advantages: compose it "
                         "with gdpo, or pass --dara-variant sym")
    r = batch.rewards
    lam = w.lam if w is not None else torch.ones(r.shape[1], dtype=r.dtype)
    present = ~torch.isnan(r)
    total = (torch.where(present, r, torch.zeros_like(r)) * lam).sum(dim=1)
    total = torch.where(present.any(dim=1), total, torch.full_like(total, float("nan")))
    per_response = group_normalise(total[:, None], batch.group, options.conv.group_eps,
                                   options.conv.single)[:, 0]
    # verl's GRPO does not whiten; the sum is not split per reward (contrib None)
    return Normalised(torch.nan_to_num(per_response, nan=0.0), None, has_reward(batch),
                      "none", {})


NORMALISERS.add("grpo", normalise)
add("grpo", "sum rewards, then normalise within the prompt group (no batch whitening)",
    "Shao et al. 2024; verl compute_grpo_outcome_advantage", normaliser="grpo")
