"""Reference models for ``bench localisation``: two mechanisms that are not "the model reads
the verifier's information", run through the same replay, allocation and statistics as the
policy, on the same responses, verifier texts and spans.

- ``copy-model``: the next-token distribution at response token t is peaked when that token
  occurs anywhere in the context (the prompt with the verifier texts the replay keeps), flat
  otherwise. Its credit for a reward sits on the response tokens that also occur in that
  reward's verifier text (and nowhere else in the context): lexical copying. It beats a
  placebo (whose tokens are none of the verifier's) and cannot beat the order control where
  the reordered text encodes into the same tokens (on a BPE tokenizer some re-encode into
  others, and it then beats that control in part: the report's token overlap says how much).
- ``position-model``: the distribution at one fixed response position (``POSITION``) moves
  with the context's length, every other position is unaffected: any text of the same length
  moves the same credit onto the same token. It beats no control.

A control that the real profile beats and a reference model does not is evidence against that
mechanism; a control that a reference model beats as well is no evidence against it.

Both states are two-logit vectors read through an identity head, so the replay's
Jensen-Shannon distances (``methods.mrtpo.relevance``) run on them unchanged and cost
nothing next to a model forward.
"""
from __future__ import annotations

import copy
import math
from typing import Sequence

MODELS = ("copy-model", "position-model")
PEAK = 6.0  # the copy model's logit on a copied token: a clearly peaked 2-way distribution
# The position model's one position: response token 1, where the audited format profiles
# (MRTPO's and P2T's on BFCL: ``think`` of ``<think>``) peak in 99 % of responses.
POSITION = 1


def _text(messages) -> str:
    return "\n".join(m["content"] for m in messages or [])


class _Encoder:
    """Context text -> (its token ids as a set, its token count), encoded once per distinct
    text (the K + 1 contexts of a row, and every control, repeat most of them)."""

    def __init__(self, tokenizer):
        self.tokenizer, self.cache = tokenizer, {}

    def __call__(self, text: str) -> tuple[set[int], int]:
        if text not in self.cache:
            ids = self.tokenizer.encode(text, add_special_tokens=False)
            self.cache[text] = (set(ids), len(ids))
        return self.cache[text]


def copy_states(response_ids, variants: Sequence[Sequence], rows: Sequence[int], encode):
    """Per variant, [m, T, 2]: logits (PEAK, 0) where the response token occurs in the row's
    context, (0, 0) elsewhere (a row whose context is None: not replayed, zeros)."""
    import torch

    t = response_ids.shape[1]
    out = []
    for contexts in variants:
        h = torch.zeros(len(rows), t, 2)
        for i, (row, messages) in enumerate(zip(rows, contexts)):
            if messages is None:
                continue
            seen, _ = encode(_text(messages))
            ids = response_ids[row].tolist()
            h[i, :, 0] = torch.tensor([PEAK if tok in seen else 0.0 for tok in ids])
        out.append(h)
    return out


def position_states(response_ids, variants: Sequence[Sequence], rows: Sequence[int], encode,
                    position: int = POSITION):
    """Per variant, [m, T, 2]: at ``position`` the logits (log(1 + context tokens), 0), zeros
    at every other position: the context's length, not its content, moves one token's
    distribution."""
    import torch

    t = response_ids.shape[1]
    out = []
    for contexts in variants:
        h = torch.zeros(len(rows), t, 2)
        if position < t:
            for i, messages in enumerate(contexts):
                if messages is not None:
                    h[i, position, 0] = math.log1p(encode(_text(messages))[1])
        out.append(h)
    return out


def reference_context(ctx, model: str):
    """``ctx`` (a pass context, or a text control's copy of one) whose replay runs ``model``
    instead of the policy: the same responses, examples, rewards and spans."""
    import torch

    if model not in MODELS:
        raise ValueError(f"unknown reference model {model!r}: one of {', '.join(MODELS)}")
    encode = _Encoder(ctx.tokenizer)
    states = copy_states if model == "copy-model" else position_states
    out = copy.copy(ctx)
    out.head = lambda *_, **__: torch.nn.Identity()
    out.hidden_variants = lambda variants, rows, *_, **__: states(
        ctx.response_ids, variants, rows, encode)
    return out
