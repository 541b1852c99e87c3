"""Shared-prompt packing: a group's prompt is computed once, with its responses beside it.

The G responses to one prompt share that prompt, which is most of each sequence (a tool-calling
prompt is ~390 tokens, a response ~90). Instead of G rows ``[prompt | response_g]`` we build one
row ``[prompt | response_1 | ... | response_G]`` whose attention mask lets each response see the
prompt and its own earlier tokens only, and whose position ids restart after the prompt for each
response. Every response token then has exactly the context it has in its own row, so its
log-probability is the same (up to float rounding), and so is the gradient; the prompt's tokens
are computed once instead of G times.

Shapes: S packed rows, L packed length, N response rows, T response width, V vocabulary.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Packed:
    ids: torch.Tensor  # [S, L] long (right-padded with the pad id)
    position_ids: torch.Tensor  # [S, L] long
    mask: torch.Tensor  # [S, 1, L, L] additive float mask (0 = attend, dtype min = blocked)
    keep: torch.Tensor  # [K] positions whose logits are computed (sorted)
    # for response row n and its token t < length[n]: the packed row, and the index into
    # ``keep`` of the position whose logits predict that token
    row_of: list[int]
    logit_index: list[torch.Tensor]  # N tensors [length[n]] of indices into keep
    lengths: list[int]


def pack(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, response_ids: torch.Tensor,
         response_mask: torch.Tensor, group_of: list, pad_id: int,
         dtype: torch.dtype = torch.float32) -> Packed:
    """Pack response rows that share a prompt into one row each.

    Args:
        prompt_ids, prompt_mask: [N, P] left-padded prompts (rows with the same ``group_of``
            value must hold the same prompt).
        response_ids, response_mask: [N, T] right-padded responses; a response's valid tokens
            are a prefix (up to and including its first EOS).
        group_of: N hashable keys: which prompt each row answers.
    """
    n = len(group_of)
    order: dict = {}
    for i, g in enumerate(group_of):
        order.setdefault(g, []).append(i)
    lengths = [int(x) for x in response_mask.sum(dim=1).tolist()]
    segments = []  # per group: tokens, positions, prompt length, [(row, start in segment)]
    for rows in order.values():
        first = rows[0]
        prompt = prompt_ids[first][prompt_mask[first].bool()]
        p = len(prompt)
        if p == 0:
            raise ValueError("a response row has an empty prompt; nothing to condition on")
        for r in rows[1:]:
            other = prompt_ids[r][prompt_mask[r].bool()]
            if not torch.equal(other, prompt):
                raise ValueError(f"rows {first} and {r} share a group but not a prompt")
        parts, positions, starts = [prompt], [torch.arange(p)], []
        offset = p
        for r in rows:
            length = lengths[r]
            parts.append(response_ids[r, :length])
            positions.append(torch.arange(p, p + length))
            starts.append((r, offset))
            offset += length
        segments.append((torch.cat(parts), torch.cat(positions), p, starts))
    # one packed row per group (one row for several groups would make attention quadratic in
    # their total length)
    placed = [(j, 0) for j in range(len(segments))]
    row_len = [len(seg[0]) for seg in segments]
    width, s_count = max(row_len), len(row_len)
    ids = torch.full((s_count, width), pad_id, dtype=torch.long)
    position_ids = torch.zeros((s_count, width), dtype=torch.long)
    allowed = torch.zeros((s_count, width, width), dtype=torch.bool)
    causal = torch.ones(width, width, dtype=torch.bool).tril()
    needed: list[tuple[int, torch.Tensor]] = [(0, torch.zeros(0, dtype=torch.long))] * n
    for (seq, ps, p, starts), (j, b) in zip(segments, placed):
        ids[j, b:b + len(seq)] = seq
        position_ids[j, b:b + len(ps)] = ps
        allowed[j, b:b + p, b:b + p] = causal[:p, :p]
        for r, start in starts:
            lo, hi = b + start, b + start + lengths[r]
            allowed[j, lo:hi, b:b + p] = True  # the prompt
            allowed[j, lo:hi, lo:hi] = causal[:hi - lo, :hi - lo]
            # the last prompt token predicts token 0; the response's token t-1 predicts t
            needed[r] = (j, torch.cat([torch.tensor([b + p - 1]), torch.arange(lo, hi - 1)])
                         if hi > lo else torch.zeros(0, dtype=torch.long))
    for j, used in enumerate(row_len):
        # padding positions attend to themselves only, so no row of the softmax is empty
        pad = torch.arange(used, width)
        allowed[j, pad, pad] = True
    mask = torch.zeros((s_count, 1, width, width), dtype=dtype)
    mask.masked_fill_(~allowed[:, None], torch.finfo(dtype).min)
    keep = torch.unique(torch.cat([src for _, src in needed] or [torch.zeros(0, dtype=torch.long)]))
    lookup = torch.full((width,), -1, dtype=torch.long)
    lookup[keep] = torch.arange(len(keep))
    return Packed(ids, position_ids, mask, keep, [j for j, _ in needed],
                  [lookup[src] for _, src in needed], lengths)


def unpack_logits(logits: torch.Tensor, packed: Packed, width: int) -> torch.Tensor:
    """[S, K, V] logits at the kept positions -> [N, T, V] aligned with the response tokens
    (zeros beyond each response's length)."""
    n, v = len(packed.lengths), logits.shape[-1]
    out = logits.new_zeros((n, width, v))
    for r, (j, idx) in enumerate(zip(packed.row_of, packed.logit_index)):
        if len(idx):
            out[r, :len(idx)] = logits[j, idx]
    return out


def packed_forward(model, packed: Packed, width: int) -> torch.Tensor:
    """[N, T, V] next-token logits for every response token (one forward of the packed rows)."""
    device = next(model.parameters()).device
    keep = packed.keep.to(device)
    out = model(input_ids=packed.ids.to(device), attention_mask=packed.mask.to(device),
                position_ids=packed.position_ids.to(device), logits_to_keep=keep,
                use_cache=False)
    return unpack_logits(out.logits, packed, width)
