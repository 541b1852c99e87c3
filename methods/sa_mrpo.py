"""SA-MRPO: GDPO with lambda_k = (1 - saturation_k)^gamma.

Wang et al. 2026 (arXiv 2608.16072; no code, read from a secondary summary). Saturation
``s_k = clip((mean_batch r_k - lo_k) / (hi_k - lo_k), 0, 1)``; ``lambda_k = (1 - s_k)^gamma``,
gamma = 0.5 by default; gamma = 0 is GDPO.
"""
from __future__ import annotations

from dataclasses import dataclass

from common.lazy import lazy

from methods.base import option
from methods.batch import RolloutBatch
from methods.compose import WEIGHTINGS, Weights
from methods.registry import add
from methods.stats import nan_mean

torch = lazy("torch", globals())  # imported on first use: common/lazy.py


@dataclass(frozen=True)
class SaMrpoOptions:
    sa_gamma: float = option(0.5, "SA-MRPO: lambda = (1 - saturation)^gamma; 0 is GDPO")

    def problems(self) -> list[str]:
        return [f"sa_gamma is {self.sa_gamma}; it must be >= 0"] if self.sa_gamma < 0 else []


def sa_mrpo(batch: RolloutBatch, adv: torch.Tensor, options) -> Weights:
    lo, hi = batch.lo_hi()
    mean = torch.nan_to_num(nan_mean(batch.rewards), nan=0.0)  # absent reward: lambda 1 below
    sat = torch.clamp((mean - lo) / (hi - lo), 0.0, 1.0)
    present = (~torch.isnan(batch.rewards)).any(dim=0)
    lam = torch.where(present, (1.0 - sat) ** options.sa_gamma, torch.ones_like(sat))
    return Weights(lam.to(batch.rewards.dtype))


WEIGHTINGS.add("sa-mrpo", sa_mrpo)
add("sa-mrpo", "GDPO with lambda_k = (1 - saturation_k)^gamma, gamma 0.5",
    "Wang et al. 2026, arXiv 2608.16072 (secondary summary)", options=(SaMrpoOptions,),
    weighting="sa-mrpo", reference="gdpo")
