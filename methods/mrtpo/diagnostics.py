"""Credit-localisation diagnostics of a per-reward token profile (MRTPO's replay distances;
paper Table 4, Fig. 6), per step.

For each reward k and response: the share of its replay distance on the span its checker reads
divided by that span's share of the tokens (1 = uniform; also for narrower spans a task names
``<reward>:<what>``, and per constraint type where rewards are per-prompt slots,
``type:<type>``), the share held by its top 1 / 5 /
10 % tokens (Fig. 6a), and the share on each part of the response (Fig. 6b). Where the task's
spans name a constraint type for a reward (instruction following), each satisfied constraint
also adds its distance share and token share under ``type/<type>/`` (Table 4).
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

from common.lazy import lazy

from tasks.base import Example

torch = lazy("torch", globals())  # imported on first use: common/lazy.py

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


# Table 4's last two rows: every satisfied, and every violated, constraint instance of any type
ALL_SATISFIED, ALL_VIOLATED = "all_satisfied", "all_violated"


def response_record(d: torch.Tensor, rewards: Sequence[str], spans: dict, ranges,
                    values: Sequence[float] | None = None) -> dict:
    """One response's diagnostics. d: [K, T] distances on its valid tokens; ``values``: its
    reward values (for the per-type records, which count satisfied constraints only)."""
    out = {}
    t = d.shape[1]
    by_type: dict[str, list[tuple[float, float]]] = {}
    ratios: dict[str, list[float]] = {}  # constraint type -> span ratios of its slots
    for k, name in enumerate(rewards):
        total = float(d[k].sum())
        if not total > 0 or t == 0:  # no distance, or NaN: the pair was not replayed
            continue
        ranked = d[k].sort(descending=True).values
        for p in TOP:
            out[f"{name}/top{int(p * 100)}"] = float(ranked[:max(1, math.ceil(p * t))].sum()) / total
        if spans.get(name):
            m = token_mask(ranges, spans[name])
            if 0 < int(m.sum()) < t:
                share = float(d[k][m].sum()) / total
                out[f"{name}/span_ratio"] = share / (float(m.sum()) / t)
                kind = spans.get("types", {}).get(name)
                if kind:  # rewards named per prompt slot: also by what the slot checks
                    ratios.setdefault(kind, []).append(out[f"{name}/span_ratio"])
                if kind and values is not None:  # Table 4: satisfied per type, and pooled
                    pair = (share, float(m.sum()) / t)
                    if values[k] == 1.0:
                        by_type.setdefault(kind, []).append(pair)
                        by_type.setdefault(ALL_SATISFIED, []).append(pair)
                    else:
                        by_type.setdefault(ALL_VIOLATED, []).append(pair)
        # narrower spans of the same reward (``execution:diff``: where the query differs from
        # the gold one), each with a ratio of its own
        for key in sorted(k for k in spans if isinstance(k, str) and k.startswith(f"{name}:")):
            m = token_mask(ranges, spans[key]) if spans[key] else None
            if m is not None and 0 < int(m.sum()) < t:
                out[f"{key}/span_ratio"] = (float(d[k][m].sum()) / total) / (float(m.sum()) / t)
        for part in ("tags", "reasoning", "answer"):
            if part in spans:
                m = token_mask(ranges, spans[part])
                out[f"{name}/part/{part}"] = float(d[k][m].sum()) / total
    for kind, vals in ratios.items():  # every instance, satisfied or not
        out[f"type:{kind}/span_ratio"] = sum(vals) / len(vals)
    for kind, pairs in by_type.items():  # Table 4: distance share and token share per type
        # (and pooled over types: all satisfied, all violated instances)
        out[f"type/{kind}/dist"] = sum(p for p, _ in pairs) / len(pairs)
        out[f"type/{kind}/tok"] = sum(q for _, q in pairs) / len(pairs)
        out[f"type/{kind}/n"] = float(len(pairs))
    return out


def batch_records(tokenizer, examples: Sequence[Example], response_ids: torch.Tensor,
                  response_mask: torch.Tensor, relevance: torch.Tensor, rewards: Sequence[str],
                  spans_fn: Callable[[Example, str], dict],
                  values: Sequence[Sequence[float]] | None = None) -> list[dict]:
    """Per response (``examples[n]`` is the Example response n answers; ``values[n]`` its
    reward row)."""
    records = []
    for n, ex in enumerate(examples):
        length = int(response_mask[n].sum())
        ids = response_ids[n, :length].tolist()
        text, ranges = token_char_spans(tokenizer, ids)
        records.append(response_record(relevance[n, :, :length], rewards, spans_fn(ex, text),
                                       ranges, None if values is None else values[n]))
    return records


def summarise(records: Sequence[dict]) -> dict:
    """Every diagnostic over the responses that have it, as ``diag/...`` metrics: the mean,
    except the per-type records: their counts ``type/<t>/n`` are summed and their shares
    averaged with those counts as weights (one value per constraint instance)."""
    sums: dict[str, list[tuple[float, float]]] = {}
    for rec in records:
        for key, value in rec.items():
            weight = rec.get(key.rsplit("/", 1)[0] + "/n", 1.0) if key.startswith("type/") \
                else 1.0
            sums.setdefault(key, []).append((value, weight))
    out = {}
    for k, v in sorted(sums.items()):
        if k.startswith("type/") and k.endswith("/n"):
            out[f"diag/{k}"] = sum(x for x, _ in v)
        else:
            out[f"diag/{k}"] = sum(x * w for x, w in v) / sum(w for _, w in v)
    return out
