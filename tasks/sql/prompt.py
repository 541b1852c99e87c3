"""The text-to-SQL prompt, its answer layout, and reading the query back out of a response.

Layout asked for (the format reward checks it)::

    <think> reasoning </think>
    <answer>
    ```sql
    ONE SQLite QUERY
    ```
    </answer>

The query that is executed is taken leniently, so that the executability and execution rewards
stay informative while the layout is still being learned: the last ```sql block inside
<answer>, else the whole <answer> body, else the last ```sql (or plain ```) block anywhere in
the response. No query is found only when none of these exists.
"""
from __future__ import annotations

import re

from tasks.base import Example

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
TAGS = (THINK_OPEN, THINK_CLOSE, ANSWER_OPEN, ANSWER_CLOSE)

FORMAT_SPEC = (
    "Answer in this layout: first reason step by step inside <think> </think>; then give "
    "exactly one SQLite query that answers the question inside <answer> </answer>, written as "
    "a ```sql code block. Write nothing after </answer>."
)
SYSTEM_PROMPT = "You are an expert SQLite programmer. " + FORMAT_SPEC

_LAYOUT = re.compile(r"\A\s*<think>(?P<think>.*?)</think>\s*<answer>(?P<answer>.*?)</answer>\s*\Z",
                     re.S)
_SQL_BLOCK = re.compile(r"```[ \t]*sql[ \t]*\n?(?P<body>.*?)```", re.S | re.I)
_ANY_BLOCK = re.compile(r"```[ \t]*(?:[A-Za-z]*)[ \t]*\n?(?P<body>.*?)```", re.S)
_ANSWER = re.compile(r"<answer>(?P<answer>.*?)</answer>", re.S)


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


def extract_sql(response: str) -> str | None:
    """The query a response gives (see module docstring); None when there is none."""
    answer = _ANSWER.findall(response)
    if answer:
        body = answer[-1]
        blocks = _SQL_BLOCK.findall(body)
        sql = blocks[-1] if blocks else body
    else:
        blocks = _SQL_BLOCK.findall(response) or _ANY_BLOCK.findall(response)
        if not blocks:
            return None
        sql = blocks[-1]
    sql = sql.strip()
    return sql or None


def count_statements(sql: str) -> int:
    """Statements in ``sql`` by its tokens (semicolons inside strings or comments do not count);
    -1 when it cannot be tokenised."""
    from sqlglot.errors import TokenError
    from sqlglot.tokens import Tokenizer, TokenType

    try:
        tokens = Tokenizer().tokenize(sql)
    except (TokenError, ValueError):
        return -1
    count, open_statement = 0, False
    for tok in tokens:
        if tok.token_type == TokenType.SEMICOLON:
            count += open_statement
            open_statement = False
        else:
            open_statement = True
    return count + open_statement


def format_ok(response: str) -> bool:
    """The layout of FORMAT_SPEC: think then answer, each tag exactly once, nothing after
    </answer>, non-empty reasoning, and exactly one ```sql block holding one statement."""
    if any(response.count(tag) != 1 for tag in TAGS):
        return False
    m = _LAYOUT.match(response)
    if m is None or not m.group("think").strip():
        return False
    blocks = _SQL_BLOCK.findall(m.group("answer"))
    if len(blocks) != 1:
        return False
    outside = _SQL_BLOCK.sub("", m.group("answer")).strip()
    return not outside and count_statements(blocks[0]) == 1


def spans(example: Example, response: str) -> dict[str, list[tuple[int, int]]]:
    """Character spans for token-level diagnostics: per reward (``format``: the tags and code
    fences its check reads; ``executable`` and ``execution``: the extracted query) and per part
    (``tags``, ``reasoning``, ``answer``)."""
    tags = [(m.start(), m.end()) for m in re.finditer("|".join(map(re.escape, TAGS)) + "|```(?:sql)?",
                                                      response)]
    reasoning = [(m.start(1), m.end(1)) for m in re.finditer(r"<think>(.*?)</think>", response, re.S)]
    answer = [(m.start(1), m.end(1)) for m in _ANSWER.finditer(response)]
    sql = extract_sql(response)
    query: list[tuple[int, int]] = []
    if sql:
        start = response.rfind(sql)
        query = [(start, start + len(sql))]
    return {"format": tags, "executable": query, "execution": query, "tags": tags,
            "reasoning": reasoning, "answer": answer}


PARTS = ("tags", "reasoning", "answer")
