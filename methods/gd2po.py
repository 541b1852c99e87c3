"""GD^2PO: GDPO that drops responses whose rewards pull in opposite directions, scaled by the
group's kept fraction."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from common.lazy import lazy

from methods.base import option
from methods.compose import FILTERS
from methods.registry import add
from methods.stats import group_index

torch = lazy("torch", globals())  # imported on first use: common/lazy.py


@dataclass(frozen=True)
class Gd2poOptions:
    gd2po_tau: Optional[float] = option(
        None, "GD2PO: None = hard filter (drop every conflicting response); a float = soft "
              "filter (drop when agreement < tau; 0.8 in the paper)")

    def problems(self) -> list[str]:
        if self.gd2po_tau is not None and not 0 <= self.gd2po_tau <= 1:
            return [f"gd2po_tau is {self.gd2po_tau}, outside [0, 1]; use --gd2po-tau within it"]
        return []


def gd2po(adv: torch.Tensor, group: torch.Tensor, options) -> tuple[torch.Tensor, torch.Tensor]:
    """GD^2PO (Liu et al. 2026, arXiv 2606.16771; Qwen-Applications/GD2PO).

    conflict(n): some ``A_k(n) > 1e-8`` and some ``A_k'(n) < -1e-8``. Hard variant (default):
    drop every conflicting response; soft variant (``gd2po_tau`` set, 0.8 in the paper): drop
    only conflicting responses with ``|sum_k A_k| / (sum_k |A_k| + 1e-8) < tau``.
    ``delta(n) = 1 - dropped(n)``, ``kappa_g = mean_{n in g} delta(n)``.

    Args:
        adv: [N, K] per-reward advantages (NaN = absent). group: [N].
    Returns:
        (scale [N] = delta(n) * kappa_g(n), keep [N] bool = delta(n) == 1). The normaliser
        multiplies each response's summed advantage by ``scale`` before whitening, and whitens
        over kept responses only.
    """
    a = torch.nan_to_num(adv, nan=0.0)
    conflict = (a > 1e-8).any(dim=1) & (a < -1e-8).any(dim=1)
    if options.gd2po_tau is not None:
        agreement = a.sum(dim=1).abs() / (a.abs().sum(dim=1) + 1e-8)
        dropped = conflict & (agreement < options.gd2po_tau)
    else:
        dropped = conflict
    delta = (~dropped).to(torch.float64)
    gidx, g = group_index(group)
    total = torch.zeros(g, dtype=torch.float64).index_add_(0, gidx, delta)
    count = torch.zeros(g, dtype=torch.float64).index_add_(0, gidx, torch.ones_like(delta))
    kappa = (total / count.clamp(min=1))[gidx]
    return (delta * kappa).to(adv.dtype), ~dropped


FILTERS.add("gd2po", gd2po)
add("gd2po", "GDPO that drops responses whose rewards conflict, scaled by the group's kept "
    "fraction", "Liu et al. 2026, arXiv 2606.16771; Qwen-Applications/GD2PO",
    options=(Gd2poOptions,), filter="gd2po", reference="gdpo")
