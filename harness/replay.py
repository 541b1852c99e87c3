"""Extra passes: the policy (or another model) re-reads its own responses under other chat
contexts, without gradient, or with gradient with respect to the response tokens' input
embeddings alone.

:func:`response_hidden_variants` is the one forward every pass uses: the final hidden states
whose next-token predictions are the response tokens, under one or several variants of their
contexts (the tokens a group's contexts begin with are computed once, as a key/value cache).
:func:`response_input_gradients` is the same forward with the response tokens entering as
embeddings that require gradient; one backward of the caller's scalar gives every variant's
gradient, since each variant's responses are their own leaves. The weights are frozen
meanwhile: no weight gradient is computed or kept, and the training step's are untouched.
:class:`PolicyContext` is the harness's side of ``methods.PassContext``: what a method's
passes and loss terms may ask for, on one worker's responses; the method decides which
contexts to build and what to compute from the states.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

import torch

from harness.rollouts import left_pad, with_response


def base_and_head(model):
    """The transformer body (returns hidden states) and the LM head of an HF causal LM."""
    module = getattr(model, "module", model)  # a DeepSpeed engine wraps the HF model
    if hasattr(module, "get_base_model"):
        # a PEFT model: its base_model is the adapter's wrapper; the HF model it returns here
        # carries the adapter layers in place, so the states are the adapted policy's
        module = module.get_base_model()
    return module.base_model, module.get_output_embeddings()


def common_prefix_length(seqs: Sequence[Sequence[int]]) -> int:
    """The number of leading tokens every sequence shares."""
    first, n = seqs[0], min(len(x) for x in seqs)
    for other in seqs[1:]:
        i = 0
        while i < n and other[i] == first[i]:
            i += 1
        n = i
    return n


def _render(tokenizer, contexts: Sequence[list[dict]]) -> list[list[int]]:
    texts = [tokenizer.apply_chat_template(c, add_generation_prompt=True, tokenize=False)
             for c in contexts]
    return tokenizer(texts, add_special_tokens=False)["input_ids"]


def _render_some(tokenizer, contexts: Sequence[Optional[list[dict]]]
                 ) -> list[Optional[list[int]]]:
    """``_render`` of the contexts that are not None (None stays None)."""
    wanted = [i for i, c in enumerate(contexts) if c is not None]
    out: list[Optional[list[int]]] = [None] * len(contexts)
    if wanted:
        for i, x in zip(wanted, _render(tokenizer, [contexts[i] for i in wanted])):
            out[i] = x
    return out


def _continuation_mask(valid: Sequence[int], width: int, past: int,
                       sees: Sequence[Sequence[tuple[int, int]]], dtype: torch.dtype
                       ) -> torch.Tensor:
    """[B, 1, width, past + width] additive mask for B right-padded rows that continue a
    cache of ``past`` positions: row b attends to the cached columns ``sees[b]`` (half-open
    ranges) and causally to its own first ``valid[b]`` tokens; its padding attends to itself
    only, so no softmax row is empty."""
    allowed = torch.zeros((len(valid), width, past + width), dtype=torch.bool)
    causal = torch.ones(width, width, dtype=torch.bool).tril()
    for b, m in enumerate(valid):
        for lo, hi in sees[b]:
            allowed[b, :, lo:hi] = True
        allowed[b, :m, past:] = causal[:m]
        tail = torch.arange(m, width)
        allowed[b, tail, past + tail] = True
    return torch.zeros(allowed.shape, dtype=dtype).masked_fill_(
        ~allowed, torch.finfo(dtype).min)[:, None]


@torch.no_grad()
def response_hidden_variants(model, tokenizer, variants: Sequence[Sequence[list[dict]]],
                             response_ids: torch.Tensor, response_mask: torch.Tensor,
                             families: Optional[Sequence] = None) -> list[torch.Tensor]:
    """:func:`variant_states` without gradient."""
    return variant_states(model, tokenizer, variants, response_ids, response_mask, families)


def variant_states(model, tokenizer, variants: Sequence[Sequence[list[dict]]],
                   response_ids: torch.Tensor, response_mask: torch.Tensor,
                   families: Optional[Sequence] = None, leaves: Optional[list] = None
                   ) -> list[torch.Tensor]:
    """One [N, T, H] tensor per variant c: the final hidden states whose next-token
    predictions are the response tokens when response n follows chat ``variants[c][n]``
    (rendered with the generation prompt); zeros past a response's end, and for a pair whose
    context is None (not wanted: nothing is computed for it).

    Rows with the same ``families`` key (default: rows that read the same context in every
    variant, i.e. the G responses of a prompt) are computed together, each distinct token
    sequence once, in three forwards that extend one key/value cache: (1) the tokens all their
    contexts begin with; (2) each distinct context's remaining tokens (its branch), one row
    each; (3) each (variant, response) row's response tokens, continuing its context's cache.
    The contexts of a replay differ only where a verifier text is cut or appended, so the
    prompt they share and each context are computed once, not once per response and variant.
    Every response token attends to exactly its own context and its own earlier tokens, so its
    state is the one a separate ``[context | response]`` row gives (up to float rounding).

    ``leaves``: a list to receive, per family, ``(leaf, pairs)``: the response tokens of
    stage (3) enter as input embeddings ``leaf`` [B, width, H] that require gradient (row b is
    ``pairs[b] = (variant, response)``, column j its token j), so the states depend on them
    with gradient (stages (1) and (2), which do not depend on the responses, stay without);
    None: token ids, as the caller's grad mode has it.

    Shapes: C variants, N responses, T response width, H hidden size; per family, D distinct
    contexts sharing a prefix of P tokens, branches of at most Lb tokens, B = C x its rows.
    """
    from transformers import DynamicCache

    base, _ = base_and_head(model)
    device = next(base.parameters()).device
    dtype = next(base.parameters()).dtype
    dtype = dtype if dtype.is_floating_point else torch.float32
    pad = tokenizer.pad_token_id
    ids = [_render_some(tokenizer, contexts) for contexts in variants]
    n, t = response_ids.shape
    lengths = [int(x) for x in response_mask.sum(dim=1).tolist()]
    if families is None:
        families = [tuple(None if v[i] is None else tuple(v[i]) for v in ids) for i in range(n)]
    order: dict = {}
    for i, key in enumerate(families):
        order.setdefault(key, []).append(i)
    out: list[Optional[torch.Tensor]] = [None] * len(variants)
    for rows in order.values():
        pairs = [(c, i) for c in range(len(variants)) for i in rows if ids[c][i] is not None]
        if not pairs:
            continue
        distinct: dict[tuple[int, ...], int] = {}
        which = [distinct.setdefault(tuple(ids[c][i]), len(distinct)) for c, i in pairs]
        contexts = list(distinct)
        # keep >= 1 token of each context out of the prefix: its state predicts token 0
        p = min(common_prefix_length(contexts), min(len(x) for x in contexts) - 1)
        cache = DynamicCache(config=base.config)
        with torch.no_grad():  # the contexts do not depend on the responses
            if p:  # (1) the shared prefix
                base(input_ids=torch.tensor([contexts[0][:p]], device=device),
                     past_key_values=cache, use_cache=True)
                cache.batch_repeat_interleave(len(contexts))
            # (2) the branches, right-padded, each seeing the prefix
            branch = [len(x) - p for x in contexts]
            lb = max(branch)
            b_ids = torch.full((len(contexts), lb), pad, dtype=torch.long)
            for d, x in enumerate(contexts):
                b_ids[d, :branch[d]] = torch.tensor(x[p:])
            mask = _continuation_mask(branch, lb, p, [[(0, p)]] * len(contexts), dtype)
            h_branch = base(input_ids=b_ids.to(device), attention_mask=mask.to(device),
                            position_ids=torch.arange(p, p + lb, device=device).expand(
                                len(contexts), -1),
                            past_key_values=cache, use_cache=True).last_hidden_state
        # (3) each response after its context: its tokens but the last (whose state predicts
        # nothing in the response)
        width = max(lengths[i] for i in rows) - 1
        h_resp = None
        if width > 0:
            cache.reorder_cache(torch.tensor(which))
            valid = [max(lengths[i] - 1, 0) for _, i in pairs]
            r_ids = torch.full((len(pairs), width), pad, dtype=torch.long)
            for b, (_, i) in enumerate(pairs):
                r_ids[b, :valid[b]] = response_ids[i, :valid[b]]
            positions = torch.stack([len(contexts[d]) + torch.arange(width) for d in which])
            # the prefix and its own context's branch
            mask = _continuation_mask(valid, width, p + lb,
                                      [[(0, p + branch[d])] for d in which], dtype)
            inputs: dict = {"input_ids": r_ids.to(device)}
            if leaves is not None:
                with torch.no_grad():
                    embedded = base.get_input_embeddings()(r_ids.to(device))
                inputs = {"inputs_embeds": embedded.detach().requires_grad_(True)}
                leaves.append((inputs["inputs_embeds"], pairs))
            h_resp = base(**inputs, attention_mask=mask.to(device),
                          position_ids=positions.to(device), past_key_values=cache,
                          use_cache=True).last_hidden_state
        for b, (c, i) in enumerate(pairs):
            if out[c] is None:
                out[c] = h_branch.new_zeros((n, t, h_branch.shape[-1]))
            if lengths[i]:
                out[c][i, 0] = h_branch[which[b], branch[which[b]] - 1]
            if lengths[i] > 1:
                out[c][i, 1:lengths[i]] = h_resp[b, :lengths[i] - 1]
    return [x if x is not None else torch.zeros((n, t, base.config.hidden_size), dtype=dtype,
                                                device=device) for x in out]


@torch.no_grad()
def response_hidden(model, tokenizer, contexts: Sequence[list[dict]], response_ids: torch.Tensor,
                    response_mask: torch.Tensor, pack: bool = True,
                    families: Optional[Sequence] = None) -> torch.Tensor:
    """[N, T, H] final hidden states whose next-token predictions are the response tokens.

    Row n reads ``contexts[n]`` (chat messages, rendered with the generation prompt) followed
    by its response tokens. ``pack``: rows of one family share the forward of the tokens their
    contexts begin with (:func:`response_hidden_variants`); states past a response's end are
    then 0. Otherwise (the reference) prompts are left-padded so every response ends at the
    last column.
    """
    if pack:
        return response_hidden_variants(model, tokenizer, [contexts], response_ids,
                                        response_mask, families)[0]
    base, _ = base_and_head(model)
    p_ids, p_mask = left_pad(_render(tokenizer, contexts), tokenizer.pad_token_id)
    device = next(base.parameters()).device
    t = response_ids.shape[1]
    full, attn, pos = with_response(p_ids, p_mask, response_ids, response_mask)
    hidden = base(input_ids=full.to(device), attention_mask=attn.to(device),
                  position_ids=pos.to(device), use_cache=False).last_hidden_state
    return hidden[:, -t - 1:-1]  # position i predicts token i + 1


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
    # [n, K] bool (see methods.PassContext.signal); None: every pair (tools, benches, tests)
    signal: Optional[torch.Tensor] = None
    state: dict = field(default_factory=dict)  # see methods.PassContext.state

    def __post_init__(self) -> None:
        if self.signal is None:
            self.signal = torch.ones(self.rewards.shape, dtype=torch.bool)

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
        return self.hidden_variants([contexts], rows, model)[0]

    def hidden_variants(self, variants: Sequence[Sequence[list[dict]]], rows: Sequence[int],
                        model: str = "policy") -> list[torch.Tensor]:
        rows = list(rows)
        # a group's rows answer one prompt: their contexts share its beginning in every variant
        return response_hidden_variants(self.model(model), self.tokenizer, variants,
                                        self.response_ids[rows], self.response_mask[rows],
                                        families=self.group[rows].tolist())

    def head(self, model: str = "policy") -> torch.nn.Module:
        return base_and_head(self.model(model))[1]

    def embeddings(self, model: str = "policy") -> torch.nn.Module:
        return base_and_head(self.model(model))[0].get_input_embeddings()

    def input_gradients(self, variants: Sequence[Sequence[list[dict]]], rows: Sequence[int],
                        objective: Callable, model: str = "policy") -> tuple[list, Any]:
        rows = list(rows)
        return response_input_gradients(self.model(model), self.tokenizer, variants,
                                        self.response_ids[rows], self.response_mask[rows],
                                        objective, families=self.group[rows].tolist())
