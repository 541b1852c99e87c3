"""MRTPO's relevance diagnostics (paper Table 4, Fig. 6), per step.

For each reward k and response: the share of its replay distance on the span its checker reads
divided by that span's share of the tokens (1 = uniform; Table 4's ratio), the share held by
its top 1 / 5 / 10 % tokens (Fig. 6a), and the share on each part of the response (Fig. 6b).
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import torch

from tasks.base import Example

TOP = (0.01, 0.05, 0.10)


def token_char_spans(tokenizer, ids: Sequence[int]) -> tuple[str, list[tuple[int, int]]]:
    """The response as the concatenation of its tokens decoded one by one, and each token's
    character range in it. (Decoding tokens singly keeps the offsets exact; a multi-byte
    character split across tokens may render differently, which spans of ASCII tags and JSON
    do not mind.)"""
    pieces = tokenizer.batch_decode([[i] for i in ids], skip_special_tokens=False)
    ranges, pos = [], 0
    for p in pieces:
        ranges.append((pos, pos + len(p)))
        pos += len(p)
    return "".join(pieces), ranges


def token_mask(ranges: list[tuple[int, int]], spans: list[tuple[int, int]]) -> torch.Tensor:
    """[T] bool: tokens that overlap any character span."""
    return torch.tensor([any(s < e2 and s2 < e for s2, e2 in spans) for s, e in ranges],
                        dtype=torch.bool)


def response_record(d: torch.Tensor, rewards: Sequence[str], spans: dict, ranges) -> dict:
    """One response's diagnostics. d: [K, T] distances on its valid tokens."""
    out = {}
    t = d.shape[1]
    for k, name in enumerate(rewards):
        total = float(d[k].sum())
        if total <= 0 or t == 0:
            continue
        ranked = d[k].sort(descending=True).values
        for p in TOP:
            out[f"{name}/top{int(p * 100)}"] = float(ranked[:max(1, math.ceil(p * t))].sum()) / total
        if spans.get(name):
            m = token_mask(ranges, spans[name])
            if 0 < int(m.sum()) < t:
                share = float(d[k][m].sum()) / total
                out[f"{name}/span_ratio"] = share / (float(m.sum()) / t)
        for part in ("tags", "reasoning", "answer"):
            if part in spans:
                m = token_mask(ranges, spans[part])
                out[f"{name}/part/{part}"] = float(d[k][m].sum()) / total
    return out


def batch_records(tokenizer, examples: Sequence[Example], response_ids: torch.Tensor,
                  response_mask: torch.Tensor, relevance: torch.Tensor, rewards: Sequence[str],
                  spans_fn: Callable[[Example, str], dict]) -> list[dict]:
    records = []
    for n, ex in enumerate(examples):
        length = int(response_mask[n].sum())
        ids = response_ids[n, :length].tolist()
        text, ranges = token_char_spans(tokenizer, ids)
        records.append(response_record(relevance[n, :, :length], rewards, spans_fn(ex, text),
                                       ranges))
    return records


def summarise(records: Sequence[dict]) -> dict:
    """Mean of every diagnostic over the responses that have it, as ``diag/...`` metrics."""
    sums: dict[str, list[float]] = {}
    for rec in records:
        for key, value in rec.items():
            sums.setdefault(key, []).append(value)
    return {f"diag/{k}": sum(v) / len(v) for k, v in sorted(sums.items())}
