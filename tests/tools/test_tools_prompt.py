"""Prompt builder and tool-call parser of the ToolRL format."""
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.tools.prompt import (
    FORMAT_SPEC,
    build_messages,
    extract_call_block,
    parse_tool_calls,
    render_output,
)

TOOL = {
    "name": "get_weather",
    "description": "Current weather.",
    "parameters": {"type": "dict", "properties": {"city": {"type": "string"}},
                   "required": ["city"]},
}


def test_build_messages_layout():
    system, user = build_messages([TOOL], "Weather in Oslo?")
    assert system["role"] == "system" and user["role"] == "user"
    assert "**Available Tools**" in system["content"]
    assert '1. Name: get_weather\nDescription: Current weather.\nParameters: {"city": ' \
        '{"type": "string"}}' in system["content"]
    assert system["content"].endswith(FORMAT_SPEC)
    assert user["content"] == "**Dialogue Records History**\n<user> Weather in Oslo? </user>"


def test_rlla_style_parameters_are_shown_as_given():
    tool = {"name": "f", "description": "d",
            "parameters": {"x": {"description": "an x", "type": "int", "default": ""}}}
    system, _ = build_messages([tool], "hi")
    assert 'Parameters: {"x": {"description": "an x", "type": "int", "default": ""}}' in \
        system["content"]


def test_history_rendering():
    history = [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": '<think> t </think>\n<tool_call>\n{"name": "get_weather", '
                                         '"parameters": {"city": "Oslo"}}\n</tool_call>'},
        {"role": "tool", "content": '{"temp": 3}'},
    ]
    _, user = build_messages([TOOL], "And in Rome?", history)
    assert user["content"] == (
        "**Dialogue Records History**\n<user> Weather in Oslo? </user>\n\n"
        '<think> t </think>\n<tool_call>\n{"name": "get_weather", "parameters": {"city": "Oslo"}}'
        '\n</tool_call>\n<obs> {"temp": 3} </obs>\n\n<user> And in Rome? </user>'
    )


def test_parse_roundtrip():
    calls = [{"name": "a.b", "parameters": {"x": 1}}, {"name": "c", "parameters": {}}]
    assert parse_tool_calls(render_output("t", calls)) == calls


def test_parse_missing_or_broken():
    assert parse_tool_calls("no tags at all") is None
    assert parse_tool_calls("<tool_call>\n{}") is None  # no closing tag
    assert parse_tool_calls("<tool_call>\n{bad json}\n</tool_call>") is None
    assert parse_tool_calls('<tool_call>\n["a", 1]\n</tool_call>') is None  # not an object
    assert parse_tool_calls('<tool_call>\n{"name": "a"}\n</tool_call>') is None  # no parameters
    assert parse_tool_calls('<tool_call>\n{"name": 3, "parameters": {}}\n</tool_call>') is None
    assert parse_tool_calls("<tool_call>\n\n</tool_call>") is None  # empty block


def test_parse_never_evaluates():
    payload = "__import__('os').system('touch /tmp/should_not_exist_tools_test')"
    text = f'<tool_call>\n{payload}\n</tool_call>'
    assert parse_tool_calls(text) is None
    literal = "<tool_call>\n{'name': 'a', 'parameters': {}}\n</tool_call>"  # Python, not JSON
    assert parse_tool_calls(literal) is None


def test_parse_huge_and_deep_inputs():
    huge = "<tool_call>\n" + '{"name": "a", "parameters": {"x": "' + "y" * 2_000_000 + '"}}' \
        + "\n</tool_call>"
    assert parse_tool_calls(huge)[0]["parameters"]["x"] == "y" * 2_000_000
    deep = "<tool_call>\n" + "[" * 100_000 + "]" * 100_000 + "\n</tool_call>"
    assert parse_tool_calls(deep) is None
    big_int = '<tool_call>\n{"name": "a", "parameters": {"x": ' + "9" * 10_000 + "}}\n</tool_call>"
    assert parse_tool_calls(big_int) is None
    assert parse_tool_calls("<tool_call>" * 50_000 + "</tool_call>") is None


def test_first_block_is_used():
    text = ('<tool_call>\n{"name": "a", "parameters": {}}\n</tool_call>\n'
            '<tool_call>\n{"name": "b", "parameters": {}}\n</tool_call>')
    assert parse_tool_calls(text) == [{"name": "a", "parameters": {}}]
    assert extract_call_block("<tool_call> x <tool_call> y </tool_call>") == "x"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('<>/{}[]":,\n tool_cal1e"nampr\\')), max_size=200))
def test_parser_never_raises(text):
    result = parse_tool_calls(text)
    assert result is None or all(isinstance(c, dict) for c in result)


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=8))
def test_parser_on_arbitrary_json_lines(value):
    text = "<tool_call>\n" + json.dumps(value) + "\n</tool_call>"
    result = parse_tool_calls(text)
    is_call = (isinstance(value, dict) and isinstance(value.get("name"), str)
               and isinstance(value.get("parameters"), dict))
    assert (result == [value]) if is_call else (result is None)
