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
from typing import Callable, Sequence

from common.lazy import lazy

from methods.base import Pass, PassContext, chunk_option, no_grad, option
from methods.batch import RolloutBatch
from methods.compose import ALLOCATIONS, Normalised
from methods.contexts import known_rewards, replay_messages
from methods.mrtpo.diagnostics import batch_records, summarise
from methods.registry import add
from methods.tokens import js_distances

torch = lazy("torch", globals())  # imported on first use: common/lazy.py

MODES = ("loo", "single", "joint")
PASS = "replay"  # [N, K, T] raw replay distances d_k


@dataclass(frozen=True)
class MrtpoOptions:
    mrtpo_beta: float = option(0.5, "MRTPO: allocation strength beta in w = (1-beta) + "
                                    "beta*rho; 0 is GDPO")
    mrtpo_replay: str = option("loo", "MRTPO replay contexts: loo (with all vs without reward "
                                      "k's text) | single | joint (one profile)",
                               aliases=("replay",))
    mrtpo_shuffle_relevance: bool = option(False, "MRTPO ablation: permute each response's "
                                                  "relevance over its tokens",
                                           aliases=("shuffle_relevance",))
    replay_chunk: int = chunk_option()
    mrtpo_replay_all: bool = option(False, "MRTPO: also replay (response, reward) pairs "
                                           "without within-group signal (their advantage is 0, "
                                           "so only the diagnostics read them)",
                                    aliases=("replay_all",))

    def problems(self) -> list[str]:
        out = []
        if not 0.0 <= self.mrtpo_beta <= 1.0:
            out.append(f"mrtpo_beta is {self.mrtpo_beta}, outside [0, 1]; use --mrtpo-beta "
                       "within it")
        if self.mrtpo_replay not in MODES:
            out.append(f"unknown replay mode {self.mrtpo_replay!r}; use one of "
                       f"{', '.join(MODES)}")
        if self.replay_chunk < 1:
            out.append(f"replay_chunk is {self.replay_chunk}; use 1 or more (128 is the "
                       "default)")
        return out


def mrtpo_token_weights(relevance: torch.Tensor, mask: torch.Tensor, beta: float,
                        shuffle: bool = False, seed: int = 0) -> torch.Tensor:
    """MRTPO's token weights ``w_k[n,t] = (1 - beta) + beta * rho_k[n,t]``.

    Args:
        relevance: [N, K, T] raw replay distances d_k (>= 0; NaN rows: not replayed).
        mask: [N, T] valid response tokens.
        beta: allocation strength; 0 gives every token weight 1 (GDPO).
        shuffle: the ablation of Table 5: rho permuted over each response's valid tokens
            (independently per reward), with a generator seeded by ``seed``.
    Returns: [N, K, T] weights with mean 1 over each response's valid tokens, 0 elsewhere.
        ``rho = d / (mean_t d + 1e-8)``; a response whose distances are all 0 (the replay
        changed nothing) or NaN (not replayed: no within-group signal for that reward) gets
        rho = 1, i.e. the uniform allocation.
    """
    m = mask.to(relevance.dtype)[:, None, :]
    d = torch.nan_to_num(relevance, nan=0.0) * m
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


