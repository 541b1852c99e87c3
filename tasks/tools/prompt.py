"""The ToolRL / RLLA prompt format: the system prompt, the user turn, and the tool-call parser.

RLLA (the ToolRL training data, qiancheng0/ToolRL ``dataset/rlla_4k``) stores each prompt as two
chat messages:

* a **system** message: a one-line role statement, an ``**Available Tools**`` section listing every
  tool as ``N. Name: ...`` / ``Description: ...`` / ``Parameters: <JSON>``, then the output format
  and a few rules;
* a **user** message: ``**Dialogue Records History**`` followed by the conversation so far, user
  turns as ``<user> ... </user>``, earlier assistant outputs verbatim, tool results as
  ``<obs> ... </obs>``, blocks separated by a blank line.

The assistant answers ``<think> ... </think>`` then a ``<tool_call>`` block with one JSON object
``{"name": ..., "parameters": {...}}`` per line, and/or a ``<response> ... </response>``.

:func:`build_messages` produces prompts with that structure for our own tools (the synthetic
generator) and for BFCL. The wording of the instructions is ours (the RLLA loader keeps the
data's own system prompt untouched); the tags, the JSON-per-line convention and the section
layout follow RLLA so a model trained on either sees the same format.
"""
from __future__ import annotations

import json
from typing import Any, Iterable, Mapping, Sequence

# The tags of the format. Kept as constants so rewards, parser and generator agree.
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
RESPONSE_OPEN, RESPONSE_CLOSE = "<response>", "</response>"

HISTORY_HEADER = "**Dialogue Records History**"

# The output-format instructions. They are part of every system prompt we build and are also
# the (non-privileged) verifier information of the ``format`` reward.
FORMAT_SPEC = (
    "**Output Format**\n"
    "```plaintext\n"
    "<think> your reasoning </think>\n"
    "<tool_call>\n"
    '{"name": "tool name", "parameters": {"argument name": "argument value"}}\n'
    '{"name": "another tool", "parameters": {}}\n'
    "</tool_call>\n"
    "<response> your reply to the user </response>\n"
    "```\n"
    "\n"
    "**Rules**\n"
    "1. Always start with <think> ... </think>, then give a <tool_call> block, a <response>, "
    "or both, each at most once.\n"
    '2. In <tool_call>, write one JSON object per line with a "name" and a "parameters" '
    "dictionary (use {} when a tool takes no arguments); several lines make several calls.\n"
    "3. Earlier turns are listed in the dialogue history; tool results appear as "
    "<obs> ... </obs>."
)

SYSTEM_INTRO = (
    "You are a helpful assistant that solves the user's task by calling tools and/or replying "
    "in a structured format."
)


def _tool_parameters(tool: Mapping[str, Any]) -> Any:
    """The parameter listing shown for one tool.

    JSON-schema style tools (BFCL, our toolbox: ``{"type": "dict", "properties": {...},
    "required": [...]}``) are shown by their ``properties`` only, as ToolRL's own BFCL handler
    does; RLLA-style tools already give a ``{param: {description, type, default}}`` mapping and
    are shown as they are.
    """
    params = tool.get("parameters", {}) or {}
    if isinstance(params, Mapping) and "properties" in params:
        return params.get("properties") or {}
    return params


def render_tools(tools: Sequence[Mapping[str, Any]]) -> str:
    """The numbered tool list of the ``**Available Tools**`` section (RLLA's layout)."""
    entries = []
    for i, tool in enumerate(tools, start=1):
        entries.append(
            f"{i}. Name: {tool['name']}\n"
            f"Description: {tool.get('description', '')}\n"
            f"Parameters: {json.dumps(_tool_parameters(tool), ensure_ascii=False)}"
        )
    return "\n".join(entries)


def system_prompt(tools: Sequence[Mapping[str, Any]]) -> str:
    """The system message: role line, available tools, then :data:`FORMAT_SPEC`."""
    return (
        f"{SYSTEM_INTRO}\n\n"
        "**Available Tools**\n"
        "You can call the following tools:\n"
        f"{render_tools(tools)}\n\n"
        f"{FORMAT_SPEC}"
    )


