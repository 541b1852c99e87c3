"""Gradients of a scalar of the response states with respect to the response tokens' input
embeddings: what an attribution by one backward pass asks of the policy.

The policy re-reads its responses under variants of their contexts as the replay does
(:func:`harness.replay.variant_states`: each group's shared prompt and each context computed
once, without gradient), except that the response tokens enter as embeddings that require
gradient. The caller's ``objective`` turns the states into one scalar; one backward of it gives
every variant's gradient, because each variant's responses are their own leaves (a variant's
states depend on its own leaves only). The model's weights are frozen meanwhile: no weight
gradient is computed or kept, and the training step's gradients are untouched.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Optional, Sequence

import torch

from harness.replay import variant_states


@contextmanager
def frozen(model):
    """The model's weights stop requiring gradient for the duration (restored after)."""
    changed = [p for p in model.parameters() if p.requires_grad]
    for p in changed:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p in changed:
            p.requires_grad_(True)


def response_input_gradients(model, tokenizer, variants: Sequence[Sequence[Optional[list]]],
                             response_ids: torch.Tensor, response_mask: torch.Tensor,
                             objective: Callable[[list[torch.Tensor]], tuple[torch.Tensor, Any]],
                             families: Optional[Sequence] = None
                             ) -> tuple[list[torch.Tensor], Any]:
    """``d objective / d e`` for the input embedding ``e`` of every response token in every
    variant, from one backward.

    Args:
        variants: C lists of N chat contexts (None: the pair is not computed).
        response_ids, response_mask: [N, T].
        objective: C states [N, T, H] (with gradient; position t predicts response token t)
            -> (a scalar tensor, anything the caller wants back: e.g. values it computed).
        families: rows that share a prompt (as :func:`variant_states`).
    Returns: (C tensors [N, T, H] float32: the gradient at response token t's embedding in
        variant c, 0 for the last token of a response (its embedding predicts nothing in it),
        for padding and for pairs not computed; the objective's second value).
    """
    n, t = response_ids.shape
    lengths = [int(x) for x in response_mask.sum(dim=1).tolist()]
    leaves: list = []
    with frozen(model), torch.enable_grad():
        states = variant_states(model, tokenizer, variants, response_ids, response_mask,
                                families, leaves)
        value, aux = objective(states)
        inputs = [leaf for leaf, _ in leaves]
        grads = torch.autograd.grad(value, inputs, allow_unused=True) \
            if inputs and value.requires_grad else [None] * len(inputs)
    width = states[0].shape[-1] if states else 0
    out = [torch.zeros(n, t, width) for _ in variants]
    for (leaf, pairs), g in zip(leaves, grads):
        if g is None:
            continue
        for b, (c, i) in enumerate(pairs):
            m = max(lengths[i] - 1, 0)
            out[c][i, :m] = g[b, :m].float().cpu()
    return out, aux
