"""The answer layout of text-to-SQL responses: the format check and reading the query back.

Standard library plus sqlglot only: the sandbox worker imports this module by file, without the
package, so that checking a response runs in parallel with its execution.

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

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
TAGS = (THINK_OPEN, THINK_CLOSE, ANSWER_OPEN, ANSWER_CLOSE)

FORMAT_SPEC = (
    "Answer in this layout: first reason step by step inside <think> </think>; then give "
    "exactly one SQLite query that answers the question inside <answer> </answer>, written as "
    "a ```sql code block. Write nothing after </answer>."
)

_LAYOUT = re.compile(r"\A\s*<think>(?P<think>.*?)</think>\s*<answer>(?P<answer>.*?)</answer>\s*\Z",
                     re.S)
_SQL_BLOCK = re.compile(r"```[ \t]*sql[ \t]*\n?(?P<body>.*?)```", re.S | re.I)
_ANY_BLOCK = re.compile(r"```[ \t]*(?:[A-Za-z]*)[ \t]*\n?(?P<body>.*?)```", re.S)
ANSWER_RE = re.compile(r"<answer>(?P<answer>.*?)</answer>", re.S)


def extract_sql(response: str) -> str | None:
    """The query a response gives (see module docstring); None when there is none."""
    answer = ANSWER_RE.findall(response)
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


def render_answer(think: str, sql: str) -> str:
    """A response in the layout of FORMAT_SPEC (what ``format_ok`` accepts)."""
    return f"{THINK_OPEN} {think.strip()} {THINK_CLOSE}\n{ANSWER_OPEN}\n```sql\n{sql.strip()}\n```" \
           f"\n{ANSWER_CLOSE}"


def tables_of(sql: str) -> list[str]:
    """The table names a query reads, in order of first use ([] when it cannot be parsed)."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except (SqlglotError, ValueError):
        return []
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    names = [t.name for t in tree.find_all(exp.Table) if t.name and t.name.lower() not in ctes]
    return list(dict.fromkeys(names))


def demonstration(example) -> str:
    """The gold query of a training example in the answer layout, for the supervised warm
    start. The reasoning line is short and true of the query: which tables it reads."""
    sql = example.reference.strip().rstrip(";").strip()
    tables = tables_of(sql)
    if len(tables) == 1:
        think = f"The question is answered from the {tables[0]} table."
    elif tables:
        think = f"The question needs the {', '.join(tables[:-1])} and {tables[-1]} tables."
    else:
        think = "I will write one query that answers the question."
    return render_answer(think, sql)
