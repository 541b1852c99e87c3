"""ToolRL's two rewards for tool calling: ``format`` in {0, 1} and ``correctness`` in [-3, 3].

These follow ``verl/utils/reward_score/rlla.py`` of qiancheng0/ToolRL with its default settings
(no environment switches: no length reward, no refined/coarse/intermediate variants, no
schedule). The reference of an example is the RLLA gold output string, e.g.
``"<think> ... </think>\\n<tool_call>\\n{...}\\n</tool_call>"``.

Semantics mirrored from rlla.py, on purpose (comments mark each):

* The response is first cut to the assistant turn (text after the last ``<|im_start|>assistant``
  and before the first ``<|im_end|>``) and stripped.
* ``format``: which regex applies depends on the tags of the **gold** answer. "Exactly once" is
  counted for ``<tool_call>``/``</tool_call>`` and ``<response>``/``</response>`` only; the
  ``<think>`` tags are constrained by the regex alone (a second ``<think>`` inside the first
  think span passes, as in ToolRL).
* ``correctness``: 0 when the gold has no ``<tool_call>``; -3 when the response lacks either call
  tag, when any line of its first call block is not JSON, or when scoring hits a malformed call
  (rlla.py wraps all of it in a bare ``except``); +3 on exact equality of the parsed call lists;
  otherwise ``6 * S / S_max - 3`` with the multiset-Jaccard score below.
"""
from __future__ import annotations

import re
from collections import Counter

from tasks.base import Example, Reward, VerifierInfo
from tasks.tools.prompt import (
    CALL_CLOSE,
    CALL_OPEN,
    FORMAT_SPEC,
    extract_call_block,
    parse_json_lines,
)

FORMAT_LO, FORMAT_HI = 0.0, 1.0
CORRECTNESS_LO, CORRECTNESS_HI = -3.0, 3.0

# One regex per combination of tags in the gold answer (DOTALL, no MULTILINE: ^ and $ anchor the
# whole stripped response).
_ONLY_RESPONSE = re.compile(r"^<think>.*?</think>\n<response>.*?</response>$", re.DOTALL)
_ONLY_CALL = re.compile(r"^<think>.*?</think>\n<tool_call>\n.*?\n</tool_call>$", re.DOTALL)
_CALL_AND_RESPONSE = re.compile(
    r"^<think>.*?</think>\n<tool_call>\n.*?\n</tool_call>\n<response>.*?</response>$", re.DOTALL
)
_ONLY_THINK = re.compile(r"^<think>.*?</think>$", re.DOTALL)


def assistant_text(response: str) -> str:
    """The assistant part of a decoded completion, stripped (rlla.py's Qwen/ChatML branch).

    Plain generated text (no chat markers) is returned stripped; a completion that still carries
    ChatML markers is cut to the last assistant turn and before its end marker.
    """
    return response.split("<|im_start|>assistant")[-1].split("<|im_end|>")[0].strip()


def gold_output(example: Example) -> str:
    """The RLLA-format gold output of an example.

    Training examples (RLLA, synthetic) carry it as ``reference``; benchmark examples whose
    reference is in another form (BFCL possible answers) may carry a rendered one in
    ``metadata["gold_output"]``.
    """
    if isinstance(example.reference, str):
        return example.reference
    gold = example.metadata.get("gold_output") if example.metadata else None
    if isinstance(gold, str):
        return gold
    raise TypeError(
        f"example {example.id!r}: ToolRL rewards need an RLLA-format gold output string as "
        f"reference (or metadata['gold_output']), got {type(example.reference).__name__}"
    )


def format_layout(gold: str) -> tuple[re.Pattern, tuple[str, ...]]:
    """The layout regex the gold answer's tags call for, and the tags that must occur exactly
    once (see module doc)."""
    has_call, has_response = CALL_OPEN in gold, "<response>" in gold
    if has_response and not has_call:
        return _ONLY_RESPONSE, ("<response>", "</response>")
    if has_call and not has_response:
        return _ONLY_CALL, (CALL_OPEN, CALL_CLOSE)
    if has_call and has_response:
        return _CALL_AND_RESPONSE, (CALL_OPEN, CALL_CLOSE, "<response>", "</response>")
    # Gold with neither tag: rlla.py only asks for a think span, with no counts.
    return _ONLY_THINK, ()


def format_score(gold: str, response: str) -> float:
    """1.0 when the response has the layout of the gold answer, else 0.0 (see module doc)."""
    text = assistant_text(response)
    pattern, once = format_layout(gold)
    # The tag counts are checked before the regex (rlla.py checks them after); the result is the
    # same and it keeps the regex away from pathological inputs that already fail the counts.
    ok = all(text.count(tag) == 1 for tag in once) and pattern.search(text) is not None
    return FORMAT_HI if ok else FORMAT_LO


def multiset_jaccard(a: list, b: list) -> float:
    """|A ∩ B| / |A ∪ B| over multisets; 1.0 for equal lists, 0.0 when either is empty.

    The equality shortcut comes first (as in rlla.py), so two empty lists score 1.0.
    """
    if a == b:
        return 1.0
    if not a or not b:
        return 0.0
    ca, cb = Counter(a), Counter(b)
    inter = sum(min(ca[k], cb[k]) for k in ca.keys() & cb.keys())
    union = len(a) + len(b) - inter
    return inter / union if union > 0 else 0.0


