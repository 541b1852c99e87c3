"""Pure tensor statistics shared by the advantage strategies: group normalisation, whitening.

Conventions (methods.md, "Notation"): group statistics use the Bessel-corrected (unbiased)
standard deviation; a group with a single valid sample gets mean 0 and std 1 (its advantage is
then the raw reward, which verl does, and which any real G >= 2 run never hits). NaN rewards
mean "absent" and are ignored by every statistic.
"""
from __future__ import annotations

from dataclasses import dataclass

from common.lazy import lazy

torch = lazy("torch", globals())  # imported on first use: common/lazy.py


@dataclass(frozen=True)
class Conventions:
    """Group-std and whitening conventions of one upstream (they differ; published numbers too)."""

    group_eps: float  # added to the group std before dividing
    whiten_eps: float  # variance eps (token) or std eps (sequence) of the batch whitening
    whiten: str  # default batch-whitening convention: "token" | "sequence" | "none"
    # a reward with one valid value in its group: "unit" normalises with mean 0, std 1 (verl);
    # "absent" treats it as absent (TRL: its nanstd of one value is NaN, dropped by nansum)
    single: str = "unit"


# verl (and the GDPO authors' verl fork, which the paper follows): eps 1e-6 on the group std,
# token-level whitening with rsqrt(var + 1e-8).
VERL = Conventions(group_eps=1e-6, whiten_eps=1e-8, whiten="token")
# TRL GRPOTrainer multi_objective_aggregation="normalize_then_sum": eps 1e-4 in both places,
# whitening over responses.
TRL = Conventions(group_eps=1e-4, whiten_eps=1e-4, whiten="sequence", single="absent")
CONVENTIONS = {"verl": VERL, "trl": TRL}


def _group_moments(values: torch.Tensor, group: torch.Tensor):
    """Per (group, column) of [N, K] ``values`` (NaN: absent), in float64: the rows' group
    index [N], valid mask [N, K], values with 0 for absent [N, K], and the groups' valid count,
    mean and sum of squared deviations [G, K]."""
    if values.dim() != 2:
        raise ValueError(f"values must be [N, K], got {tuple(values.shape)}")
    _, gidx = torch.unique(group, return_inverse=True)
    num_groups = int(gidx.max().item()) + 1 if gidx.numel() else 0
    valid = ~torch.isnan(values)
    x = torch.where(valid, values, torch.zeros_like(values)).to(torch.float64)
    k = values.shape[1]
    count = torch.zeros(num_groups, k, dtype=torch.float64).index_add_(
        0, gidx, valid.to(torch.float64))
    total = torch.zeros(num_groups, k, dtype=torch.float64).index_add_(0, gidx, x)
    mean = total / count.clamp(min=1)
    dev = torch.where(valid, x - mean[gidx], torch.zeros_like(x))
    sq = torch.zeros(num_groups, k, dtype=torch.float64).index_add_(0, gidx, dev * dev)
    return gidx, valid, x, count, mean, sq


def group_normalise(values: torch.Tensor, group: torch.Tensor, eps: float,
                    single: str = "unit") -> torch.Tensor:
    """Normalise each column within its prompt group, ignoring NaNs.

    Args:
        values: [N, K] float, NaN where absent.
        group: [N] long group ids (any integers).
        eps: added to the unbiased group std.
    Returns:
        [N, K]: ``(x - mean_g) / (std_g + eps)``; NaN stays NaN. A (group, column) with one
        valid value uses mean 0, std 1 (``single="unit"``) or becomes NaN (``"absent"``).
    """
    gidx, valid, x, count, mean, sq = _group_moments(values, group)
    std = torch.sqrt(sq / (count - 1).clamp(min=1))
    single_mode, single = single, count <= 1
    if single_mode not in ("unit", "absent"):
        raise ValueError(f"unknown single-sample convention {single_mode!r}")
    mean = torch.where(single, torch.zeros_like(mean), mean)
    std = torch.where(single, torch.ones_like(std), std)
    out = (x - mean[gidx]) / (std[gidx] + eps)
    keep = valid & ~single[gidx] if single_mode == "absent" else valid
    out = torch.where(keep, out, torch.full_like(out, float("nan")))
    return out.to(values.dtype)


