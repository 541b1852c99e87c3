"""Which characters of a tool-calling response each verifier reads, and the response's parts.

Used by MRTPO's diagnostics (paper Table 4 and Fig. 6): the share of a reward's replay distance
that falls on the span its checker reads, and the share per part of the response.
"""
from __future__ import annotations

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


def spans(example: Example, response: str) -> dict[str, list[tuple[int, int]]]:
    """Character spans: per reward (``format``: the tags its layout check reads;
    ``correctness``: the tool-call block it parses) and per part (``tags``, ``reasoning``,
    ``answer``)."""
    tags = [(m.start(), m.end()) for m in _TAGS.finditer(response)]
    calls = _inside(response, CALL_OPEN, CALL_CLOSE)
    answer = calls + _inside(response, RESPONSE_OPEN, RESPONSE_CLOSE)
    return {"format": tags, "correctness": calls, "tags": tags,
            "reasoning": _inside(response, THINK_OPEN, THINK_CLOSE), "answer": answer}


PARTS = ("tags", "reasoning", "answer")
