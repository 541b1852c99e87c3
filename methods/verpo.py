"""VERPO (advantage modulation): GRPO's advantage amplified on the tokens where evidence from
the response's own group says the update points the right way.

Li et al. 2026, "Verified Evidence Regularized Policy Optimization" (arXiv abstract in the
paper extract); the authors' code (hamsterjiang23/VERPO, native veRL path, arm
``fec_advmod_fkl``) was read to fix the details; this is a re-implementation.

Evidence pass, per response y of a group with another correct and an incorrect response: the
teacher re-reads y with no evidence (q0: the plain prompt), with positive evidence (q+: another
correct response of the group in the prompt) and with negative evidence (q-: the mean of the
next-token *probabilities* under ``verpo_negatives`` contexts, each holding one incorrect
response). Per token, over the full vocabulary, with the student's distribution p (the policy
that sampled y) and the Fisher inner product ``<a, b>_p = sum_v p a b - (sum_v p a)(sum_v p b)``:

    task d = q+ - q-          nuisance n = (q+ + q-)/2 - q0
    FEC    d_fec = d - alpha n,   alpha = <d, n>_p / (<n, n>_p + eps)
    alignment  g_t = d_fec(y_t) - sum_v p(v) d_fec(v)     (the GRPO logit direction . d_fec)
    cost       C_t = <d_fec, d_fec>_p

Evidence comes only from siblings that are non-empty and format-valid (the task's ``format``
reward at its maximum, where it has one), as the authors take it.

Controller (in the allocation, where the advantage A_i is known: GRPO's group-normalised one,
the same value the update scales): ``h = max(0, A_i g_t)``,
``w_t = h / (h + cost_alpha C_t + cost_eps)`` in [0, 1) (0 without evidence); the token's
advantage is ``A_i (1 + lambda w_t)``, computed without gradient: a pure amplifier of |A_i|
that never flips its sign. lambda = 0 is GRPO.

"Correct" with several rewards: ``verpo_correct all`` (default) counts a response correct when
every reward it has is at its declared maximum; ``verpo_correct NAME`` uses that reward alone
(docs/methods.md says why).
"""
from __future__ import annotations

from dataclasses import dataclass

from common.lazy import lazy

from methods.base import Pass, PassContext, chunk_option, no_grad, option
from methods.batch import RolloutBatch
from methods.compose import ALLOCATIONS, Normalised
from methods.registry import add

torch = lazy("torch", globals())  # imported on first use: common/lazy.py

PASS = "evidence"  # [N, 3, T]: alignment g_t, Fisher cost C_t, evidence available (0/1)
TEACHERS = ("policy", "initial")
# the evidence as the teacher reads it, after the original request (the authors' wording
# differs; what matters is that the response follows the request and one sibling answer)
POSITIVE = "{request}\n\nA correct solution:\n\n{evidence}\n\nSolve the original request correctly."
NEGATIVE = "{request}\n\nAn incorrect candidate solution:\n\n{evidence}"


@dataclass(frozen=True)
class VerpoOptions:
    verpo_lambda: float = option(1.0, "VERPO: advantage modulation strength lambda in "
                                      "A (1 + lambda w_t); 0 is GRPO (authors: 1.0)")
    verpo_correct: str = option("all", "VERPO: which responses are correct evidence: all "
                                       "(every reward at its maximum) | a reward's name (that "
                                       "reward at its maximum)")
    verpo_negatives: int = option(1, "VERPO: incorrect responses whose teacher distributions "
                                     "are averaged into q- (authors: 1)")
    verpo_teacher: str = option("policy", "VERPO: the model that reads the evidence: policy "
                                          "(the one that sampled) | initial (the authors use an "
                                          "EMA of the policy, which is not kept here)")
    verpo_cost_alpha: float = option(0.0025, "VERPO: weight of the Fisher movement cost "
                                             "(authors: 0.0025)")
    verpo_cost_eps: float = option(2.5e-5, "VERPO: cost floor (authors: 2.5e-5)")
    verpo_proj_eps: float = option(1e-8, "VERPO: ridge of the FEC projection (authors: 1e-8)")
    replay_chunk: int = chunk_option()

    def problems(self) -> list[str]:
        out = []
        if self.verpo_lambda < 0:
            out.append(f"verpo_lambda is {self.verpo_lambda}; it must be >= 0")
        if self.verpo_negatives < 1:
            out.append(f"verpo_negatives is {self.verpo_negatives}; use 1 or more")
        if self.verpo_teacher not in TEACHERS:
            out.append(f"unknown verpo_teacher {self.verpo_teacher!r}; use policy or initial")
        if self.verpo_cost_alpha < 0 or not self.verpo_cost_eps > 0 or \
                not self.verpo_proj_eps > 0:
            out.append("verpo_cost_alpha must be >= 0, verpo_cost_eps > 0 (it keeps w below "
                       "1) and verpo_proj_eps > 0 (without it the FEC projection divides 0 by "
                       "0 where the nuisance vanishes, e.g. a one-hot distribution; the authors "
                       "refuse it too)")
        if not self.verpo_correct:
            out.append("verpo_correct is empty; use all or a reward's name")
        return out


