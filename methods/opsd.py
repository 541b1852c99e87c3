"""OPSD: on-policy self-distillation. The policy, given the privileged reference (every
reward's verifier text in its prompt), teaches itself on its own samples: a per-token
generalised Jensen-Shannon divergence between the student (the policy on the plain prompt) and
the teacher, added to the loss; as published it is the whole loss (no reward term), and
``opsd+grpo`` adds it to GRPO's.

Zhao et al. 2026, arXiv 2601.18734; siyan-zhao/OPSD.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from common.lazy import lazy

from methods.base import LossTerm, PassContext, chunk_option, no_grad, option
from methods.contexts import known_rewards, replay_messages
from methods.registry import add

torch = lazy("torch", globals())  # imported on first use: common/lazy.py

TEACHERS = ("initial", "current")


@dataclass(frozen=True)
class OpsdOptions:
    opsd_beta: float = option(0.5, "OPSD: generalised JSD mixing weight in (0, 1) (0.5 = "
                                   "symmetric)")
    opsd_teacher: str = option("initial", "OPSD teacher: initial (the fixed initial policy) | "
                                          "current (the policy before this update)")
    opsd_coef: float = option(1.0, "OPSD: weight of the distillation loss")
    replay_chunk: int = chunk_option()

    def problems(self) -> list[str]:
        out = []
        if not 0.0 < self.opsd_beta < 1.0:
            out.append(f"opsd_beta is {self.opsd_beta}, outside (0, 1) (the divergence needs "
                       "both distributions in its mixture); use --opsd-beta within it")
        if self.opsd_teacher not in TEACHERS:
            out.append(f"unknown opsd_teacher {self.opsd_teacher!r}; use initial or current")
        if self.opsd_coef < 0:
            out.append(f"opsd_coef is {self.opsd_coef}; it must be >= 0")
        return out


def generalised_jsd(student_logits: torch.Tensor, teacher_hidden: torch.Tensor, teacher_head,
                    temperature: float = 1.0, beta: float = 0.5,
                    chunk: int = 128) -> torch.Tensor:
    """OPSD's per-token generalised Jensen-Shannon divergence (Zhao et al. 2026).

    ``m = (1 - beta) p_S + beta p_T``; ``L = beta KL(p_T || m) + (1 - beta) KL(p_S || m)`` over
    the full vocabulary, logits divided by the rollout temperature. The teacher's logits are
    made from its hidden states a chunk of tokens at a time (no gradient), so the extra memory
    is O(N * chunk * V).

    Args:
        student_logits: [N, T, V] (with gradient). teacher_hidden: [N, T, H].
        teacher_head: hidden -> logits. beta: 0.5 is the symmetric JSD.
    Returns: [N, T] per-token divergence.
    """
    if not 0.0 < beta < 1.0:
        raise ValueError(f"OPSD beta must be in (0, 1), got {beta}")
    out = []
    for s in range(0, student_logits.shape[1], chunk):
        ls = torch.log_softmax(student_logits[:, s:s + chunk].float() / temperature, dim=-1)
        with torch.no_grad():
            h = teacher_hidden[:, s:s + chunk].to(next(teacher_head.parameters()).device)
            lt = torch.log_softmax(teacher_head(h).float() / temperature, dim=-1).to(ls.device)
        lm = torch.logsumexp(torch.stack([ls + math.log(1 - beta), lt + math.log(beta)]), dim=0)
        kl_t = (lt.exp() * (lt - lm)).sum(dim=-1)
        kl_s = (ls.exp() * (ls - lm)).sum(dim=-1)
        out.append(beta * kl_t + (1 - beta) * kl_s)
    return torch.cat(out, dim=1)


@no_grad
def teacher_states(ctx: PassContext, options) -> torch.Tensor:
    """[n, T, H] the teacher's final hidden states on the responses, its prompt holding every
    verifier text (the privileged reference included)."""
    contexts = [replay_messages(e, known_rewards(e)) for e in ctx.examples]
    return ctx.hidden(contexts, list(range(len(contexts))), model=options.opsd_teacher)


def distillation(logits: torch.Tensor, teacher: torch.Tensor, ctx: PassContext,
                 options) -> torch.Tensor:
    return generalised_jsd(logits, teacher, ctx.head(options.opsd_teacher), ctx.temperature,
                           options.opsd_beta, options.replay_chunk).cpu()


TERM = LossTerm("opsd", "generalised JSD to the policy given the privileged reference",
                "teacher", teacher_states, distillation, coef=lambda o: o.opsd_coef,
                models=lambda o: frozenset({o.opsd_teacher}))
add("opsd", "on-policy self-distillation: the policy, given the privileged reference, teaches "
    "itself on its own samples (generalised JSD per token); no reward term",
    "Zhao et al. 2026, arXiv 2601.18734; siyan-zhao/OPSD", options=(OpsdOptions,),
    loss_terms=(TERM,), pg_term=False)