def call_match_score(gold_calls: list, pred_calls: list) -> float:
    """The correctness reward of parsed call lists; may raise on malformed predictions.

    ``S = J(gold names, pred names) + Σ_gold best(J(gold keys, pred keys) + #equal values)``,
    where each gold call takes the best-scoring not-yet-used predicted call of the same name
    (greedy, in gold order; a candidate is only taken when its score is > 0, as in rlla.py), and
    ``S_max = 1 + Σ_gold (1 + |gold params|)``. Returns ``6 * S / S_max - 3``.

    Malformed predicted calls raise (KeyError, TypeError, AttributeError) exactly where rlla.py's
    code would; the caller turns that into the minimum reward.
    """
    if gold_calls == pred_calls:
        return CORRECTNESS_HI
    gold_names = [call["name"] for call in gold_calls]
    pred_names = [call["name"] for call in pred_calls]  # raises on a non-dict or nameless call
    score = multiset_jaccard(gold_names, pred_names)
    s_max = 1.0
    used: set[int] = set()
    for gold in gold_calls:
        gold_params = gold["parameters"]
        s_max += 1.0 + len(gold_params)
        best_score, best_index = 0.0, -1
        for i, pred in enumerate(pred_calls):
            if i in used or pred["name"] != gold["name"]:
                continue
            pred_params = pred["parameters"]  # raises when a same-name call has no parameters
            key_score = multiset_jaccard(list(gold_params.keys()), list(pred_params.keys()))
            value_score = sum(
                1.0 for k, v in gold_params.items() if k in pred_params and pred_params[k] == v
            )
            total = key_score + value_score
            if total > best_score:
                best_score, best_index = total, i
        if best_index >= 0:
            used.add(best_index)
            score += best_score
    # Same expression as rlla.py: (max - min) * S / S_max + min.
    return (CORRECTNESS_HI - CORRECTNESS_LO) * score / s_max + CORRECTNESS_LO


def gold_call_block(gold: str) -> str | None:
    """The call block of a gold answer (None when it has no ``<tool_call>``).

    ToolRL reads the text after the first ``<tool_call>`` up to the first ``</tool_call>``. In
    some published rows (17 of the 400 of ``rlla_4k_raw/rlla_sft.json``) the reasoning itself
    mentions the tag ("... formatted within the <tool_call> tags ..."), so that reading starts
    inside the think span and is not JSON (ToolRL's ``compute_score`` raises on those rows).
    There the block read is the first one after the think span, i.e. the answer's own: on every
    row ToolRL can read, the two readings are the same block.
    """
    if CALL_OPEN not in gold:
        return None
    block = gold.split(CALL_OPEN)[1].split(CALL_CLOSE)[0]
    if parse_json_lines(block.strip()) is None and "</think>" in gold:
        answer = gold.split("</think>", 1)[1]
        if CALL_OPEN in answer:
            block = answer.split(CALL_OPEN)[1].split(CALL_CLOSE)[0]
    return block  # unstripped: the verifier text keeps the gold's own layout


def gold_calls(gold: str) -> list | None:
    """The parsed call lines of a gold answer (:func:`gold_call_block`); None when it has no
    ``<tool_call>``.

    Raises ValueError on a gold answer whose call block is not JSON lines (ToolRL cannot read
    it either; loaders validate gold answers up front so this does not happen in training).
    """
    block = gold_call_block(gold)
    if block is None:
        return None
    calls = parse_json_lines(block.strip())
    if calls is None:
        raise ValueError(f"gold tool-call block is not JSON lines: {block.strip()[:200]!r}")
    return calls


def correctness_score(gold: str, response: str) -> float:
    """ToolRL correctness of a response against a gold RLLA output (see module doc)."""
    gold_list = gold_calls(gold)
    if gold_list is None:
        return 0.0  # rlla.py: no reward signal when the gold answer makes no call
    block = extract_call_block(assistant_text(response))
    if block is None:
        return CORRECTNESS_LO
    pred_list = parse_json_lines(block)
    if pred_list is None:
        return CORRECTNESS_LO
    try:
        return call_match_score(gold_list, pred_list)
    except Exception:  # rlla.py: any failure while scoring a malformed prediction -> minimum
        return CORRECTNESS_LO


def _format_fn(example: Example, response: str) -> float:
    return format_score(gold_output(example), response)


def _correctness_fn(example: Example, response: str) -> float:
    return correctness_score(gold_output(example), response)


FORMAT_REWARD = Reward(
    name="format",
    lo=FORMAT_LO,
    hi=FORMAT_HI,
    fn=_format_fn,
    help="ToolRL format: 1 if <think> then the gold's <tool_call>/<response> layout, each "
    "call/response tag exactly once; else 0.",
)
CORRECTNESS_REWARD = Reward(
    name="correctness",
    lo=CORRECTNESS_LO,
    hi=CORRECTNESS_HI,
    fn=_correctness_fn,
    help="ToolRL tool-call correctness in [-3, 3]: +3 exact match, -3 missing/unparseable, "
    "0 when the gold has no call, else 6*S/S_max-3 (name, key and value matching).",
)
REWARDS = (FORMAT_REWARD, CORRECTNESS_REWARD)


def call_text(gold: str) -> str:
    """The privileged verifier text of ``correctness``: the gold's call block (or the gold itself
    when it makes no call, e.g. a response-only answer)."""
    block = gold_call_block(gold) if CALL_CLOSE in gold else None
    return gold if block is None else CALL_OPEN + block + CALL_CLOSE


def verifier_info(gold: str, format_text: str = FORMAT_SPEC) -> tuple:
    """The verifier information every tool-calling example carries.

    ``format_text`` is the format instructions as the prompt states them (non-privileged: it is
    in the prompt); :data:`FORMAT_SPEC` for prompts we build.
    """
    return (
        VerifierInfo("format", format_text, privileged=False),
        VerifierInfo("correctness", call_text(gold), privileged=True),
    )
