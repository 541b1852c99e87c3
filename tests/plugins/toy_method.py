"""A test plugin: a token-level method in one file, with its own extra pass, token allocation,
loss term and option, registered without any edit of the harness."""
from dataclasses import dataclass

import torch

from methods import Pass, add
from methods.base import LossTerm, option
from methods.compose import ALLOCATIONS
from methods.tokens import token_logprobs_from_hidden


@dataclass(frozen=True)
class ToyOptions:
    toy_anchor: float = option(0.5, "toy: weight of the anchor loss term")

    def problems(self):
        return [] if self.toy_anchor >= 0 else ["toy_anchor must be >= 0"]


def surprise(ctx, options):
    """[n, 1, T] -log p(y_t) under the plain prompt, by the policy that sampled."""
    rows = list(range(len(ctx.examples)))
    hidden = ctx.hidden([list(e.messages) for e in ctx.examples], rows)
    logp = token_logprobs_from_hidden(hidden, ctx.response_ids, ctx.head(), ctx.temperature)
    return (-logp * ctx.response_mask)[:, None, :]


def allocate(batch, norm, options):
    """The response's advantage spread over its tokens in proportion to their surprise."""
    s = batch.pass_output("surprise", "toy-credit")[:, 0] * batch.response_mask
    w = s / s.sum(dim=1, keepdim=True).clamp(min=1e-8) * batch.response_mask.sum(dim=1,
                                                                                keepdim=True)
    return norm.per_response[:, None] * w, {"toy/max_weight": float(w.max())}


def prepare(ctx, options):
    """[n, T, 2]: each token's log-prob when it was sampled, and its id."""
    logp = -surprise(ctx, options)[:, 0]
    return torch.stack([logp, ctx.response_ids.to(logp.dtype)], dim=-1)


def anchor(logits, prepared, ctx, options):
    """(log p_now(y_t) - log p_then(y_t))^2 per token."""
    now = torch.log_softmax(logits.float() / ctx.temperature, dim=-1)
    now = now.gather(-1, prepared[..., 1].long()[..., None].to(now.device))[..., 0]
    return (now.cpu() - prepared[..., 0]) ** 2


ALLOCATIONS.add("toy-surprise", allocate)
add("toy-credit", "GRPO spread over tokens by surprise, with an anchor loss", "a test plugin",
    options=(ToyOptions,), passes=(Pass("surprise", "-log p of each sampled token", surprise),),
    loss_terms=(LossTerm("toy_anchor_loss", "anchor to the sampling log-probs", "anchor",
                         prepare, anchor, coef=lambda o: o.toy_anchor),),
    normaliser="grpo", allocation="toy-surprise", reference="grpo")
