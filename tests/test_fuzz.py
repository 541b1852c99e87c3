"""Model output is hostile input: every reward function and response parser of the three
families, fed random, huge, deeply nested, invalid-UTF-8 and regex-pathological responses,
never raises, stays inside its declared bounds (or is NaN where declared), and finishes in
bounded time. Examples are bounded and derandomised, so the suite is the same in every CI run.
"""
import math
import time

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tasks import TASKS

FUZZ = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SLOW_S = 10.0  # per response, generous: what is asserted is "bounded", not a speed

# pieces of the three layouts, so that random responses often look nearly right
TOKENS = ["<tool_call>", "</tool_call>", "<think>", "</think>", "<answer>", "</answer>",
          "```sql", "```json", "```", "{", "}", "[", "]", '"name":', '"arguments":', ":", ",",
          "SELECT", "FROM", "WHERE", "*", "'", '"', "\\", ";", "--", "/*", "(", ")", "\n",
          "<<", ">>", "P.S.", "***", "#", "\udcff", "\x00", "\u202e", "🙂", "a" * 50]


def pathological() -> list[str]:
    """Responses chosen to hit worst cases: size, nesting, backtracking, bad code points."""
    return [
        "",
        "\udcff\udcfe\ud800" * 1000,  # lone surrogates: invalid UTF-8 decoded with surrogateescape
        "[" * 50_000 + "]" * 50_000,  # deep nesting for JSON/AST parsers
        "{" * 20_000,
        "<tool_call>" + '{"name": "f", "arguments": ' * 5_000 + "</tool_call>",
        "<tool_call>\n" * 20_000,
        "(" * 30_000 + "SELECT 1" + ")" * 30_000,
        "<think>" + "a" * 200_000 + "</think><answer>```sql\nSELECT 1\n```</answer>",
        "a" * 1_000_000 + "!",  # regex backtracking bait
        "x, " * 200_000,
        "<answer>" * 10_000 + "</answer>" * 10_000,
        "```sql\n" + "SELECT " + ",".join(["a+1*(b-2)"] * 100_000) + " FROM t\n```",
        "*" * 100_000,
        "\n" * 100_000,
        "P.S." * 50_000,
        '"' * 100_000,
    ]


responses = st.one_of(
    st.text(max_size=2_000),
    st.lists(st.sampled_from(TOKENS), max_size=200).map("".join),
    st.lists(st.one_of(st.sampled_from(TOKENS), st.text(max_size=20)), max_size=100)
    .map("".join),
)


def check_rewards(task, examples, response: str) -> None:
    t0 = time.monotonic()
    rows = task.compute_rewards(examples, [response] * len(examples))  # checks the bounds
    assert time.monotonic() - t0 < SLOW_S * len(examples)
    for row in rows:
        assert len(row) == len(task.rewards)
        for reward, value in zip(task.rewards, row):
            assert isinstance(value, float)
            assert math.isnan(value) or reward.lo <= value <= reward.hi


@pytest.fixture(scope="module")
def families():
    """One task per family and a few of its examples (the instruction ones with different
    constraint types)."""
    out = {}
    for name, n in (("bfcl", 4), ("ifeval", 6), ("ifbench", 4), ("spider-mini", 2)):
        task = TASKS.get(name)
        out[name] = (task, task.load_eval(None)[:n])
    return out


@pytest.mark.parametrize("name", ["bfcl", "ifeval", "ifbench"])
def test_rewards_on_random_responses(families, name):
    task, examples = families[name]

    @FUZZ
    @given(responses)
    def run(response):
        check_rewards(task, examples, response)

    run()


def test_sql_rewards_on_random_responses(families):
    task, examples = families["spider-mini"]

    @settings(FUZZ, max_examples=15)
    @given(responses)
    def run(response):
        check_rewards(task, examples[:1], response)

    run()


@pytest.mark.parametrize("name", ["bfcl", "ifeval", "ifbench", "spider-mini"])
def test_rewards_and_scorers_on_pathological_responses(families, name):
    task, examples = families[name]
    for response in pathological():
        check_rewards(task, examples[:2], response)
    t0 = time.monotonic()
    scored = task.score(examples[:2], pathological()[:2])
    assert time.monotonic() - t0 < 2 * SLOW_S
    assert all(isinstance(v, (int, float)) for v in scored["metrics"].values())


def test_parsers_on_random_and_pathological_text():
    from tasks.sql.layout import count_statements, extract_sql, format_ok
    from tasks.tools.bfcl import decode
    from tasks.tools.prompt import extract_call_block, parse_tool_calls
    from tasks.tools.rewards import assistant_text

    def one(text):
        t0 = time.monotonic()
        assert isinstance(format_ok(text), bool)
        sql = extract_sql(text)
        assert sql is None or isinstance(sql, str)
        assert count_statements(text[:20_000]) >= -1
        assert isinstance(assistant_text(text), str)
        block = extract_call_block(text)
        assert block is None or isinstance(block, str)
        calls = parse_tool_calls(text)  # None when it cannot be parsed, never an exception
        assert calls is None or isinstance(calls, list)
        decoded = decode(text)
        assert decoded is None or isinstance(decoded, list)
        assert time.monotonic() - t0 < SLOW_S

    @FUZZ
    @given(responses)
    def run(text):
        one(text)

    run()
    for text in pathological():
        one(text)
