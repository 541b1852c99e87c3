"""Which characters of a response an instruction's checker reads (paper Table 4).

For the constraint types the paper's Table 4 reports, the part of the response each checker
reads, as character spans; for every other instruction there is no span (its checker reads
the whole response, or a property such as a count, that no span describes):

- end phrase (``startend:end_checker``): the phrase at the end of the response;
- title (``detectable_format:title``): every ``<<title>>``;
- quotation (``startend:quotation``): the opening and closing double quote;
- keyword (``keywords:existence``, ``keywords:frequency``): every occurrence of the keyword(s),
  case-insensitive, as the checkers search for them.

No IFEval or IFBench checker that runs offline tests a start phrase, so the paper's "Start
phrase" row has no instances here.
"""
from __future__ import annotations

import re
from typing import Any, Mapping

from tasks.base import Example

TYPES = {
    "startend:end_checker": "end_phrase",
    "detectable_format:title": "title",
    "startend:quotation": "quotation",
    "keywords:existence": "keyword",
    "keywords:frequency": "keyword",
}
_TITLE = re.compile(r"<<[^\n]+>>")


def checker_span(instruction_id: str, kwargs: Mapping[str, Any] | None, response: str
                 ) -> list[tuple[int, int]]:
    """The character spans the checker of this instruction reads ([] when none is defined,
    or when the response lacks the part, e.g. no title)."""
    kwargs = kwargs or {}
    if instruction_id == "startend:end_checker":
        phrase = str(kwargs.get("end_phrase") or "").strip()
        body = response.rstrip().rstrip('"')
        start = body.lower().rfind(phrase.lower()) if phrase else -1
        return [(start, start + len(phrase))] if start >= 0 and body[start:].strip().lower() \
            == phrase.lower() else []
    if instruction_id == "detectable_format:title":
        return [(m.start(), m.end()) for m in _TITLE.finditer(response)]
    if instruction_id == "startend:quotation":
        s = response.strip()
        if len(s) < 2 or s[0] != '"' or s[-1] != '"':
            return []
        first = response.index('"')
        last = response.rindex('"')
        return [(first, first + 1), (last, last + 1)]
    if instruction_id in ("keywords:existence", "keywords:frequency"):
        words = kwargs.get("keywords") or ([kwargs["keyword"]] if kwargs.get("keyword") else [])
        return sorted((m.start(), m.end()) for w in words if w
                      for m in re.finditer(re.escape(str(w)), response, re.IGNORECASE))
    return []


def spans(example: Example, response: str) -> dict:
    """Per reward slot ``c<k>`` of a constraint with a defined span: its characters; and
    under ``types`` the slot -> constraint type of those slots."""
    ref = example.reference or {}
    out: dict = {"types": {}}
    for k, (iid, kwargs) in enumerate(zip(ref.get("instruction_id_list", ()),
                                          ref.get("kwargs", ())), 1):
        if iid in TYPES:
            found = checker_span(iid, kwargs, response)
            if found:
                out[f"c{k}"] = found
                out["types"][f"c{k}"] = TYPES[iid]
    return out