def correct(rewards: torch.Tensor, names: tuple[str, ...],
            bounds: tuple[tuple[float, float], ...], rule: str) -> torch.Tensor:
    """[n] bool: responses whose rewards ([n, K], NaN = absent) meet ``rule``: ``all`` (every
    present reward at its declared maximum, and at least one present) or a reward's name (that
    reward at its maximum)."""
    hi = torch.tensor([b[1] for b in bounds], dtype=rewards.dtype)
    at_max = rewards >= hi - 1e-6
    present = ~torch.isnan(rewards)
    if rule == "all":
        return (at_max | ~present).all(dim=1) & present.any(dim=1)
    if rule not in names:
        raise ValueError(f"verpo_correct {rule!r} is neither 'all' nor a reward of this task "
                         f"({', '.join(names)})")
    return at_max[:, names.index(rule)]


def usable_evidence(texts, rewards: torch.Tensor, names: tuple[str, ...],
                    bounds: tuple[tuple[float, float], ...]) -> torch.Tensor:
    """[n] bool: responses that may serve as a sibling's evidence, as the authors take it:
    non-empty, and format-valid (the task's ``format`` reward at its maximum, where the task
    has one; a task without it has no format to fail)."""
    nonempty = torch.tensor([bool(t.strip()) for t in texts])
    if "format" not in names:
        return nonempty
    k = names.index("format")
    return nonempty & (rewards[:, k] >= bounds[k][1] - 1e-6)


def evidence_plan(group: torch.Tensor, is_correct: torch.Tensor, negatives: int,
                  usable: torch.Tensor | None = None) -> list[tuple[int, int, list[int]]]:
    """(row, positive sibling, negative siblings) for each response with evidence: the first
    correct and the first ``negatives`` incorrect other responses of its group, in sampling
    order (cycled when there are fewer), among the ``usable`` ones (default: all). Rows
    without both get none."""
    plan = []
    for i in range(len(group)):
        siblings = [j for j in range(len(group)) if j != i and group[j] == group[i]
                    and (usable is None or bool(usable[j]))]
        pos = [j for j in siblings if is_correct[j]]
        neg = [j for j in siblings if not is_correct[j]]
        if pos and neg:
            plan.append((i, pos[0], [neg[k % len(neg)] for k in range(negatives)]))
    return plan


def with_evidence(messages, template: str, evidence: str) -> list[dict]:
    """The messages with the evidence written after the last user request."""
    out = [dict(m) for m in messages]
    last = max(i for i, m in enumerate(out) if m["role"] == "user")
    out[last]["content"] = template.format(request=out[last]["content"], evidence=evidence)
    return out


