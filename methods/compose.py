"""Composition: normaliser x reward weighting x response filter x token allocation -> S[N, T].

    GDPO normaliser:  S = whiten( alloc( scale(n) * sum_k w_k * f(lambda_k, A_k(n)) ) )
    GRPO normaliser:  S = whiten( alloc( group_normalise( sum_k lambda_k r[n,k] ) ) )

``A_k`` is each reward normalised within its group; ``f`` is ``lambda * A`` (or DARA's
asymmetric ``A + (lambda - 1) max(A, 0)``); ``scale`` is a response filter's (1 without
one); whitening runs over kept responses only. Each part is a function registered here by
name by the method file that defines it; this module knows none of them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from common.lazy import lazy

from common.registry import Registry
from methods.base import AdvantageOutput, Method, Parts
from methods.batch import RolloutBatch
from methods.stats import broadcast, group_normalise, whiten, whitening_problem

torch = lazy("torch", globals())  # imported on first use: common/lazy.py


@dataclass(frozen=True)
class Weights:
    """A reward weighting's output."""

    lam: torch.Tensor  # [K] per batch, or [N, K] per response (per-group weightings)
    asymmetric: bool = False  # DARA asym: A + (lambda - 1) * max(A, 0) instead of lambda * A
    zero: Optional[torch.Tensor] = None  # [N] bool: responses whose advantage is forced to 0
    default_whiten: Optional[str] = None  # a weighting's own whitening default (DVAO: none)


@dataclass(frozen=True)
class Normalised:
    """A normaliser's output, before the token allocation and the whitening."""

    per_response: torch.Tensor  # [N] each response's advantage
    contrib: Optional[torch.Tensor]  # [N, K] per-reward parts summing to it (None: not split)
    keep: torch.Tensor  # [N] bool: responses in the whitening statistics
    default_whiten: str  # token | sequence | none
    metrics: dict


# (batch, A [N, K] NaN = absent, Weights or None, filter name or None, options) -> Normalised
NORMALISERS: Registry[Callable] = Registry("normaliser")
# (batch, A [N, K], options) -> Weights
WEIGHTINGS: Registry[Callable] = Registry("reward weighting")
# (A [N, K], group [N], options) -> (scale [N], kept [N] bool)
FILTERS: Registry[Callable] = Registry("response filter")
# (batch, Normalised, options) -> (scores [N, T], metrics)
ALLOCATIONS: Registry[Callable] = Registry("token allocation")


def reward_advantages(batch: RolloutBatch, options) -> torch.Tensor:
    """[N, K] each reward normalised within its prompt group, NaN where it is absent:
    ``A_k(n) = (r[n,k] - mean_g r[.,k]) / (std_g r[.,k] + eps)``."""
    return group_normalise(batch.rewards, batch.group, options.conv.group_eps,
                           options.conv.single)


def uniform(batch: RolloutBatch, norm: Normalised, options) -> tuple[torch.Tensor, dict]:
    """Every valid token of a response gets the response's advantage."""
    return broadcast(norm.per_response, batch.response_mask), {}


ALLOCATIONS.add("uniform", uniform)  # the one allocation sequence whitening takes (stats.py)


def _lambda_metrics(batch: RolloutBatch, w: Weights | None) -> dict:
    if w is None:
        return {}
    lam = w.lam if w.lam.dim() == 1 else w.lam.mean(dim=0)  # per-group: the batch mean
    return {f"lambda/{name}": float(lam[k]) for k, name in enumerate(batch.reward_names)}


def _advantage_metrics(batch: RolloutBatch, adv: torch.Tensor) -> dict:
    out = {}
    for k, name in enumerate(batch.reward_names):
        col = adv[:, k]
        col = col[~torch.isnan(col)]
        out[f"adv/{name}/abs_mean"] = float(col.abs().mean()) if col.numel() else 0.0
        out[f"adv/{name}/nonzero"] = float((col.abs() > 1e-8).float().mean()) if col.numel() \
            else 0.0
    return out


def bind(parts: Parts) -> tuple[Callable, Callable | None, Callable]:
    """The functions of these parts (normaliser, weighting or None, allocation), looked up
    once; an unknown name fails here (the filter is named to the normaliser)."""
    if parts.filter is not None:
        FILTERS.get(parts.filter)
    return (NORMALISERS.get(parts.normaliser or "gdpo"),
            WEIGHTINGS.get(parts.weighting) if parts.weighting else None,
            ALLOCATIONS.get(parts.allocation or "uniform"))


def compute(parts: Parts, batch: RolloutBatch, options, bound: tuple | None = None
            ) -> AdvantageOutput:
    """Token advantages of a composition of parts (see the module doc); ``bound``: their
    functions (:func:`bind`), looked up here when not given."""
    normaliser, weighting, allocation = bound or bind(parts)
    adv = reward_advantages(batch, options)  # [N, K], NaN = absent
    w = weighting(batch, adv, options) if weighting else None
    norm = normaliser(batch, adv, w, parts.filter, options)
    scores, alloc_metrics = allocation(batch, norm, options)
    metrics = {**_advantage_metrics(batch, adv), **_lambda_metrics(batch, w), **norm.metrics,
               **alloc_metrics}
    default_mode = norm.default_whiten
    if w is not None and w.default_whiten is not None:
        default_mode = w.default_whiten
    if w is not None and w.zero is not None:
        scores = torch.where(w.zero[:, None], torch.zeros_like(scores), scores)
        metrics["zeroed_fraction"] = float(w.zero.float().mean())
    mode = options.whiten or default_mode
    problem = whitening_problem(parts.allocation, mode)
    if problem:  # Method.problems says so before a run; this guards a direct call
        raise ValueError(problem)
    scores = whiten(scores, batch.response_mask, mode, options.conv.whiten_eps, keep=norm.keep)
    return AdvantageOutput(scores, metrics)


def method_advantages(method: Method, batch: RolloutBatch, options) -> AdvantageOutput:
    """A method's token advantages: its parts composed, or zeros for a method whose loss is
    its loss terms alone."""
    if not method.pg_term:
        return AdvantageOutput(torch.zeros(batch.response_mask.shape), {})
    return compute(method.parts, batch, options, method.bound)


def has_reward(batch: RolloutBatch) -> torch.Tensor:
    """[N] bool: a response with no reward at all carries no signal (advantage 0) and stays
    out of the whitening statistics (as TRL does with its "unscorable" completions)."""
    return (~torch.isnan(batch.rewards)).any(dim=1)
