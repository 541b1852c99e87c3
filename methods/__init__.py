"""The method registry: advantage strategies behind one contract, RolloutBatch -> S[N, T].

Functional entry point::

    S = methods.advantages("gdpo", batch, whiten="token")
"""
from __future__ import annotations

import torch

from harness.registry import Registry
from methods.base import AdvantageOutput, Method, MethodOptions
from methods.batch import RolloutBatch
from methods.gdpo import gdpo
from methods.grpo import grpo

METHODS: Registry[Method] = Registry("method")

METHODS.add("grpo", Method(
    name="grpo",
    help="sum rewards, then normalise within the prompt group (no batch whitening)",
    source="Shao et al. 2024; verl compute_grpo_outcome_advantage",
    compute=grpo,
))
METHODS.add("gdpo", Method(
    name="gdpo",
    help="normalise each reward within the group, sum, whiten over the batch's tokens",
    source="Liu et al. 2026, arXiv 2601.05242; NVlabs/GDPO",
    compute=gdpo,
))


def compute(name: str, batch: RolloutBatch, options: MethodOptions | None = None) -> AdvantageOutput:
    """Token advantages and diagnostics of method ``name`` on ``batch``."""
    return METHODS.get(name).compute(batch, options or MethodOptions())


def advantages(name: str, batch: RolloutBatch, **options) -> torch.Tensor:
    """[N, T] token advantages of method ``name``; ``options`` are MethodOptions fields."""
    return compute(name, batch, MethodOptions(**options)).scores


__all__ = ["METHODS", "AdvantageOutput", "Method", "MethodOptions", "RolloutBatch",
           "advantages", "compute"]
