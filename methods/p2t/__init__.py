"""P2T (Wu, Tan, Xia et al.; code: stonewst/P2T): token credit from one backward pass.

A token's influence on a differentiable reward R is estimated to first order as the change of
R when the token is replaced by a null token: ``I_t = (e_t - e_null) . dR/de_t`` (one forward,
one backward, instead of N forwards). Within a step the weights are ``softmax(I / tau)`` over
its response tokens, scaled to mean 1. Two variants (docs/methods.md):

* **verifier information** (default; no reward model): for each reward k,
  ``R_k = log p(response | context with k's verifier text) - log p(response | without it)``
  (MRTPO's replay contexts), so ``I_k`` says how much k's information explains each token.
  The response is one step; ``w_k = (alpha + omega * N * softmax(I_k / tau)) / (alpha +
  omega)`` (mean 1) carries GDPO's per-reward contribution, ``S = whiten(sum_k w_k *
  contrib_k)``. omega = 0 is GDPO. The K + 1 contexts go through the policy once with
  gradient and one backward gives every reward's gradient
  (``PassContext.input_gradients``).
* **reward model** (``--p2t-reward-model``, the paper's setting): a process reward model's
  step scores ``R_s`` and influences; ``S = whiten(GDPO + alpha * R_s + omega * N_s * R_s *
  softmax_s(I / tau))`` as the authors' advantage (:mod:`methods.p2t.reward_model`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from common.lazy import lazy

from methods.base import Pass, PassContext, chunk_option, no_grad, option
from methods.batch import RolloutBatch
from methods.compose import ALLOCATIONS, Normalised
from methods.contexts import known_rewards, replay_messages
from methods.mrtpo import kept_metrics
from methods.mrtpo.diagnostics import batch_records, summarise
from methods.p2t.null import null_distribution, null_embedding
from methods.registry import add
from methods.stats import broadcast
from methods.tokens import logprob_gradients

torch = lazy("torch", globals())  # imported on first use: common/lazy.py

PASS = "attribution"  # [N, K, T] influences (verifier information) | [N, 2, T] token rewards
CONTEXTS = ("loo", "single", "joint")
TARGETS = ("logit_diff", "prob", "logprob")
BACKWARDS = ("single", "per_step")
NULLS = ("pad", "unk", "mean")
SCALES = ("null", "signed")
SIGNS = ("influence", "advantage")


def _choice(out: list, name: str, value, allowed) -> None:
    if value not in allowed:
        out.append(f"unknown {name} {value!r}; use one of {', '.join(allowed)} "
                   f"(--{name.replace('_', '-')})")


@dataclass(frozen=True)
class P2tOptions:
    p2t_reward_model: Optional[str] = option(
        None, "P2T: folder of an HF reward model (token classification: a process reward model "
              "scored at --p2t-step-token after each step; sequence classification: the whole "
              "response as one step); unset: the verifier-information variant")
    p2t_reward_label: Optional[str] = option(
        None, "P2T reward model: the label read as a one-logit score (a TCRM value model's "
              "heads are its rewards: --tcrm-save); unset: the model's one or two labels")
    p2t_contexts: str = option("loo", "P2T without a reward model: R_k's two contexts, loo "
                                      "(all texts vs all but k's) | single (k's vs none) | "
                                      "joint (all vs none)")
    p2t_target: str = option("logit_diff", "P2T reward model: the scalar differentiated, "
                                           "logit_diff (z_pos - z_neg) | prob | logprob")
    p2t_backward: str = option("single", "P2T reward model: single (one backward of the sum "
                                         "of the steps' scalars) | per_step (one per step)")
    p2t_temperature: float = option(1.0, "P2T: softmax temperature over a step's influences")
    p2t_null: str = option("pad", "P2T: the null token of the replacement, pad | unk | mean "
                                  "(the mean embedding)")
    p2t_coef: float = option(0.6, "P2T: omega, the coefficient of the redistributed term")
    p2t_flat_coef: float = option(1.0, "P2T: alpha, the coefficient of the flat term")
    p2t_separator: str = option("\n\n", "P2T reward model: the text between a response's "
                                        "steps (a blank line; in a shell: $'\\n\\n')")
    p2t_step_token: str = option("<extra_0>", "P2T token-classification reward model: the "
                                              "token scored after each step")
    p2t_reward_scale: str = option("null", "P2T reward model: a step's reward p as is (null) "
                                           "or 2p - 1 (signed)")
    p2t_sign: str = option("influence", "P2T: influence (P2T's) | advantage (by sign(A) I)")
    replay_chunk: int = chunk_option()

    def problems(self) -> list[str]:
        out: list[str] = []
        _choice(out, "p2t_contexts", self.p2t_contexts, CONTEXTS)
        _choice(out, "p2t_target", self.p2t_target, TARGETS)
        _choice(out, "p2t_backward", self.p2t_backward, BACKWARDS)
        _choice(out, "p2t_null", self.p2t_null, NULLS)
        _choice(out, "p2t_reward_scale", self.p2t_reward_scale, SCALES)
        _choice(out, "p2t_sign", self.p2t_sign, SIGNS)
        if self.p2t_sign != "influence" and self.p2t_reward_model is not None:
            out.append("--p2t-sign advantage is for the verifier-information variant; with "
                       "--p2t-reward-model the step reward carries its own sign "
                       "(--p2t-reward-scale signed)")
        if not self.p2t_temperature > 0:
            out.append(f"p2t_temperature is {self.p2t_temperature}; use a value > 0 "
                       "(--p2t-temperature, 1.0 is the authors')")
        if self.p2t_coef < 0 or self.p2t_flat_coef < 0 or \
                self.p2t_coef + self.p2t_flat_coef <= 0:
            out.append(f"p2t_coef {self.p2t_coef} and p2t_flat_coef {self.p2t_flat_coef} must "
                       "be >= 0 with a positive sum (--p2t-coef, --p2t-flat-coef)")
        if not self.p2t_separator:
            out.append("p2t_separator is empty; give the text between steps (--p2t-separator)")
        path = self.p2t_reward_model
        if path is not None and not os.path.isfile(os.path.join(path, "config.json")):
            out.append(f"--p2t-reward-model {path}: no config.json there; give the folder of "
                       "an HF token- or sequence-classification model (save_pretrained)")
        elif path is not None:
            out += _label_problems(path, self.p2t_reward_label)
        return out


def _label_problems(path: str, label: Optional[str]) -> list[str]:
    """The label check of :func:`methods.p2t.reward_model.label_column`, read from the folder's
    config.json before any model loads."""
    import json
    from types import SimpleNamespace

    from methods.p2t.reward_model import label_column

    raw = json.loads(open(os.path.join(path, "config.json")).read())
    id2label = {int(k): v for k, v in (raw.get("id2label") or {}).items()}
    config = SimpleNamespace(tcrm_rewards=raw.get("tcrm_rewards"), id2label=id2label,
                             num_labels=raw.get("num_labels", len(id2label) or 2))
    try:
        label_column(config, label, path)
    except ValueError as e:
        return [str(e)]
    return []


def step_weights(influence: torch.Tensor, mask: torch.Tensor, temperature: float,
                 flat: float, coef: float) -> torch.Tensor:
    """The verifier-information variant's token weights (the response is one step).

    Args:
        influence: [N, K, T] token influences I_k (NaN rows: not computed).
        mask: [N, T] valid response tokens.
    Returns: [N, K, T] ``(flat + coef * N_n * softmax_t(I / temperature)) / (flat + coef)``
        over each response's N_n valid tokens (mean 1), 0 elsewhere; a NaN row gets 1 (the
        uniform allocation: GDPO's).
    """
    valid = mask.to(torch.bool)[:, None, :].expand_as(influence)
    missing = torch.isnan(influence).any(dim=-1, keepdim=True)
    z = torch.nan_to_num(influence, nan=0.0) / temperature
    z = z.masked_fill(~valid, float("-inf"))
    count = valid.sum(dim=-1, keepdim=True).clamp(min=1).to(influence.dtype)
    soft = torch.nan_to_num(torch.softmax(z, dim=-1), nan=0.0)  # all-masked rows: 0
    w = (flat + coef * count * soft) / (flat + coef)
    w = torch.where(missing, torch.ones_like(w), w)
    return w * valid.to(w.dtype)


def _pairs(mode: str, rewards, present, ex, any_sig, sig):
    """The contexts of one slice and, per reward index, its (with, without) variant."""
    def contexts(include_for, wanted):
        return [replay_messages(e, include_for(known_rewards(e))) if bool(w) else None
                for e, w in zip(ex, wanted)]

    if mode == "joint":
        return ([contexts(lambda known: known, any_sig),
                 contexts(lambda known: frozenset(), any_sig)],
                {k: (0, 1) for k in present})
    variants = [contexts(lambda known: known if mode == "loo" else frozenset(), any_sig)]
    which = {}
    for k in present:
        name = rewards[k]
        variants.append(contexts(lambda known: known - {name} if mode == "loo"
                                 else known & {name}, sig[:, k]))
        j = len(variants) - 1
        which[k] = (0, j) if mode == "loo" else (j, 0)
    return variants, which


def verifier_influence(ctx: PassContext, options) -> torch.Tensor:
    """``I [n, K, T]``: each token's first-order influence on ``R_k`` (log-likelihood with
    k's verifier information minus without), through its embedding as input and as the
    predicted token: ``(e_t - e_null) . (g_with - g_without) + (lp_with - lp_without)_t -
    (lq_with - lq_without)_t`` (``g``: the log-likelihood's gradient at the token's
    embedding; ``lq``: the null's log-probability at t). One backward per slice of responses.
    Pairs without within-group signal are not computed (NaN: uniform weights)."""
    mode, rewards = options.p2t_contexts, ctx.reward_names
    n, t = ctx.response_ids.shape
    out = torch.full((n, len(rewards), t), float("nan"))
    signal = ctx.signal.to(torch.bool).cpu()
    if not bool(signal.any()):
        return out
    head, embed = ctx.head(), ctx.embeddings()
    q = null_distribution(options.p2t_null, embed.num_embeddings, ctx.tokenizer)
    e_null = null_embedding(embed, q)
    for s in range(0, n, ctx.batch_size):
        rows = list(range(s, min(n, s + ctx.batch_size)))
        sig = signal[rows]
        any_sig = sig.any(dim=1)
        present = [k for k in range(len(rewards)) if bool(sig[:, k].any())]
        if not present:
            continue
        ex = [ctx.examples[i] for i in rows]
        ids, mask = ctx.response_ids[rows], ctx.response_mask[rows]
        variants, which = _pairs(mode, rewards, present, ex, any_sig, sig)

        def objective(states):
            # d LL_c / d states, from the head alone; <states, g> has LL_c's gradient below
            got = [logprob_gradients(h, ids, mask, head, q, ctx.temperature,
                                     options.replay_chunk) for h in states]
            value = sum((h * g.to(h.dtype)).sum() for h, (_, _, g) in zip(states, got))
            return value, [(lp, lq) for lp, lq, _ in got]

        grads, logps = ctx.input_gradients(variants, rows, objective)
        with torch.no_grad():
            device = next(embed.parameters()).device
            diff = embed(ids.to(device)).float().cpu() - e_null  # [m, T, H]
            for k, (a, b) in which.items():
                lp_a, lq_a = logps[a]
                lp_b, lq_b = logps[b]
                as_input = (diff * (grads[a] - grads[b])).sum(dim=-1)
                infl = (as_input + (lp_a - lp_b) - (lq_a - lq_b)) * mask.to(torch.float32)
                rows_k = torch.tensor(rows)[sig[:, k]]
                out[rows_k, k] = infl[sig[:, k]]
    return out


def attribution(ctx: PassContext, options) -> torch.Tensor:
    """The pass: influences [n, K, T] (verifier information) or token rewards [n, 2, T]
    (reward model: the flat ``R_s`` and the redistributed ``N_s R_s softmax(I / tau)``)."""
    if options.p2t_reward_model is None:
        return verifier_influence(ctx, options)
    from methods.p2t.reward_model import token_rewards

    return token_rewards(ctx, options)


def profile(out: torch.Tensor, mask: torch.Tensor, options) -> torch.Tensor:
    """[N, K, T] the verifier variant's redistributed profile ``N softmax(I / tau)`` (mean 1;
    what the localisation diagnostics read)."""
    w = step_weights(out, mask, options.p2t_temperature, 0.0, 1.0)
    w[torch.isnan(out).any(dim=-1)] = float("nan")  # not computed: no profile
    return w


def allocate(batch: RolloutBatch, norm: Normalised, options) -> tuple[torch.Tensor, dict]:
    """``S = sum_k w_k * contrib_k`` (verifier information) or ``GDPO + alpha R_s + omega
    R_p2t`` (reward model), before whitening."""
    out = batch.pass_output(PASS, "p2t")
    mask = batch.response_mask
    if options.p2t_reward_model is not None:
        flat, redistributed = out[:, 0], out[:, 1]
        scores = broadcast(norm.per_response, mask) + (
            options.p2t_flat_coef * flat + options.p2t_coef * redistributed) * mask
        return scores, {"p2t/step_reward": float(flat[mask.bool()].mean())
                        if bool(mask.any()) else 0.0}
    if norm.contrib is None:
        raise ValueError("p2t allocates each reward's advantage separately; compose it with "
                         "gdpo")
    if options.p2t_sign == "advantage":
        # a negative advantage goes to the tokens the verifier's text makes less likely: the
        # influences of that reward flipped (softmax(-I) favours them)
        flip = torch.where(norm.contrib < 0, -1.0, 1.0).to(out.dtype)
        out = out * flip[:, :, None]
    w = step_weights(out, mask, options.p2t_temperature, options.p2t_flat_coef,
                     options.p2t_coef)
    computed = ~torch.isnan(out).any(dim=-1) & (mask.sum(dim=-1) > 0)[:, None]
    return torch.einsum("nkt,nk->nt", w, norm.contrib), kept_metrics(w, mask, computed,
                                                                     batch.reward_names)


def diagnose(ctx: PassContext, options, out: torch.Tensor) -> list[dict]:
    """Where each reward's profile lies (verifier variant; needs the task's spans)."""
    if ctx.spans is None or options.p2t_reward_model is not None:
        return []
    return batch_records(ctx.tokenizer, ctx.examples, ctx.response_ids, ctx.response_mask,
                         profile(out, ctx.response_mask, options), ctx.reward_names,
                         ctx.spans, ctx.rewards.tolist())


ATTRIBUTION = Pass(PASS, "first-order token influence on each reward's verifier-information "
                         "log-likelihood ratio (or a reward model's step scores), one backward",
                   attribution, diagnose=diagnose, summarise=summarise,
                   # the reward-model variant reads the prompt and the response only
                   reads_verifier_info=lambda options: options.p2t_reward_model is None)
ALLOCATIONS.add("p2t", allocate)
add("p2t", "GDPO whose per-reward advantages go to the tokens with the largest first-order "
    "influence on the reward's verifier-information likelihood ratio (P2T's one-backward "
    "estimate); w = (alpha + omega N softmax(I/tau)) / (alpha + omega)",
    "P2T (Wu, Tan, Xia et al.; code stonewst/P2T); the verifier-information variant is this "
    "harness's (docs/methods.md)", options=(P2tOptions,), passes=(ATTRIBUTION,),
    allocation="p2t", reference="gdpo")
