"""P2T with a reward model, the paper's setting (read from stonewst/P2T: p2t_attribution.py,
p2t_scorer.py, p2t_align.py; docs/methods.md).

A response is split into steps at ``--p2t-separator``; the reward model reads the prompt and
the steps:

* a **token classifier** (a process reward model) reads the steps joined by
  ``--p2t-step-token`` with the token after each step, and scores step s at that token, from
  its two logits (or one);
* a **sequence classifier** reads the whole response as one step and scores it once.

Per step: the reward ``R_s = p = softmax(z)_pos`` (``sigmoid(z)`` for one logit; ``2p - 1``
with ``--p2t-reward-scale signed``) and the differentiated scalar ``S_s`` (``z_pos - z_neg``,
``p`` or ``log p``). One backward of ``sum_s S_s`` over the batch (``--p2t-backward single``)
or one per step index (``per_step``) gives ``I_i = dS/de_i . (e_i - e_null)`` on the reward
model's tokens of each step (the step tokens and the prompt excluded). The influences move to
the policy's tokens through characters (an overlap-weighted mean over the reward model's tokens
that share characters with a policy token in the same step); a policy token in no step (inside
a separator) joins the step before it with influence 0. Per step, on the policy's tokens:
``flat = R_s`` and ``redistributed = N_s * R_s * softmax(I / tau)``.
"""
from __future__ import annotations

import os
from typing import Any, Optional, Sequence

from common.lazy import lazy

from methods.mrtpo.diagnostics import token_char_spans
from methods.p2t.null import null_distribution, null_embedding

torch = lazy("torch", globals())  # imported on first use: common/lazy.py

_LOADED: dict[str, tuple] = {}  # one reward model per path and process


def load(path: str) -> tuple[Any, Any, str]:
    """(model, tokenizer, ``token`` | ``sequence``) from an HF folder, frozen, float32, read
    once per process."""
    key = os.path.abspath(path)
    if key in _LOADED:
        return _LOADED[key]
    from transformers import (AutoConfig, AutoModelForSequenceClassification,
                              AutoModelForTokenClassification, AutoTokenizer)

    config = AutoConfig.from_pretrained(path, local_files_only=True)
    arch = (getattr(config, "architectures", None) or [""])[0]
    if arch.endswith("ForTokenClassification"):
        cls, kind = AutoModelForTokenClassification, "token"
    elif arch.endswith("ForSequenceClassification"):
        cls, kind = AutoModelForSequenceClassification, "sequence"
    else:
        raise ValueError(f"--p2t-reward-model {path}: architecture {arch or 'unknown'!r} is "
                         "neither a token nor a sequence classifier; give a folder saved from "
                         "an AutoModelForTokenClassification (a process reward model) or an "
                         "AutoModelForSequenceClassification")
    if kind == "sequence" and config.get_text_config().pad_token_id is None:
        raise ValueError(f"--p2t-reward-model {path}: a sequence classifier without "
                         "pad_token_id in its config cannot score a batch; set it (e.g. "
                         "config.pad_token_id = tokenizer.pad_token_id) and save it again")
    model = cls.from_pretrained(path, local_files_only=True, dtype=torch.float32).eval()
    for p in model.parameters():
        p.requires_grad_(False)  # attribution differentiates the inputs, never the weights
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    if not getattr(tok, "is_fast", False):
        raise ValueError(f"--p2t-reward-model {path}: its tokenizer is not a fast tokenizer; "
                         "P2T needs character offsets (save a tokenizer.json with it)")
    _LOADED[key] = (model, tok, kind)
    return _LOADED[key]


def label_column(config, label: Optional[str], path: str) -> Optional[int]:
    """The logit P2T reads as a one-logit score: ``label``'s (``--p2t-reward-label``; a TCRM
    model's heads are named by its rewards), or None: the model's own one or two labels
    (negative, positive)."""
    heads = getattr(config, "tcrm_rewards", None)
    names = list(heads) if heads is not None else \
        [str(config.id2label.get(i, i)) for i in range(config.num_labels)]
    if label is not None:
        if label not in names:
            raise ValueError(f"--p2t-reward-label {label!r}: {path} has the labels "
                             f"{', '.join(names)}; name one of them")
        return names.index(label)
    if heads is not None:
        if len(heads) == 1:
            return 0
        raise ValueError(f"--p2t-reward-model {path}: a TCRM value model with one head per "
                         f"reward ({', '.join(heads)}); name the one P2T reads with "
                         "--p2t-reward-label")
    if config.num_labels not in (1, 2):
        raise ValueError(f"--p2t-reward-model {path}: {config.num_labels} labels; P2T reads "
                         "two (negative, positive), one (a score), or the one named by "
                         "--p2t-reward-label")
    return None


