"""CoRT: GRPO whose advantage is spread over a response's tokens by their log-likelihood gain
from the prompt's constraints.

Contrast pass: ``delta_t = log pi(y_t | x) - log pi(y_t | x_free)``, ``x`` the prompt as the
policy saw it, ``x_free`` the same prompt with every in-prompt verifier text removed.
Token weights: ``w~ = clip(delta, 0, c)`` (or ``c * sigmoid(delta)``), normalised to mean 1 per
response, ramped in with SmoothStep over the first ``cort_warmup`` of training:
``w = 1 + s(u) (w~ / mean_t w~ - 1)``; ``S[n,t] = w[n,t] * A(n)``.
Zhang et al. 2026, arXiv 2607.25659; reconstructed.
"""
from __future__ import annotations

from dataclasses import dataclass

from common.lazy import lazy

from methods.base import Pass, PassContext, chunk_option, no_grad, option
from methods.batch import RolloutBatch
from methods.compose import ALLOCATIONS, Normalised
from methods.contexts import replay_messages
from methods.registry import add
from methods.tokens import token_logprobs_from_hidden

torch = lazy("torch", globals())  # imported on first use: common/lazy.py

PASS = "counterfactual"  # [N, 1, T] the log-likelihood contrast
MAPS = ("clip", "sigmoid")


@dataclass(frozen=True)
class CortOptions:
    cort_clip: float = option(2.0, "CoRT: contrast mapped to [0, c] before the mean-1 "
                                   "normalisation")
    cort_map: str = option("clip", "CoRT: clip (clip(delta, 0, c)) | sigmoid (c * "
                                   "sigmoid(delta))")
    cort_warmup: float = option(0.2, "CoRT: SmoothStep ramp length as a fraction of the "
                                     "training steps")
    replay_chunk: int = chunk_option()

    def problems(self) -> list[str]:
        out = []
        if self.cort_clip < 0:
            out.append(f"cort_clip is {self.cort_clip}; it must be >= 0")
        if self.cort_map not in MAPS:
            out.append(f"unknown cort_map {self.cort_map!r}; use clip or sigmoid")
        if not 0.0 <= self.cort_warmup <= 1.0:
            out.append(f"cort_warmup is {self.cort_warmup}, outside [0, 1]; use --cort-warmup "
                       "within it")
        return out


def smoothstep(u: float) -> float:
    u = min(max(u, 0.0), 1.0)
    return 3 * u * u - 2 * u ** 3


def cort_token_weights(contrast: torch.Tensor, mask: torch.Tensor, clip: float, mapping: str,
                       ramp: float) -> torch.Tensor:
    """CoRT's token weights.

    Args:
        contrast: [N, T] ``delta_t = log pi(y_t|x) - log pi(y_t|x_free)``.
        mask: [N, T]. clip: c. mapping: "clip" (``clip(delta, 0, c)``) or "sigmoid"
            (``c * sigmoid(delta)``). ramp: SmoothStep value s(u) in [0, 1].
    Returns: [N, T] ``w = 1 + s(u) (w~ / mean_t w~ - 1)`` (w~ / mean is 1 where the mean is 0),
        0 on masked tokens; the mean over each response's tokens is 1.
    """
    m = mask.to(contrast.dtype)
    if mapping == "clip":
        raw = contrast.clamp(0.0, clip)
    elif mapping == "sigmoid":
        raw = clip * torch.sigmoid(contrast)
    else:
        raise ValueError(f"unknown CoRT mapping {mapping!r}; known: clip, sigmoid")
    raw = raw * m
    mean = raw.sum(dim=1) / m.sum(dim=1).clamp(min=1)
    w = torch.where((mean > 0)[:, None], raw / mean.clamp(min=1e-12)[:, None],
                    torch.ones_like(raw))
    return (1.0 + ramp * (w - 1.0)) * m


def allocate(batch: RolloutBatch, norm: Normalised, options) -> tuple[torch.Tensor, dict]:
    warm = max(1.0, options.cort_warmup * batch.total_steps)
    ramp = smoothstep(batch.step / warm)
    w = cort_token_weights(batch.pass_output(PASS, "cort")[:, 0], batch.response_mask,
                           options.cort_clip, options.cort_map, ramp)
    return w * norm.per_response[:, None], {"cort/ramp": ramp}


@no_grad
def contrast(ctx: PassContext, options) -> torch.Tensor:
    """[n, 1, T] per-token log-likelihood contrast, zero on masked tokens."""
    head = ctx.head()
    out = torch.zeros(ctx.response_ids.shape)
    n = len(ctx.examples)
    for s in range(0, n, ctx.batch_size):
        rows = list(range(s, min(n, s + ctx.batch_size)))
        ex, ids = [ctx.examples[i] for i in rows], ctx.response_ids[rows]
        # both contexts share the prompt's beginning: one forward of it
        with_c, free = ctx.hidden_variants([[list(e.messages) for e in ex],
                                            [replay_messages(e, frozenset()) for e in ex]], rows)
        out[rows] = (token_logprobs_from_hidden(with_c, ids, head, ctx.temperature,
                                                options.replay_chunk)
                     - token_logprobs_from_hidden(free, ids, head, ctx.temperature,
                                                  options.replay_chunk))
    return (out * ctx.response_mask.to(out.dtype))[:, None, :]


ALLOCATIONS.add("cort", allocate)
add("cort", "GRPO whose advantage is spread by the tokens' log-likelihood gain from the "
    "constraints (constraint-bearing vs criteria-free prompt), SmoothStep ramp",
    "Zhang et al. 2026, arXiv 2607.25659; reconstructed", options=(CortOptions,),
    passes=(Pass(PASS, "log pi(y_t|x) - log pi(y_t|x without its verifier texts) [N, 1, T]",
                 contrast),),
    normaliser="grpo", allocation="cort", reference="grpo")
