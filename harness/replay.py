"""Extra passes: the policy (or another model) re-reads its own responses under other chat
contexts, without gradient.

:func:`response_hidden` is the one forward every pass uses: the final hidden states whose
next-token predictions are the response tokens, under given contexts (rows that share a context
share one packed forward of it). :class:`PolicyContext` is the harness's side of
``methods.PassContext``: what a method's passes and loss terms may ask for, on one worker's
responses; the method decides which contexts to build and what to compute from the states.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence

import torch

from harness.rollouts import left_pad, with_response


def base_and_head(model):
    """The transformer body (returns hidden states) and the LM head of an HF causal LM."""
    module = getattr(model, "module", model)  # a DeepSpeed engine wraps the HF model
    return module.base_model, module.get_output_embeddings()


@torch.no_grad()
def response_hidden(model, tokenizer, contexts: Sequence[list[dict]], response_ids: torch.Tensor,
                    response_mask: torch.Tensor, pack: bool = True) -> torch.Tensor:
    """[N, T, H] final hidden states whose next-token predictions are the response tokens.

    Row n reads ``contexts[n]`` (chat messages, rendered with the generation prompt) followed
    by its response tokens. ``pack``: rows whose contexts are the same token sequence (the G
    responses of one prompt under one replay context) share one forward of it
    (harness.packed); states past a response's end are then 0. Otherwise prompts are
    left-padded so every response ends at the last column.
    """
    base, _ = base_and_head(model)
    texts = [tokenizer.apply_chat_template(c, add_generation_prompt=True, tokenize=False)
             for c in contexts]
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    p_ids, p_mask = left_pad(ids, tokenizer.pad_token_id)
    device = next(base.parameters()).device
    t = response_ids.shape[1]
    if pack:
        from harness.packed import pack as pack_rows
        from harness.packed import unpack_logits

        dtype = next(base.parameters()).dtype
        packed = pack_rows(p_ids, p_mask, response_ids, response_mask,
                           [tuple(x) for x in ids], tokenizer.pad_token_id,
                           dtype if dtype.is_floating_point else torch.float32)
        hidden = base(input_ids=packed.ids.to(device), attention_mask=packed.mask.to(device),
                      position_ids=packed.position_ids.to(device),
                      use_cache=False).last_hidden_state
        return unpack_logits(hidden[:, packed.keep.to(device)], packed, t)
    full, attn, pos = with_response(p_ids, p_mask, response_ids, response_mask)
    hidden = base(input_ids=full.to(device), attention_mask=attn.to(device),
                  position_ids=pos.to(device), use_cache=False).last_hidden_state
    return hidden[:, -t - 1:-1]  # position i predicts token i + 1


@dataclass
class PolicyContext:
    """``methods.PassContext`` over one worker's responses (row n answers ``examples[n]``)."""

    models: Mapping[str, Any]  # policy | initial | current -> model (an engine or HF model)
    tokenizer: Any
    examples: Sequence[Any]
    texts: Sequence[str]
    response_ids: torch.Tensor  # [n, T]
    response_mask: torch.Tensor  # [n, T]
    rewards: torch.Tensor  # [n, K]
    reward_names: tuple[str, ...]
    group: torch.Tensor  # [n]
    reward_bounds: tuple[tuple[float, float], ...] = ()
    temperature: float = 1.0
    batch_size: int = 8
    spans: Optional[Callable] = None

    @classmethod
    def of(cls, model, tokenizer, examples: Sequence[Any], response_ids: torch.Tensor,
           response_mask: torch.Tensor, reward_names: Sequence[str], temperature: float = 1.0,
           batch_size: int = 8, rewards: Optional[torch.Tensor] = None,
           texts: Optional[Sequence[str]] = None,
           reward_bounds: Optional[Sequence[tuple[float, float]]] = None,
           **models) -> "PolicyContext":
        """A context over responses scored by one model (tools, benches and tests: no
        training run around them); ``reward_bounds``: default [0, 1] for each reward;
        ``models``: more models by name (initial, current)."""
        n = len(examples)
        bounds = reward_bounds if reward_bounds is not None else ((0.0, 1.0),) * len(reward_names)
        return cls({"policy": model, **models}, tokenizer, list(examples),
                   list(texts) if texts is not None else [""] * n, response_ids, response_mask,
                   rewards if rewards is not None else torch.zeros(n, len(reward_names)),
                   tuple(reward_names), torch.zeros(n, dtype=torch.long),
                   reward_bounds=tuple(bounds), temperature=temperature,
                   batch_size=batch_size)

    def model(self, name: str):
        if self.models.get(name) is None:
            kept = ", ".join(k for k, v in self.models.items() if v is not None)
            raise ValueError(f"a pass asked for the {name!r} model, which this run does not "
                             f"keep (it has: {kept}); declare it in the pass's or loss term's "
                             "models()")
        return self.models[name]

    def hidden(self, contexts: Sequence[list[dict]], rows: Sequence[int],
               model: str = "policy") -> torch.Tensor:
        rows = list(rows)
        return response_hidden(self.model(model), self.tokenizer, contexts,
                               self.response_ids[rows], self.response_mask[rows])

    def head(self, model: str = "policy") -> torch.nn.Module:
        return base_and_head(self.model(model))[1]
