"""Replay: the policy re-reads its own responses under other contexts (no gradient).

Token-level methods ask how each response token's next-token distribution changes when a
reward's verifier information is added to or removed from the context:

- :func:`replay_messages` builds a replay context from an Example and the set of rewards whose
  verifier information it includes (in-prompt texts are removed when excluded; privileged
  texts are appended to the last user turn when included);
- :func:`js_distance` is the per-token Jensen-Shannon distance between two contexts' next-token
  distributions over the full vocabulary, computed a chunk of tokens at a time from the final
  hidden states, so the extra memory is O(N * chunk * V) rather than O(N * T * V);
- :func:`relevance` runs the replays of one batch for MRTPO's modes ``loo`` (default; with
  every text vs. without reward k's), ``single`` (only reward k's text vs. none) and ``joint``
  (all texts vs. none; one profile shared by every reward).
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import torch

from harness.rollouts import left_pad, with_response
from tasks.base import Example

MODES = ("loo", "single", "joint")


def privileged_block(reward: str, text: str) -> str:
    return f"\n\n[Reference for the {reward} check]\n{text}"


def replay_messages(example: Example, include: set[str] | frozenset[str]) -> list[dict]:
    """The example's messages with exactly the verifier texts of ``include``.

    In-prompt texts of rewards not in ``include`` are cut from the message that holds them (a
    text that is not found verbatim is an error: the replay would silently change nothing);
    privileged texts of rewards in ``include`` are appended to the last user message, in the
    order the Example declares them. Texts shared by several rewards are handled once.
    """
    known = {info.reward for info in example.verifier_info}
    unknown = set(include) - known
    if unknown:
        raise KeyError(f"example {example.id!r} has no verifier information for {sorted(unknown)}")
    messages = [dict(m) for m in example.messages]
    kept_texts = {i.text for i in example.verifier_info if i.reward in include}
    done: set[str] = set()
    for info in example.verifier_info:
        if info.privileged or info.reward in include or info.text in kept_texts \
                or info.text in done:
            continue
        for m in messages:
            if info.text in m["content"]:
                m["content"] = m["content"].replace(info.text, "", 1)
                break
        else:
            raise ValueError(f"example {example.id!r}: the {info.reward!r} verifier text is "
                             "marked in-prompt but does not occur verbatim in any message")
        done.add(info.text)
    extra = ""
    for info in example.verifier_info:
        if info.privileged and info.reward in include and info.text not in done:
            extra += privileged_block(info.reward, info.text)
            done.add(info.text)
    if extra:
        last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
        messages[last_user]["content"] += extra
    return messages


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
    out = torch.empty(h_p.shape[:2], dtype=torch.float32, device=h_p.device)
    for s in range(0, h_p.shape[1], chunk):
        lp = torch.log_softmax(head(h_p[:, s:s + chunk]).float() / temperature, dim=-1)
        lq = torch.log_softmax(head(h_q[:, s:s + chunk]).float() / temperature, dim=-1)
        out[:, s:s + chunk] = js_from_logprobs(lp, lq)
    return out


def js_from_logprobs(lp: torch.Tensor, lq: torch.Tensor) -> torch.Tensor:
    """[..., V] log-distributions -> [...] Jensen-Shannon distance (natural log)."""
    lm = torch.logaddexp(lp, lq) - math.log(2.0)
    kl_pm = (lp.exp() * (lp - lm)).sum(dim=-1)
    kl_qm = (lq.exp() * (lq - lm)).sum(dim=-1)
    return (0.5 * (kl_pm + kl_qm)).clamp(min=0.0).sqrt()


def _base_and_head(model):
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
    base, _ = _base_and_head(model)
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


def token_logprobs_from_hidden(hidden: torch.Tensor, tokens: torch.Tensor, head,
                               temperature: float = 1.0, chunk: int = 128) -> torch.Tensor:
    """[N, T] log-probabilities of ``tokens`` from final hidden states, a chunk at a time."""
    out = torch.empty(tokens.shape, dtype=torch.float32)
    for s in range(0, tokens.shape[1], chunk):
        logits = head(hidden[:, s:s + chunk]).float() / temperature
        picked = logits.gather(-1, tokens[:, s:s + chunk, None].to(logits.device)).squeeze(-1)
        out[:, s:s + chunk] = (picked - torch.logsumexp(logits, dim=-1)).cpu()
    return out


@torch.no_grad()
def contrast(model, tokenizer, examples: Sequence[Example], response_ids: torch.Tensor,
             response_mask: torch.Tensor, temperature: float = 1.0, chunk: int = 128,
             batch_size: int = 8) -> torch.Tensor:
    """CoRT's per-token log-likelihood contrast ``log pi(y_t | x) - log pi(y_t | x_free)``
    [N, T]: ``x`` is the prompt as the policy saw it (its constraints included), ``x_free`` the
    matched criteria-free prompt (every in-prompt verifier text removed). Zero on masked
    tokens."""
    _, head = _base_and_head(model)
    out = torch.zeros(response_ids.shape)
    for s in range(0, len(examples), batch_size):
        rows = slice(s, s + batch_size)
        ex, ids, mask = examples[rows], response_ids[rows], response_mask[rows]
        with_c = response_hidden(model, tokenizer, [list(e.messages) for e in ex], ids, mask)
        free = response_hidden(model, tokenizer, [replay_messages(e, frozenset()) for e in ex],
                               ids, mask)
        out[rows] = (token_logprobs_from_hidden(with_c, ids, head, temperature, chunk)
                     - token_logprobs_from_hidden(free, ids, head, temperature, chunk))
    return out * response_mask.to(out.dtype)


def known_rewards(example: Example) -> frozenset:
    return frozenset(info.reward for info in example.verifier_info)


@torch.no_grad()
def relevance(model, tokenizer, examples: Sequence[Example], response_ids: torch.Tensor,
              response_mask: torch.Tensor, rewards: Sequence[str], mode: str = "loo",
              temperature: float = 1.0, chunk: int = 128, batch_size: int = 8) -> torch.Tensor:
    """Raw per-token replay distances ``d [N, K, T]`` (zero on masked tokens).

    ``examples[n]`` is the Example that response n answers. ``loo``: with every verifier text
    vs. without reward k's; ``single``: with only reward k's vs. with none; ``joint``: all vs.
    none, the same profile for every reward. K + 1 context passes (2 for ``joint``).
    """
    if mode not in MODES:
        raise ValueError(f"unknown replay mode {mode!r}; known: {', '.join(MODES)}")
    _, head = _base_and_head(model)
    n, t = response_ids.shape
    out = torch.zeros(n, len(rewards), t)
    for s in range(0, n, batch_size):
        rows = slice(s, s + batch_size)
        ex, ids, mask = examples[rows], response_ids[rows], response_mask[rows]

        def hidden(include_for: Callable[[frozenset], frozenset]) -> torch.Tensor:
            # each example includes only the rewards it has verifier information for
            contexts = [replay_messages(e, include_for(known_rewards(e))) for e in ex]
            return response_hidden(model, tokenizer, contexts, ids, mask)

        if mode == "joint":
            d = js_distance(hidden(lambda known: known), hidden(lambda known: frozenset()),
                            head, temperature, chunk)
            out[rows] = d[:, None, :].expand(-1, len(rewards), -1).cpu()
        else:
            base = hidden(lambda known: known if mode == "loo" else frozenset())
            for k, name in enumerate(rewards):
                if not any(name in known_rewards(e) for e in ex):
                    continue  # a reward none of these prompts has (ragged K): distance 0
                other = hidden(lambda known: known - {name} if mode == "loo"
                               else known & {name})
                out[rows, k] = js_distance(base, other, head, temperature, chunk).cpu()
    return out * response_mask[:, None, :].to(out.dtype)
