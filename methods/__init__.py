"""The method registry: advantage strategies behind one contract, RolloutBatch -> S[N, T].

Registered names are presets of parts (normaliser, reward weighting, response filter);
``a+b`` composes presets (``gdpo+saw``, ``grpo+sa-mrpo``, ``saw+gd2po``). Functional entry::

    S = methods.advantages("gdpo+saw", batch, whiten="token")
"""
from __future__ import annotations

import torch

from common.registry import Registry
from methods.base import AdvantageOutput, Method, MethodOptions, Parts
from methods.batch import RolloutBatch

METHODS: Registry[Method] = Registry("method")


def _add(name: str, help: str, source: str, needs: tuple[str, ...] = (), **parts) -> None:
    METHODS.add(name, Method(name=name, help=help, source=source, parts=Parts(**parts),
                             needs=needs))


_add("grpo", "sum rewards, then normalise within the prompt group (no batch whitening)",
     "Shao et al. 2024; verl compute_grpo_outcome_advantage", normaliser="grpo")
_add("gdpo", "normalise each reward within the group, sum, whiten over the batch's tokens",
     "Liu et al. 2026, arXiv 2601.05242; NVlabs/GDPO", normaliser="gdpo")
_add("saw", "GDPO with lambda_k from each reward's coefficient of variation over the batch",
     "He et al. 2026, arXiv 2606.07705; Zhaolutuan/SAW", weighting="saw")
_add("dara", "GDPO with lambda_k = min(5, sqrt(max pi / pi_k)) from how often reward k has "
     "signal; boosts positive advantages (asym)", "Zheng et al. 2026, arXiv 2610.00574; "
     "zhaihaotian/DARA", weighting="dara")
_add("dvao", "per-group lambda_k proportional to reward k's std in the group; no whitening",
     "Jiang et al. 2026, arXiv 2605.25604 (re-implementations)", weighting="dvao")
_add("sa-mrpo", "GDPO with lambda_k = (1 - saturation_k)^gamma, gamma 0.5",
     "Wang et al. 2026, arXiv 2608.16072 (secondary summary)", weighting="sa-mrpo")
_add("gd2po", "GDPO that drops responses whose rewards conflict, scaled by the group's kept "
     "fraction", "Liu et al. 2026, arXiv 2606.16771; Qwen-Applications/GD2PO", filter="gd2po")
_add("mrtpo", "GDPO whose per-reward advantages go to the tokens the reward's verifier "
     "information moves (replay JS distance), w = (1-beta) + beta*rho", "the MRTPO paper; "
     "reconstructed (docs/methods.md)", needs=("replay",), allocation="mrtpo")
_add("cort", "GRPO whose advantage is spread by the tokens' log-likelihood gain from the "
     "constraints (constraint-bearing vs criteria-free prompt), SmoothStep ramp",
     "Zhang et al. 2026, arXiv 2607.25659; reconstructed", needs=("counterfactual",),
     normaliser="grpo", allocation="cort")
_add("opsd", "on-policy self-distillation: the policy, given the privileged reference, teaches "
     "itself on its own samples (generalised JSD per token); no reward term",
     "Zhao et al. 2026, arXiv 2601.18734; siyan-zhao/OPSD", needs=("teacher",),
     extra_loss="opsd")


def get(name: str) -> Method:
    """A registered method, or a composition ``a+b+...`` of registered presets."""
    if "+" not in name:
        return METHODS.get(name)
    components = [METHODS.get(part) for part in name.split("+")]
    parts = components[0].parts
    for prev, comp in zip(components, components[1:]):
        parts = parts.merge(comp.parts, (prev.name, comp.name))
    needs = tuple(sorted({n for c in components for n in c.needs}))
    return Method(name=name, help=" + ".join(c.help for c in components),
                  source="; ".join(c.source for c in components), parts=parts, needs=needs)


def compute(name: str, batch: RolloutBatch, options: MethodOptions | None = None) -> AdvantageOutput:
    """Token advantages and diagnostics of method ``name`` on ``batch``."""
    return get(name).compute(batch, options or MethodOptions())


def advantages(name: str, batch: RolloutBatch, **options) -> torch.Tensor:
    """[N, T] token advantages of method ``name``; ``options`` are MethodOptions fields."""
    return compute(name, batch, MethodOptions(**options)).scores


__all__ = ["METHODS", "AdvantageOutput", "Method", "MethodOptions", "Parts", "RolloutBatch",
           "advantages", "compute", "get"]
