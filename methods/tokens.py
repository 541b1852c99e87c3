"""Per-token quantities from final hidden states and an LM head (pure tensor functions): the
Jensen-Shannon distance between two contexts' next-token distributions and the log-probability
of the sampled tokens, each a chunk of tokens at a time so that the [N, chunk, V] tensors are
the only large ones.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import torch


def js_distance(h_p: torch.Tensor, h_q: torch.Tensor, head: Callable[[torch.Tensor], torch.Tensor],
                temperature: float = 1.0, chunk: int = 128) -> torch.Tensor:
    """Per-token Jensen-Shannon distance ``sqrt(JSD(p || q))`` (natural log, in [0, sqrt(ln 2)]).

    Args:
        h_p, h_q: [N, T, H] final hidden states of the two contexts at the response positions.
        head: the LM head, hidden -> logits [.., V].
        temperature: logits are divided by it (the rollout temperature).
        chunk: response tokens per slice; the [N, chunk, V] tensors are the only large ones.
    Returns: [N, T] distances.
    """
    return js_distances(h_p, [h_q], head, temperature, chunk)[0]


def js_distances(h_p: torch.Tensor, h_qs: Sequence[torch.Tensor],
                 head: Callable[[torch.Tensor], torch.Tensor], temperature: float = 1.0,
                 chunk: int = 128) -> torch.Tensor:
    """:func:`js_distance` of one context against several: p's log-softmax is computed once
    per slice for all of them (MRTPO's K leave-one-out contexts against the full one).

    Args:
        h_p: [N, T, H]; h_qs: C tensors [N, T, H].
    Returns: [C, N, T] distances.
    """
    out = torch.empty((len(h_qs), *h_p.shape[:2]), dtype=torch.float32, device=h_p.device)
    for s in range(0, h_p.shape[1], chunk):
        lp = torch.log_softmax(head(h_p[:, s:s + chunk]).float() / temperature, dim=-1)
        for c, h_q in enumerate(h_qs):
            lq = torch.log_softmax(head(h_q[:, s:s + chunk]).float() / temperature, dim=-1)
            out[c, :, s:s + chunk] = js_from_logprobs(lp, lq)
    return out


def js_from_logprobs(lp: torch.Tensor, lq: torch.Tensor) -> torch.Tensor:
    """[..., V] log-distributions -> [...] Jensen-Shannon distance (natural log)."""
    lm = torch.logaddexp(lp, lq) - math.log(2.0)
    kl_pm = (lp.exp() * (lp - lm)).sum(dim=-1)
    kl_qm = (lq.exp() * (lq - lm)).sum(dim=-1)
    return (0.5 * (kl_pm + kl_qm)).clamp(min=0.0).sqrt()


def token_logprobs_from_hidden(hidden: torch.Tensor, tokens: torch.Tensor, head,
                               temperature: float = 1.0, chunk: int = 128) -> torch.Tensor:
    """[N, T] log-probabilities of ``tokens`` from final hidden states, a chunk at a time."""
    out = torch.empty(tokens.shape, dtype=torch.float32)
    for s in range(0, tokens.shape[1], chunk):
        logits = head(hidden[:, s:s + chunk]).float() / temperature
        picked = logits.gather(-1, tokens[:, s:s + chunk, None].to(logits.device)).squeeze(-1)
        out[:, s:s + chunk] = (picked - torch.logsumexp(logits, dim=-1)).cpu()
    return out
