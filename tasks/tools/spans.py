"""Which characters of a tool-calling response each verifier reads, and the response's parts.

Used by MRTPO's diagnostics (paper Table 4 and Fig. 6): the share of a reward's replay distance
that falls on the span its checker reads, and the share per part of the response.
"""
from __future__ import annotations

import json
import re

from tasks.base import Example
from tasks.tools.prompt import CALL_CLOSE, CALL_OPEN, RESPONSE_CLOSE, RESPONSE_OPEN, THINK_CLOSE, THINK_OPEN

_TAGS = re.compile("|".join(re.escape(t) for t in (THINK_OPEN, THINK_CLOSE, CALL_OPEN,
                                                    CALL_CLOSE, RESPONSE_OPEN, RESPONSE_CLOSE)))


def _inside(text: str, open_tag: str, close_tag: str) -> list[tuple[int, int]]:
    out = []
    for m in re.finditer(re.escape(open_tag) + r"(.*?)" + re.escape(close_tag), text, re.S):
        out.append((m.start(1), m.end(1)))
    return out


_NAME = re.compile(r'"name"\s*:\s*')
_PARAMS = re.compile(r'"parameters"\s*:\s*')


def call_values(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """In the tool-call block ``text[start:end]``: the character spans of what the
    correctness check compares, each call's name value and each argument's value (JSON
    values, decoded in place). A line that is not a call object counts whole (the check reads
    it and fails on it)."""
    decoder = json.JSONDecoder()
    out: list[tuple[int, int]] = []
    pos = start
    for line in text[start:end].split("\n"):
        lo, hi = pos, pos + len(line)
        pos = hi + 1
        stripped = line.strip()
        if not stripped:
            continue
        try:
            call = json.loads(stripped)
        except ValueError:
            call = None
        if not isinstance(call, dict) or "name" not in call:
            first = lo + len(line) - len(line.lstrip())
            out.append((first, first + len(stripped)))
            continue
        for pattern, want in ((_NAME, None), (_PARAMS, dict)):
            m = pattern.search(text, lo, hi)
            if not m:
                continue
            value, stop = decoder.raw_decode(text, m.end())
            if want is None:
                out.append((m.end(), stop))
            elif isinstance(value, dict):  # each argument's value inside the object
                inner = m.end() + 1
                for key in value:
                    k = re.compile(re.escape(json.dumps(key)) + r"\s*:\s*").search(
                        text, inner, stop)
                    if k:
                        _, vstop = decoder.raw_decode(text, k.end())
                        out.append((k.end(), vstop))
                        inner = vstop
    return out


def spans(example: Example, response: str) -> dict[str, list[tuple[int, int]]]:
    """Character spans: per reward (``format``: the tags its layout check reads;
    ``correctness``: what its comparison reads in the tool-call block, each call's name and
    argument values) and per part (``tags``, ``reasoning``, ``answer``)."""
    tags = [(m.start(), m.end()) for m in _TAGS.finditer(response)]
    calls = _inside(response, CALL_OPEN, CALL_CLOSE)
    answer = calls + _inside(response, RESPONSE_OPEN, RESPONSE_CLOSE)
    values = [v for s, e in calls for v in call_values(response, s, e)]
    return {"format": tags, "correctness": values, "tags": tags,
            "reasoning": _inside(response, THINK_OPEN, THINK_CLOSE), "answer": answer}


PARTS = ("tags", "reasoning", "answer")
