"""MRTPO: GDPO whose per-reward advantages go to the tokens that reward's verifier
information moves.

Replay (a no-gradient pass of the policy that sampled the responses): each response is re-read
with and without reward k's verifier text; the per-token Jensen-Shannon distance ``d_k[n,t]``
between the two next-token distributions says how much token t depends on that information.
``rho_k = d_k / mean_t d_k``; the token weights ``w_k = (1 - beta) + beta * rho_k`` (mean 1
over a response's tokens) carry GDPO's per-reward contribution:
``S[n,t] = whiten(sum_k w_k[n,t] * f(lambda_k, A_k(n)))``. beta = 0 is GDPO. Replay modes:
``loo`` (with every text vs without reward k's; default), ``single`` (only k's vs none),
``joint`` (all vs none: one profile for every reward). The paper's method, reconstructed
(docs/methods.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from methods.base import Pass, PassContext, chunk_option, option
from methods.batch import RolloutBatch
from methods.compose import ALLOCATIONS, Normalised
from methods.contexts import known_rewards, replay_messages
from methods.diagnostics import batch_records, summarise
from methods.registry import add
from methods.tokens import js_distance, js_distances

MODES = ("loo", "single", "joint")
PASS = "replay"  # [N, K, T] raw replay distances d_k


@dataclass(frozen=True)
class MrtpoOptions:
    mrtpo_beta: float = option(0.5, "MRTPO: allocation strength beta in w = (1-beta) + "
                                    "beta*rho; 0 is GDPO")
    replay: str = option("loo", "MRTPO replay contexts: loo (with all vs without reward k's "
                                "text) | single | joint (one profile)")
    shuffle_relevance: bool = option(False, "MRTPO ablation: permute each response's relevance "
                                            "over its tokens")
    replay_chunk: int = chunk_option()

    def problems(self) -> list[str]:
        out = []
        if not 0.0 <= self.mrtpo_beta <= 1.0:
            out.append(f"mrtpo_beta is {self.mrtpo_beta}, outside [0, 1]; use --mrtpo-beta "
                       "within it")
        if self.replay not in MODES:
            out.append(f"unknown replay mode {self.replay!r}; use one of {', '.join(MODES)}")
        if self.replay_chunk < 1:
            out.append(f"replay_chunk is {self.replay_chunk}; use 1 or more (128 is the "
                       "default)")
        return out


def mrtpo_token_weights(relevance: torch.Tensor, mask: torch.Tensor, beta: float,
                        shuffle: bool = False, seed: int = 0) -> torch.Tensor:
    """MRTPO's token weights ``w_k[n,t] = (1 - beta) + beta * rho_k[n,t]``.

    Args:
        relevance: [N, K, T] raw replay distances d_k (>= 0).
        mask: [N, T] valid response tokens.
        beta: allocation strength; 0 gives every token weight 1 (GDPO).
        shuffle: the ablation of Table 5: rho permuted over each response's valid tokens
            (independently per reward), with a generator seeded by ``seed``.
    Returns: [N, K, T] weights with mean 1 over each response's valid tokens, 0 elsewhere.
        ``rho = d / (mean_t d + 1e-8)``; a response whose distances are all 0 (the replay
        changed nothing) gets rho = 1, i.e. the uniform allocation.
    """
    m = mask.to(relevance.dtype)[:, None, :]
    d = relevance * m
    count = m.sum(dim=-1).clamp(min=1)
    mean = d.sum(dim=-1) / count
    rho = d / (mean[..., None] + 1e-8)
    rho = torch.where((mean > 0)[..., None], rho, torch.ones_like(rho))
    if shuffle:
        g = torch.Generator().manual_seed(seed)
        n, k, _ = rho.shape
        for i in range(n):
            valid = mask[i].nonzero().squeeze(1)
            for j in range(k):
                perm = valid[torch.randperm(len(valid), generator=g)]
                rho[i, j, valid] = rho[i, j, perm]
    return ((1.0 - beta) + beta * rho) * m


def allocate(batch: RolloutBatch, norm: Normalised, options) -> tuple[torch.Tensor, dict]:
    """``S[n,t] = sum_k w_k[n,t] * contrib[n,k]`` (before whitening)."""
    if norm.contrib is None:
        raise ValueError("mrtpo allocates each reward's advantage separately; compose it with "
                         "gdpo")
    w = mrtpo_token_weights(batch.pass_output(PASS, "mrtpo"), batch.response_mask,
                            options.mrtpo_beta, options.shuffle_relevance, seed=batch.step)
    return torch.einsum("nkt,nk->nt", w, norm.contrib), {}


@torch.no_grad()
def relevance(ctx: PassContext, options) -> torch.Tensor:
    """Raw per-token replay distances ``d [n, K, T]`` (zero on masked tokens): K + 1 context
    passes per slice of responses (2 for ``joint``)."""
    mode, rewards = options.replay, ctx.reward_names
    if mode not in MODES:
        raise ValueError(f"unknown replay mode {mode!r}; known: {', '.join(MODES)}")
    head = ctx.head()
    n, t = ctx.response_ids.shape
    out = torch.zeros(n, len(rewards), t)
    for s in range(0, n, ctx.batch_size):
        rows = list(range(s, min(n, s + ctx.batch_size)))
        ex = [ctx.examples[i] for i in rows]

        def contexts(include_for: Callable[[frozenset], frozenset]) -> list[list[dict]]:
            # each example includes only the rewards it has verifier information for
            return [replay_messages(e, include_for(known_rewards(e))) for e in ex]

        if mode == "joint":
            with_all, without = ctx.hidden_variants(
                [contexts(lambda known: known), contexts(lambda known: frozenset())], rows)
            d = js_distance(with_all, without, head, ctx.temperature, options.replay_chunk)
            out[rows] = d[:, None, :].expand(-1, len(rewards), -1).cpu()
            continue
        # a reward none of these prompts has (ragged K) has distance 0 and no replay
        present = [k for k, name in enumerate(rewards) if any(name in known_rewards(e) for e in ex)]
        variants = [contexts(lambda known: known if mode == "loo" else frozenset())]
        for k in present:
            name = rewards[k]
            variants.append(contexts(lambda known: known - {name} if mode == "loo"
                                     else known & {name}))
        # the K + 1 contexts share the prompt: one forward of it, then each context's rest
        states = ctx.hidden_variants(variants, rows)
        if present:
            d = js_distances(states[0], states[1:], head, ctx.temperature, options.replay_chunk)
            for j, k in enumerate(present):
                out[rows, k] = d[j].cpu()
    return out * ctx.response_mask[:, None, :].to(out.dtype)


def diagnose(ctx: PassContext, options, d: torch.Tensor) -> list[dict]:
    """Per response: where each reward's distance lies (needs the task's spans)."""
    if ctx.spans is None:
        return []
    return batch_records(ctx.tokenizer, ctx.examples, ctx.response_ids, ctx.response_mask, d,
                         ctx.reward_names, ctx.spans, ctx.rewards.tolist())


REPLAY = Pass(PASS, "the policy re-reads each response with and without each reward's "
                    "verifier text; per-token Jensen-Shannon distance [N, K, T]",
              relevance, diagnose=diagnose, summarise=summarise)
ALLOCATIONS.add("mrtpo", allocate)
add("mrtpo", "GDPO whose per-reward advantages go to the tokens the reward's verifier "
    "information moves (replay JS distance), w = (1-beta) + beta*rho", "the MRTPO paper; "
    "reconstructed (docs/methods.md)", options=(MrtpoOptions,), passes=(REPLAY,),
    allocation="mrtpo", reference="gdpo")
