"""The text-to-SQL prompt and the character spans each verifier reads (layout and format check
live in :mod:`tasks.sql.layout`)."""
from __future__ import annotations

import difflib
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


_SQL_TOKEN = re.compile(r"'(?:[^']|'')*'|\"[^\"]*\"|`[^`]*`|\w+|[^\s\w]")
MIN_ALIGNMENT = 0.5  # below this token similarity the two queries are not aligned at all


def query_diff(pred: str, gold: str, offset: int = 0) -> list[tuple[int, int]]:
    """The character spans (shifted by ``offset``) of the predicted query's tokens that differ
    from the gold query's under a token alignment (difflib, case-insensitive); [] when the
    queries agree token for token, or when they share too little to align (similarity below
    ``MIN_ALIGNMENT``)."""
    a = [(m.group().lower(), m.start(), m.end()) for m in _SQL_TOKEN.finditer(pred)]
    b = [m.group().lower() for m in _SQL_TOKEN.finditer(gold)]
    matcher = difflib.SequenceMatcher(None, [t for t, _, _ in a], b, autojunk=False)
    if matcher.ratio() < MIN_ALIGNMENT:
        return []
    return [(offset + a[i][1], offset + a[j - 1][2])
            for tag, i, j, _, _ in matcher.get_opcodes() if tag in ("replace", "insert") and
            j > i]


def spans(example: Example, response: str) -> dict[str, list[tuple[int, int]]]:
    """Character spans for token-level diagnostics: per reward (``format``: the tags and code
    fences its check reads; ``executable`` and ``execution``: the extracted query), where the
    query differs from the gold one (``execution:diff``, :func:`query_diff`), and per part
    (``tags``, ``reasoning``, ``answer``)."""
    tags = [(m.start(), m.end()) for m in re.finditer("|".join(map(re.escape, TAGS)) + "|```(?:sql)?",
                                                      response)]
    reasoning = [(m.start(1), m.end(1)) for m in re.finditer(r"<think>(.*?)</think>", response, re.S)]
    answer = [(m.start(1), m.end(1)) for m in ANSWER_RE.finditer(response)]
    sql = extract_sql(response)
    query: list[tuple[int, int]] = []
    diff: list[tuple[int, int]] = []
    if sql:
        start = response.rfind(sql)
        query = [(start, start + len(sql))]
        gold = example.reference if example is not None else None
        if isinstance(gold, str) and gold.strip():
            diff = query_diff(sql, gold, start)
    return {"format": tags, "executable": query, "execution": query, "execution:diff": diff,
            "tags": tags, "reasoning": reasoning, "answer": answer}


PARTS = ("tags", "reasoning", "answer")