def scalars(z: torch.Tensor, target: str) -> tuple[torch.Tensor, torch.Tensor]:
    """[..., C] logits (C = 2: negative, positive; C = 1: a score) -> (reward ``p`` [...],
    the differentiated scalar ``S`` [...]: logit_diff | prob | logprob)."""
    if z.shape[-1] == 1:
        diff = z[..., 0]
        logp = torch.nn.functional.logsigmoid(diff)
    else:
        diff = z[..., 1] - z[..., 0]
        logp = torch.log_softmax(z, dim=-1)[..., 1]
    p = logp.exp()
    return p, {"logit_diff": diff, "prob": p, "logprob": logp}[target]


def reward_input(tok, kind: str, messages: Sequence[dict], steps: list[str], step_token: str
                 ) -> tuple[list[int], list[tuple[int, int]], list[tuple[int, int]], list[int]]:
    """The reward model's tokens of (prompt, steps): (ids, each token's character range in
    the rendered conversation, each step's range there, the index of each step's scoring
    token; for a sequence classifier the last token)."""
    content = step_token.join(steps) + step_token if kind == "token" else steps[0]
    chat = [dict(m) for m in messages] + [{"role": "assistant", "content": content}]
    if getattr(tok, "chat_template", None):
        conversation = tok.apply_chat_template(chat, tokenize=False)
    else:
        conversation = "\n\n".join(m["content"] for m in chat)
    start = conversation.rfind(content)
    if start < 0:
        raise ValueError("the reward model's chat template changes the response; P2T needs it "
                         "verbatim in the rendered conversation")
    enc = tok(conversation, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = enc["input_ids"], [tuple(o) for o in enc["offset_mapping"]]
    spans, pos = [], start
    for s in steps:
        spans.append((pos, pos + len(s)))
        pos += len(s) + (len(step_token) if kind == "token" else 0)
    if kind == "sequence":
        return ids, offsets, spans, [len(ids) - 1]
    step_id = tok.convert_tokens_to_ids(step_token)
    scored = []
    for _, end in spans:
        j = next((j for j, o in enumerate(offsets) if o[0] == end and ids[j] == step_id), None)
        if j is None:
            raise ValueError(f"the reward model does not read {step_token!r} as one token "
                             "after a step; give its step token with --p2t-step-token")
        scored.append(j)
    return ids, offsets, spans, scored


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> int:
    return max(0, min(a[1], b[1]) - max(a[0], b[0]))


def to_policy(ranges: list[tuple[int, int]], resp_spans: list[tuple[int, int]],
              conv_spans: list[tuple[int, int]], offsets, influence: list[float]
              ) -> tuple[list[int], list[float]]:
    """Each policy token's step (by character overlap; in none: the step before) and its
    influence: the overlap-weighted mean of the reward model's tokens in that step."""
    mapped = []  # (lo, hi in the response, step, influence)
    for (c0, c1), infl in zip(offsets, influence):
        for k, (a, b) in enumerate(conv_spans):
            if _overlap((c0, c1), (a, b)) > 0:
                shift = resp_spans[k][0] - a
                mapped.append((max(c0, a) + shift, min(c1, b) + shift, k, infl))
                break
    steps, values = [], []
    for r in ranges:
        best = max(range(len(resp_spans)), key=lambda k: _overlap(r, resp_spans[k]))
        if _overlap(r, resp_spans[best]) == 0:
            before = [k for k, (_, hi) in enumerate(resp_spans) if hi <= r[0]]
            steps.append(before[-1] if before else 0)
            values.append(0.0)
            continue
        num = den = 0.0
        for lo, hi, k, infl in mapped:
            if k == best:
                ov = _overlap(r, (lo, hi))
                num, den = num + infl * ov, den + ov
        steps.append(best)
        values.append(num / den if den else 0.0)
    return steps, values


def token_rewards(ctx, options) -> torch.Tensor:
    """[n, 2, T]: per policy token, its step's reward ``R_s`` (flat) and ``N_s R_s
    softmax_s(I / tau)`` (redistributed); one forward and one backward (``single``) per slice
    of responses."""
    model, tok, kind = load(options.p2t_reward_model)
    column = label_column(model.config, options.p2t_reward_label, options.p2t_reward_model)
    embed = model.get_input_embeddings()
    e_null = null_embedding(embed, null_distribution(options.p2t_null, embed.num_embeddings,
                                                     tok))
    n, t = ctx.response_ids.shape
    out = torch.zeros(n, 2, t)
    special = set(ctx.tokenizer.all_special_ids or [])
    for s in range(0, n, ctx.batch_size):
        items = []  # (row, kept positions, ranges, resp spans, reward input)
        for i in range(s, min(n, s + ctx.batch_size)):
            ids = ctx.response_ids[i, :int(ctx.response_mask[i].sum())].tolist()
            keep = [j for j, x in enumerate(ids) if x not in special]
            text, ranges = token_char_spans(ctx.tokenizer, [ids[j] for j in keep])
            if not text.strip():
                continue
            steps = text.split(options.p2t_separator) if kind == "token" else [text]
            resp, pos = [], 0
            for st in steps:
                resp.append((pos, pos + len(st)))
                pos += len(st) + len(options.p2t_separator)
            items.append((i, keep, ranges, resp, reward_input(
                tok, kind, ctx.examples[i].messages, steps, options.p2t_step_token)))
        if items:
            _score(model, tok, embed, e_null, items, options, out, column)
    return out


def attribute(model, embed, e_null: torch.Tensor, ids: torch.Tensor, attn: torch.Tensor,
              scored: Sequence[tuple[int, int, int]], owner: torch.Tensor, target: str,
              backward: str, column: Optional[int] = None) -> tuple[torch.Tensor, dict]:
    """The reward model's side: one forward of a left-padded batch, its backward(s).

    Args:
        ids, attn: [B, L] token ids and attention mask (left padding).
        scored: (row, step, position) of each step's scoring token (a sequence classifier:
            one step per row, scored at the last position).
        owner: [B, L] long, the step each token belongs to (-1: none: prompt, step tokens,
            padding).
        column: the one logit read as a score (a multi-label model's), or None: all of them.
    Returns: (``I`` [B, L] ``dS_own/de . (e - e_null)``, 0 where ``owner`` is -1, with
        ``S_own`` the sum of every step's scalar (``single``) or the token's own step's
        (``per_step``, one backward per step index); {(row, step): reward p}).
    """
    positions = (attn.cumsum(dim=1) - 1).clamp(min=0)
    with torch.no_grad():
        base = embed(ids).float()
    leaf = base.clone().requires_grad_(True)
    with torch.enable_grad():
        logits = model(inputs_embeds=leaf, attention_mask=attn, position_ids=positions).logits
        if column is not None:
            logits = logits[..., column:column + 1]
        steps, rewards = {}, {}
        for b, k, j in scored:
            p, s = scalars((logits[b] if logits.dim() == 2 else logits[b, j]).float(), target)
            steps.setdefault(k, []).append(s)
            rewards[(b, k)] = float(p.detach())
        if backward == "single":
            g = torch.autograd.grad(sum(sum(v) for v in steps.values()), leaf)[0]
            grads = {k: g for k in steps}
        else:
            last = max(steps)
            grads = {k: torch.autograd.grad(sum(steps[k]), leaf, retain_graph=k < last)[0]
                     for k in sorted(steps)}
    diff = base - e_null.to(base.dtype)
    infl = torch.zeros(ids.shape)
    for k, g in grads.items():
        mine = owner == k
        infl[mine] = (g * diff).sum(dim=-1)[mine]
    return infl, rewards


def _score(model, tok, embed, e_null, items, options, out, column=None) -> None:
    """One slice: the reward model's batch, its influences moved to the policy's tokens, and
    the token rewards written into ``out`` at the policy's positions."""
    width = max(len(x[4][0]) for x in items)
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    ids = torch.full((len(items), width), pad, dtype=torch.long)
    attn = torch.zeros(len(items), width, dtype=torch.long)
    owner = torch.full((len(items), width), -1, dtype=torch.long)
    scored = []
    for b, (_, _, _, _, (row, offsets, conv, score_at)) in enumerate(items):
        shift = width - len(row)
        ids[b, shift:] = torch.tensor(row)
        attn[b, shift:] = 1
        for j, o in enumerate(offsets):  # the step tokens lie between steps: no owner
            owner[b, shift + j] = next((k for k, c in enumerate(conv) if _overlap(o, c) > 0),
                                       -1)
        scored += [(b, k, shift + j) for k, j in enumerate(score_at)]
    infl, rewards = attribute(model, embed, e_null, ids, attn, scored, owner,
                              options.p2t_target, options.p2t_backward, column)
    for b, (i, keep, ranges, resp, (row, offsets, conv, _)) in enumerate(items):
        shift = width - len(row)
        steps, values = to_policy(ranges, resp, conv, offsets, infl[b, shift:].tolist())
        for k in set(steps):
            idx = [j for j, st in enumerate(steps) if st == k]
            r = rewards[(b, k)]
            r = r if options.p2t_reward_scale == "null" else 2.0 * r - 1.0
            w = torch.softmax(torch.tensor([values[j] for j in idx]) / options.p2t_temperature,
                              dim=0)
            pos = torch.tensor([keep[j] for j in idx])
            out[i, 0, pos] = r
            out[i, 1, pos] = len(idx) * r * w
