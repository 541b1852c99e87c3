"""DARA: GDPO with lambda_k from how often reward k has signal; boosts positive advantages.

Zheng et al. 2026 (arXiv 2610.00574; zhaihaotian/DARA): ``pi_k`` = fraction of prompt groups
(among those where reward k is present) in which reward k has a nonzero advantage
(``sum_{n in g} |A_k(n)| > 1e-8``); ``lambda_k = min(cap, sqrt(max_l pi_l / pi_k))``, 1 where
``pi_k = 0``. Variant ``asym`` (default) boosts only positive advantages:
``A_k + (lambda_k - 1) max(A_k, 0)``; ``sym`` scales them: ``lambda_k A_k``.
"""
from __future__ import annotations

from dataclasses import dataclass

from common.lazy import lazy

from methods.base import option
from methods.batch import RolloutBatch
from methods.compose import WEIGHTINGS, Weights
from methods.registry import add
from methods.stats import group_index

torch = lazy("torch", globals())  # imported on first use: common/lazy.py


@dataclass(frozen=True)
class DaraOptions:
    dara_variant: str = option("asym", "DARA: asym (boost positive advantages only) | sym "
                                       "(scale them)")
    dara_cap: float = option(5.0, "DARA: upper bound of lambda")

    def problems(self) -> list[str]:
        out = []
        if self.dara_variant not in ("asym", "sym"):
            out.append(f"unknown dara_variant {self.dara_variant!r}; use asym or sym")
        if self.dara_cap < 0:
            out.append(f"dara_cap is {self.dara_cap}; it must be >= 0")
        return out


def dara(batch: RolloutBatch, adv: torch.Tensor, options) -> Weights:
    gidx, g = group_index(batch.group)
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


WEIGHTINGS.add("dara", dara)
add("dara", "GDPO with lambda_k = min(5, sqrt(max pi / pi_k)) from how often reward k has "
    "signal; boosts positive advantages (asym)", "Zheng et al. 2026, arXiv 2610.00574; "
    "zhaihaotian/DARA", options=(DaraOptions,), weighting="dara", reference="gdpo")
