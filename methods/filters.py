"""Response filters: GD^2PO drops responses whose rewards pull in opposite directions."""
from __future__ import annotations

import torch

from methods.base import MethodOptions


def gd2po(adv: torch.Tensor, group: torch.Tensor, options: MethodOptions
          ) -> tuple[torch.Tensor, torch.Tensor]:
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
    _, gidx = torch.unique(group, return_inverse=True)
    g = int(gidx.max()) + 1 if gidx.numel() else 0
    total = torch.zeros(g, dtype=torch.float64).index_add_(0, gidx, delta)
    count = torch.zeros(g, dtype=torch.float64).index_add_(0, gidx, torch.ones_like(delta))
    kappa = (total / count.clamp(min=1))[gidx]
    return (delta * kappa).to(adv.dtype), ~dropped