def _history_blocks(history: Iterable[Mapping[str, str]]) -> list[str]:
    """Render earlier turns the way RLLA's user messages do.

    User turns become ``<user> ... </user>``; assistant turns are copied verbatim (they already
    carry their own tags); a tool result is appended to the preceding block as ``<obs> ... </obs>``
    (RLLA puts the observation right under the call that produced it). System messages are not
    part of the history.
    """
    blocks: list[str] = []
    for message in history:
        role, content = message.get("role"), str(message.get("content", "")).strip()
        if role == "user":
            blocks.append(f"<user> {content} </user>")
        elif role == "assistant":
            blocks.append(content)
        elif role in ("tool", "observation", "obs"):
            obs = f"<obs> {content} </obs>"
            if blocks:
                blocks[-1] = f"{blocks[-1]}\n{obs}"
            else:
                blocks.append(obs)
        elif role == "system":
            continue
        else:
            raise ValueError(f"unknown role {role!r} in dialogue history")
    return blocks


def user_prompt(user_text: str, history: Iterable[Mapping[str, str]] | None = None) -> str:
    """The user message: the history header, earlier turns, then the current user turn."""
    blocks = _history_blocks(history or ())
    blocks.append(f"<user> {user_text.strip()} </user>")
    return HISTORY_HEADER + "\n" + "\n\n".join(blocks)


def build_messages(
    tools: Sequence[Mapping[str, Any]],
    user_text: str,
    history: Iterable[Mapping[str, str]] | None = None,
) -> tuple[dict, ...]:
    """System + user chat messages in the ToolRL format.

    ``tools``: dicts with ``name``, ``description`` and ``parameters`` (a JSON schema with
    ``properties``, or an RLLA-style parameter mapping). ``history``: earlier chat messages
    (``{"role": "user" | "assistant" | "tool", "content": ...}``) shown before the current turn.
    """
    return (
        {"role": "system", "content": system_prompt(tools)},
        {"role": "user", "content": user_prompt(user_text, history)},
    )


# ---------------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------------

def extract_call_block(response: str) -> str | None:
    """The text of the first ``<tool_call>`` block, or None when either tag is absent.

    Mirrors ToolRL's ``rlla.py`` exactly: both tags must occur somewhere in the response, and the
    block is the text after the first ``<tool_call>`` up to whichever comes first of a second
    ``<tool_call>``, a ``</tool_call>`` or the end of the text, stripped.
    """
    if not isinstance(response, str) or CALL_OPEN not in response or CALL_CLOSE not in response:
        return None
    return response.split(CALL_OPEN)[1].split(CALL_CLOSE)[0].strip()


def parse_json_lines(block: str) -> list | None:
    """``json.loads`` of every line of a call block; None when any line is not JSON.

    An empty block or a blank line is not JSON (as in ToolRL, which splits on newlines and parses
    every piece). The values are returned as parsed, whatever their JSON type; never ``eval``.
    """
    values = []
    for line in block.split("\n"):
        try:
            values.append(json.loads(line))
        except (ValueError, RecursionError):  # JSONDecodeError, int-digit limit, deep nesting
            return None
    return values


def is_call(value: Any) -> bool:
    """True for a well-formed call object: a dict with a string ``name`` and dict ``parameters``."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("name"), str)
        and isinstance(value.get("parameters"), dict)
    )


def parse_tool_calls(response: str) -> list[dict] | None:
    """The tool calls of a response as ``[{"name": ..., "parameters": {...}}, ...]``.

    None when the ``<tool_call>`` block is missing, a line is not JSON, or a line is not a call
    object (:func:`is_call`). Never raises on any string input.
    """
    block = extract_call_block(response)
    if block is None:
        return None
    values = parse_json_lines(block)
    if values is None or not all(is_call(v) for v in values):
        return None
    return values


def render_calls(calls: Sequence[Mapping[str, Any]]) -> str:
    """A ``<tool_call>`` block for the given calls, one JSON object per line (RLLA's layout)."""
    lines = "\n".join(
        json.dumps({"name": c["name"], "parameters": c["parameters"]}, ensure_ascii=False)
        for c in calls
    )
    return f"{CALL_OPEN}\n{lines}\n{CALL_CLOSE}"


def render_output(think: str, calls: Sequence[Mapping[str, Any]] | None = None,
                  response: str | None = None) -> str:
    """A complete RLLA-format assistant output: think, then the call block and/or a response."""
    parts = [f"{THINK_OPEN} {think.strip()} {THINK_CLOSE}"]
    if calls:
        parts.append(render_calls(calls))
    if response is not None:
        parts.append(f"{RESPONSE_OPEN} {response.strip()} {RESPONSE_CLOSE}")
    return "\n".join(parts)
