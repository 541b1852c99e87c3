"""Per-token quantities from final hidden states and an LM head (pure tensor functions): the
Jensen-Shannon distance between two contexts' next-token distributions and the log-probability
of the sampled tokens, each a chunk of tokens at a time so that the [N, chunk, V] tensors are
the only large ones.
"""
from __future__ import annotations

import math
from typing import Callable, Optional, Sequence

from common.lazy import lazy

torch = lazy("torch", globals())  # imported on first use: common/lazy.py


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
                 chunk: int = 128, rows: Optional[Sequence[torch.Tensor]] = None
                 ) -> torch.Tensor:
    """:func:`js_distance` of one context against several: p's log-softmax is computed once
    per slice for all of them (MRTPO's K leave-one-out contexts against the full one).

    Args:
        h_p: [N, T, H]; h_qs: C tensors [N, T, H].
        rows: C bool masks [N]: the responses to compare for each q (default: all); p's
            log-softmax is computed for their union only.
    Returns: [C, N, T] distances, NaN for the responses a q's mask leaves out.
    """
    n = h_p.shape[0]
    wanted = [torch.ones(n, dtype=torch.bool) for _ in h_qs] if rows is None else \
        [r.to(torch.bool).cpu() for r in rows]
    if len(wanted) != len(h_qs):
        raise ValueError(f"{len(wanted)} row masks for {len(h_qs)} contexts")
    out = torch.full((len(h_qs), *h_p.shape[:2]), float("nan"), dtype=torch.float32,
                     device=h_p.device)
    if not h_qs:
        return out
    idx = torch.stack(wanted).any(dim=0).nonzero().squeeze(1)  # the union's rows
    own = [w[idx] for w in wanted]  # each q's rows among the union's
    for s in range(0, h_p.shape[1], chunk):
        lp = torch.log_softmax(head(h_p[idx.to(h_p.device), s:s + chunk]).float() / temperature,
                               dim=-1)
        for c, h_q in enumerate(h_qs):
            sel = idx[own[c]]
            if sel.numel():
                lq = torch.log_softmax(head(h_q[sel.to(h_q.device), s:s + chunk]).float()
                                       / temperature, dim=-1)
                # lp itself where q compares every row of the union: no copy of [m, chunk, V]
                part = lp if bool(own[c].all()) else lp[own[c].to(lp.device)]
                out[c, sel.to(out.device), s:s + chunk] = js_from_logprobs(part, lq)
    return out


def js_from_logprobs(lp: torch.Tensor, lq: torch.Tensor) -> torch.Tensor:
    """[..., V] log-distributions -> [...] Jensen-Shannon distance (natural log); exactly 0
    where the two distributions are equal."""
    # logaddexp(x, x) - log 2 is x only up to rounding, and the square root turns that rounding
    # into distances of about 1e-4 (float32) between equal distributions: where a token's two
    # distributions are equal its mixture is taken as it is, so its distance is exactly 0
    lm = torch.where(lp == lq, lp, torch.logaddexp(lp, lq) - math.log(2.0))
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


def logprob_gradients(hidden: torch.Tensor, tokens: torch.Tensor, mask: torch.Tensor, head,
                      null: torch.Tensor, temperature: float = 1.0, chunk: int = 128
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-token log-probabilities and their gradient with respect to the states, a chunk at a
    time (the head's own backward only: ``hidden`` is read detached).

    Args:
        hidden: [N, T, H] states; position t predicts ``tokens[:, t]``.
        tokens: [N, T] long; mask: [N, T] {0, 1}.
        null: [V] a distribution over the vocabulary (one-hot: a token; uniform: the mean).
    Returns: ``lp`` [N, T] ``log p(tokens_t)``, ``lq`` [N, T] ``sum_v null_v log p(v)`` and
        ``g`` [N, T, H] ``d lp_t / d hidden_t`` (with ``p = softmax(head(h) / temperature)``),
        all 0 where ``mask`` is 0.
    """
    n, t, h = hidden.shape
    lp = torch.zeros(n, t)
    lq = torch.zeros(n, t)
    g = torch.zeros(n, t, h, dtype=hidden.dtype, device=hidden.device)
    m = mask.to(torch.float32)
    for s in range(0, t, chunk):
        with torch.enable_grad():
            part = hidden[:, s:s + chunk].detach().requires_grad_(True)
            logs = torch.log_softmax(head(part).float() / temperature, dim=-1)
            picked = logs.gather(-1, tokens[:, s:s + chunk, None].to(logs.device)).squeeze(-1)
            picked = picked * m[:, s:s + chunk].to(picked.device)
            g[:, s:s + chunk] = torch.autograd.grad(picked.sum(), part)[0]
        with torch.no_grad():
            lp[:, s:s + chunk] = picked.detach().cpu()
            q = null.to(logs.device)
            if q.shape[0] < logs.shape[-1]:  # a head padded past the embedding's rows
                q = torch.nn.functional.pad(q, (0, logs.shape[-1] - q.shape[0]))
            expected = (logs.detach() * q).sum(dim=-1)
            lq[:, s:s + chunk] = (expected * m[:, s:s + chunk].to(expected.device)).cpu()
    return lp, lq, g