def geometry(p: torch.Tensor, q0: torch.Tensor, q_pos: torch.Tensor, q_neg: torch.Tensor,
             tokens: torch.Tensor, proj_eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Per token: the alignment of the FEC-projected task direction with the GRPO update of
    the sampled token, and its Fisher cost.

    Args:
        p, q0, q_pos, q_neg: [..., V] probabilities (student; teacher without, with positive,
            with negative evidence). tokens: [...] the sampled token ids.
    Returns: (g [...], C [...]) as in the module doc.
    """
    def inner(a, b):
        return (p * a * b).sum(-1) - (p * a).sum(-1) * (p * b).sum(-1)

    d = q_pos - q_neg
    nuisance = (q_pos + q_neg) / 2 - q0
    alpha = inner(d, nuisance) / (inner(nuisance, nuisance).clamp(min=0.0) + proj_eps)
    d_fec = d - alpha[..., None] * nuisance
    g = d_fec.gather(-1, tokens[..., None]).squeeze(-1) - (p * d_fec).sum(-1)
    return g, inner(d_fec, d_fec).clamp(min=0.0)


@no_grad
def evidence(ctx: PassContext, options) -> torch.Tensor:
    """[n, 3, T]: alignment, cost and availability per response token (zeros for responses
    without evidence)."""
    n, t = ctx.response_ids.shape
    out = torch.zeros(n, 3, t)
    ok = correct(ctx.rewards, ctx.reward_names, ctx.reward_bounds, options.verpo_correct)
    usable = usable_evidence(ctx.texts, ctx.rewards, ctx.reward_names, ctx.reward_bounds)
    plan = evidence_plan(ctx.group, ok, options.verpo_negatives, usable)
    teacher = options.verpo_teacher
    head_t, head_s = ctx.head(teacher), ctx.head("policy")
    temp, chunk = ctx.temperature, options.replay_chunk
    for s in range(0, len(plan), ctx.batch_size):
        part = plan[s:s + ctx.batch_size]
        rows = [i for i, _, _ in part]
        plain = [list(ctx.examples[i].messages) for i in rows]
        h0 = ctx.hidden(plain, rows, teacher)
        hs = h0 if teacher == "policy" else ctx.hidden(plain, rows, "policy")
        hp = ctx.hidden([with_evidence(ctx.examples[i].messages, POSITIVE, ctx.texts[pos])
                         for i, pos, _ in part], rows, teacher)
        hn = [ctx.hidden([with_evidence(ctx.examples[i].messages, NEGATIVE, ctx.texts[neg[k]])
                          for i, _, neg in part], rows, teacher)
              for k in range(options.verpo_negatives)]
        tokens = ctx.response_ids[rows]
        for c in range(0, t, chunk):
            def probs(head, h):
                return torch.softmax(head(h[:, c:c + chunk]).float() / temp, dim=-1)

            q_neg = sum(probs(head_t, h) for h in hn) / len(hn)  # mixed as probabilities
            g, cost = geometry(probs(head_s, hs), probs(head_t, h0), probs(head_t, hp), q_neg,
                               tokens[:, c:c + chunk].to(q_neg.device), options.verpo_proj_eps)
            out[rows, 0, c:c + chunk] = g.cpu()
            out[rows, 1, c:c + chunk] = cost.cpu()
        out[rows, 2] = 1.0
    return out * ctx.response_mask[:, None, :].to(out.dtype)


def token_weights(advantage: torch.Tensor, evidence_out: torch.Tensor, mask: torch.Tensor,
                  cost_alpha: float, cost_eps: float) -> torch.Tensor:
    """The acceptance controller. Args: advantage [N] (the response's, unmodulated),
    evidence_out [N, 3, T] (the evidence pass), mask [N, T]. Returns w [N, T] in [0, 1):
    ``h / (h + cost_alpha C + cost_eps)`` with ``h = max(0, A g)``, 0 without evidence."""
    g, cost, available = evidence_out[:, 0], evidence_out[:, 1], evidence_out[:, 2]
    h = (advantage[:, None] * g).clamp(min=0.0)
    w = h / (h + cost_alpha * cost + cost_eps)
    return w * available * mask.to(w.dtype)


def allocate(batch: RolloutBatch, norm: Normalised, options) -> tuple[torch.Tensor, dict]:
    """``S[n,t] = A_n (1 + lambda w[n,t])`` on valid tokens (w detached: no gradient)."""
    ev = batch.pass_output(PASS, "verpo")
    mask = batch.response_mask
    w = token_weights(norm.per_response, ev, mask, options.verpo_cost_alpha,
                      options.verpo_cost_eps).detach()
    scores = norm.per_response[:, None] * (1.0 + options.verpo_lambda * w) * mask.to(w.dtype)
    covered = ev[:, 2] * mask.to(w.dtype)
    tokens = float(covered.sum())
    metrics = {"verpo/evidence_rows": float((ev[:, 2].amax(dim=1) > 0).float().mean()),
               "verpo/w_mean": float((w * covered).sum()) / tokens if tokens else 0.0,
               "verpo/accepted": float(((w > 0.5).to(w.dtype) * covered).sum()) / tokens
               if tokens else 0.0}
    return scores, metrics


ALLOCATIONS.add("verpo", allocate)
add("verpo", "GRPO whose advantage is amplified, A(1 + lambda w_t), on tokens where teacher "
    "replays with a correct vs an incorrect sibling (FEC-projected) align with the update at "
    "low Fisher cost", "Li et al. 2026 (VERPO, advantage modulation); hamsterjiang23/VERPO; "
    "re-implemented", options=(VerpoOptions,),
    passes=(Pass(PASS, "teacher replays of each response with positive, negative and no "
                       "evidence from its group [N, 3, T]", evidence,
                 models=lambda o: frozenset({"policy", o.verpo_teacher}),
                 reads_verifier_info=False),),  # its evidence is the group's own responses
    normaliser="grpo", allocation="verpo", reference="grpo")
