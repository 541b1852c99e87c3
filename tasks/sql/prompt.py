"""The text-to-SQL prompt and the character spans each verifier reads (layout and format check
live in :mod:`tasks.sql.layout`)."""
from __future__ import annotations

import re

from tasks.base import Example
from tasks.sql.layout import ANSWER_RE, FORMAT_SPEC, TAGS, extract_sql

SYSTEM_PROMPT = "You are an expert SQLite programmer. " + FORMAT_SPEC


def user_turn(schema: str, question: str, evidence: str = "") -> str:
    """The user message: the schema, BIRD's external knowledge when given, the question."""
    parts = [f"Database schema:\n{schema}"]
    if evidence.strip():
        parts.append(f"External knowledge: {evidence.strip()}")
    parts.append(f"Question: {question.strip()}")
    return "\n\n".join(parts)


def build_messages(schema: str, question: str, evidence: str = "") -> tuple[dict, ...]:
    return ({"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": user_turn(schema, question, evidence)})


def spans(example: Example, response: str) -> dict[str, list[tuple[int, int]]]:
    """Character spans for token-level diagnostics: per reward (``format``: the tags and code
    fences its check reads; ``executable`` and ``execution``: the extracted query) and per part
    (``tags``, ``reasoning``, ``answer``)."""
    tags = [(m.start(), m.end()) for m in re.finditer("|".join(map(re.escape, TAGS)) + "|```(?:sql)?",
                                                      response)]
    reasoning = [(m.start(1), m.end(1)) for m in re.finditer(r"<think>(.*?)</think>", response, re.S)]
    answer = [(m.start(1), m.end(1)) for m in ANSWER_RE.finditer(response)]
    sql = extract_sql(response)
    query: list[tuple[int, int]] = []
    if sql:
        start = response.rfind(sql)
        query = [(start, start + len(sql))]
    return {"format": tags, "executable": query, "execution": query, "tags": tags,
            "reasoning": reasoning, "answer": answer}


PARTS = ("tags", "reasoning", "answer")