def kept_share(w: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The share of a reward's advantage that stays where GDPO puts it.

    Args:
        w: [N, K, T] token weights (mean 1 over each response's valid tokens).
        mask: [N, T] valid response tokens.
    Returns: [N, K] ``sum_t min(p_t, 1/T)`` with ``p = w / sum_t w``: 1 - the total variation
        distance between MRTPO's allocation and GDPO's uniform one (1 = GDPO, i.e. beta = 0;
        ``1 - beta * TV(rho)`` in general).
    """
    m = mask.to(w.dtype)[:, None, :]
    count = m.sum(dim=-1).clamp(min=1)  # [N, 1]
    p = w * m / (w * m).sum(dim=-1, keepdim=True).clamp(min=1e-12)
    return (torch.minimum(p, m / count[..., None]) * m).sum(dim=-1)


def kept_metrics(w: torch.Tensor, mask: torch.Tensor, counted: torch.Tensor,
                 names: Sequence[str]) -> dict:
    """``alloc/<reward>/kept``: the mean :func:`kept_share` of each reward over the pairs
    ``counted`` ([N, K] bool) marks, and ``alloc/kept`` over all of them (a reward or the whole
    batch with no counted pair is left out)."""
    kept = kept_share(w, mask)
    out = {f"alloc/{name}/kept": float(kept[:, k][counted[:, k]].mean())
           for k, name in enumerate(names) if bool(counted[:, k].any())}
    if bool(counted.any()):  # over every counted pair (rewards named per prompt, too)
        out["alloc/kept"] = float(kept[counted].mean())
    return out


def allocate(batch: RolloutBatch, norm: Normalised, options) -> tuple[torch.Tensor, dict]:
    """``S[n,t] = sum_k w_k[n,t] * contrib[n,k]`` (before whitening); metrics: per reward,
    the mean share of its advantage kept where GDPO puts it, over the replayed pairs
    (``alloc/<reward>/kept``, and ``alloc/kept`` over all of them: beta's role, paper Tables
    6-7)."""
    if norm.contrib is None:
        raise ValueError("mrtpo allocates each reward's advantage separately; compose it with "
                         "gdpo")
    d = batch.pass_output(PASS, "mrtpo")
    w = mrtpo_token_weights(d, batch.response_mask, options.mrtpo_beta,
                            options.mrtpo_shuffle_relevance, seed=batch.step)
    replayed = ~torch.isnan(d).any(dim=-1) & (batch.response_mask.sum(dim=-1) > 0)[:, None]
    metrics = kept_metrics(w, batch.response_mask, replayed, batch.reward_names)
    return torch.einsum("nkt,nk->nt", w, norm.contrib), metrics


@no_grad
def relevance(ctx: PassContext, options) -> torch.Tensor:
    """Raw per-token replay distances ``d [n, K, T]`` (zero on masked tokens): K + 1 context
    passes per slice of responses (2 for ``joint``). A (response, reward) pair without
    within-group signal (``ctx.signal``: the reward is absent, or constant over the
    response's group, so its advantage is 0 and its weights change nothing) is not replayed:
    its row is NaN, which the allocation reads as the uniform weights (``replay_all``
    replays every pair)."""
    mode, rewards = options.mrtpo_replay, ctx.reward_names
    if mode not in MODES:
        raise ValueError(f"unknown replay mode {mode!r}; known: {', '.join(MODES)}")
    head = ctx.head()
    n, t = ctx.response_ids.shape
    signal = torch.ones(n, len(rewards), dtype=torch.bool) if options.mrtpo_replay_all else \
        ctx.signal.to(torch.bool).cpu()
    out = torch.zeros(n, len(rewards), t)
    for s in range(0, n, ctx.batch_size):
        rows = list(range(s, min(n, s + ctx.batch_size)))
        ex = [ctx.examples[i] for i in rows]
        sig = signal[rows]  # [m, K]
        any_sig = sig.any(dim=1)
        if not bool(any_sig.any()):
            continue

        def contexts(include_for: Callable[[frozenset], frozenset], wanted: torch.Tensor
                     ) -> list:
            # each example includes only the rewards it has verifier information for; None:
            # a pair not replayed
            return [replay_messages(e, include_for(known_rewards(e))) if bool(w) else None
                    for e, w in zip(ex, wanted)]

        if mode == "joint":
            with_all, without = ctx.hidden_variants(
                [contexts(lambda known: known, any_sig),
                 contexts(lambda known: frozenset(), any_sig)], rows)
            d = js_distances(with_all, [without], head, ctx.temperature, options.replay_chunk,
                             rows=[any_sig])[0]
            out[rows] = d[:, None, :].expand(-1, len(rewards), -1).cpu()
            continue
        # a reward none of these prompts has (ragged K) has no replay
        present = [k for k, name in enumerate(rewards)
                   if bool(sig[:, k].any()) and any(name in known_rewards(e) for e in ex)]
        if not present:
            continue
        variants = [contexts(lambda known: known if mode == "loo" else frozenset(), any_sig)]
        for k in present:
            name = rewards[k]
            variants.append(contexts(lambda known: known - {name} if mode == "loo"
                                     else known & {name}, sig[:, k]))
        # the K + 1 contexts share the prompt: one forward of it, then each context's rest
        states = ctx.hidden_variants(variants, rows)
        d = js_distances(states[0], states[1:], head, ctx.temperature, options.replay_chunk,
                         rows=[sig[:, k] for k in present])
        for j, k in enumerate(present):
            out[rows, k] = d[j].cpu()
    out = torch.nan_to_num(out, nan=0.0) * ctx.response_mask[:, None, :].to(out.dtype)
    out[~signal] = float("nan")
    return out


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