def within_group_signal(values: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    """Where a reward can carry a group-normalised advantage.

    Args:
        values: [N, K] float, NaN where absent.
        group: [N] long group ids.
    Returns:
        [N, K] bool: False where reward k is absent for response n, or where response n's
        group has >= 2 valid values of it and they do not deviate from their mean (all
        equal). There ``group_normalise`` gives exactly 0 (the same float64 deviations), so
        any per-reward advantage built on it is 0 and a pass may skip the pair; a lone valid
        value (which the "unit" convention keeps as the raw reward) stays True.
    """
    gidx, valid, _, count, _, sq = _group_moments(values, group)
    constant = (count >= 2) & (sq == 0)
    return valid & ~constant[gidx]


def whiten(
    scores: torch.Tensor, mask: torch.Tensor, mode: str, eps: float, keep: torch.Tensor | None = None
) -> torch.Tensor:
    """Batch whitening of token advantages.

    Args:
        scores: [N, T] token advantages.
        mask: [N, T] valid response tokens.
        mode: "token" (mean/unbiased var over valid tokens, ``(x-mu)*rsqrt(var+eps)``),
            "sequence" (over responses, using each response's first valid token's value,
            ``(x-mean)/(std+eps)``), or "none".
        eps: see ``mode``.
        keep: optional [N] bool; statistics use only kept responses, dropped ones get 0.
    Returns:
        [N, T] whitened advantages, zero on masked tokens (and on dropped responses).
    """
    m = mask.to(torch.bool)
    if keep is not None:
        m = m & keep.to(torch.bool)[:, None]
    if mode == "none":
        out = scores
    elif mode == "token":
        vals = scores[m].to(torch.float64)
        if vals.numel() < 2:
            out = scores - (vals.mean() if vals.numel() else 0.0)
        else:
            mu = vals.mean()
            var = vals.var(unbiased=True)
            out = ((scores.to(torch.float64) - mu) * torch.rsqrt(var + eps)).to(scores.dtype)
    elif mode == "sequence":
        rows = m.any(dim=1)
        first = torch.argmax(m.to(torch.int8), dim=1)
        per_seq = scores.gather(1, first[:, None]).squeeze(1)[rows].to(torch.float64)
        if per_seq.numel() < 2:
            out = scores - (per_seq.mean() if per_seq.numel() else 0.0)
        else:
            out = ((scores.to(torch.float64) - per_seq.mean()) / (per_seq.std() + eps)).to(
                scores.dtype
            )
    else:
        raise ValueError(f"unknown whitening mode {mode!r}; known: token, sequence, none")
    return torch.where(m, out, torch.zeros_like(out))


# allocations that put one value per response on every token (the response's advantage):
# only these can be whitened per sequence, which reads each response's one value (its first
# token's); every other allocation (MRTPO, CoRT, VERPO, a plugin's) whitens per token or not
PER_RESPONSE: set[str] = {"uniform"}


def whitening_problem(allocation: str | None, mode: str) -> str | None:
    """Why ``mode`` cannot whiten this allocation's advantages (None: it can)."""
    name = allocation or "uniform"
    if mode == "sequence" and name not in PER_RESPONSE:
        return (f"sequence whitening reads one advantage per response (its first token's), and "
                f"the {name!r} allocation gives each token its own; use --whiten token (or "
                "none); --conventions trl whitens per sequence by default")
    return None


def broadcast(per_response: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[N] per-response values -> [N, T] on valid tokens, 0 elsewhere."""
    return per_response[:, None].to(torch.float32) * mask.to(torch.float32)


def groups_with_signal(rewards: torch.Tensor, group: torch.Tensor) -> float:
    """Share of prompt groups in which some reward takes two different (non-NaN) values, i.e.
    whose group-normalised advantage is non-zero for some reward.

    Args:
        rewards: [N, K] float, NaN where absent.
        group: [N] group ids.
    Returns: a float in [0, 1] (0 for an empty batch).
    """
    ids = torch.unique(group)
    if ids.numel() == 0:
        return 0.0
    hits = 0
    for g in ids:
        rows = rewards[group == g]
        for k in range(rows.shape[1]):
            col = rows[:, k][~torch.isnan(rows[:, k])]
            if col.numel() >= 2 and bool((col != col[0]).any()):
                hits += 1
                break
    return hits / ids.numel()


def nan_std(x: torch.Tensor, unbiased: bool) -> torch.Tensor:
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


def nan_mean(x: torch.Tensor) -> torch.Tensor:
    """Column mean of [M, K] ignoring NaN (float64); NaN where a column has no value."""
    valid = ~torch.isnan(x)
    n = valid.sum(dim=0).to(torch.float64)
    total = torch.where(valid, x, torch.zeros_like(x)).to(torch.float64).sum(dim=0)
    return torch.where(n > 0, total / n.clamp(min=1), torch.full_like(total, float("nan")))


def group_index(group: torch.Tensor) -> tuple[torch.Tensor, int]:
    """([N] dense group index 0..G-1, G) of [N] group ids."""
    _, gidx = torch.unique(group, return_inverse=True)
    return gidx, int(gidx.max()) + 1 if gidx.numel() else 0
