"""The prefix-viability oracle of the tool-calling format reward: known prefixes, the token that
decides a failure, and its dead certificates against continuations the checker itself scores."""
import itertools
import random

import pytest

from lab.bench.viability import decided_at, state, witnesses
from tasks.tools.rewards import format_score

CALL = '<think>r</think>\n<tool_call>\n{"name": "f", "parameters": {}}\n</tool_call>'
REPLY = "<think>r</think>\n<response>hi</response>"
THINK = "<think>r</think>"


@pytest.mark.parametrize("prefix,expected", [
    ("", "viable"), ("  <th", "viable"), ("<think>a</thi", "viable"),
    ("<think>a</think>\n<tool", "viable"),
    ("<think>a <tool_c", "viable"),  # free text that could still go on as text
    ("<think>a</think>x", "viable"),  # the think part may hold '</think>' and end later
    ("Hello", "dead"),  # the layout starts with <think>
    ("<think>a <tool_call>", "dead"),  # the one call tag used up inside the think part
    ('<think>a</think>\n<tool_call>\n{}\n</tool_call>\n<tool_call>', "dead"),  # a second call
    ('<think>a</think>\n<tool_call>\n{}\n</tool_call> x', "dead"),  # text after the call block
    ('<think>a</think>\n<tool_call>\n{}\n</tool_call>', "viable"),  # complete
])
def test_known_prefixes_of_a_call_layout(prefix, expected):
    assert state(CALL, prefix) == expected


def test_each_layout_has_its_own_states():
    assert state(REPLY, "<think>a</think>\n<response>") == "viable"
    assert state(REPLY, "<think>a</think>\n<tool_call>") == "viable"  # free think text so far
    assert state(REPLY, "<think>a</think>\n<response>b</response>c") == "dead"
    assert state(THINK, "<think>a</think> <tool_call> x") == "viable"  # no counts, no end
    assert state(THINK, "x") == "dead"


def test_the_deciding_token_of_a_failure_and_of_a_stop():
    pieces = ["<", "think", ">", "a", "</", "think", ">\n", "<tool_call>", "\n{}", "\n",
              "</tool_call>"]
    assert decided_at(CALL, pieces, True) == {"index": None, "where": "passed", "unknown": 0}
    stopped = pieces[:-1]  # every prefix viable: the failure is the stop
    assert decided_at(CALL, stopped, False) == {"index": None, "where": "end", "unknown": 0}
    # after the one closing call tag only white space can follow: dead at the first '<'
    twice = pieces + ["\n", "<tool", "_call>", "x"]
    assert decided_at(CALL, twice, False)["index"] == len(pieces) + 1
    assert decided_at(CALL, ["Sure", ":", " <think>"], False)["index"] == 0
    with pytest.raises(AssertionError, match="not the checker's"):
        decided_at(CALL, stopped, True)


def test_a_chat_marker_is_never_made_or_read_as_text():
    """The checker cuts at chat markers: a witness that would complete one is not tried (so a
    prefix ending in a marker's start is certified by the rest alone), and a response holding
    one as plain text is not read."""
    cut = "<think>x</think>\n<response>x</response><|im_end|"
    assert state(REPLY, cut) == "dead"  # '>' would make a marker: not a continuation here
    assert state(CALL, "<think>a <|im_start|>assistant\n") == "unknown"
    with pytest.raises(ValueError, match="chat marker"):
        decided_at(REPLY, ["<think>x</think>\n<response>x</response>", "<|", "im_end|>"], True)


def test_every_prefix_of_a_passing_response_is_certified_viable():
    for gold in (CALL, REPLY, THINK):
        text = gold.replace(">r<", ">reason about it<")
        assert format_score(gold, text) == 1.0
        assert all(state(gold, text[:j]) == "viable" for j in range(len(text) + 1))


def test_a_dead_certificate_is_never_followed_by_a_passing_continuation():
    """Random prefixes over the layout's pieces: wherever the oracle says dead, no
    continuation of up to four pieces, nor any witness, passes the checker."""
    pieces = ["<think>", "</think>", "\n", "<tool_call>", "</tool_call>", "x", " ", "<"]
    rng = random.Random(0)
    tails = ["".join(t) for n in range(5) for t in itertools.product(pieces[:6], repeat=n)]
    seen = {"dead": 0, "viable": 0}
    for _ in range(60):
        prefix = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 7)))
        verdict = state(CALL, prefix)
        seen[verdict] = seen.get(verdict, 0) + 1
        if verdict == "dead":
            assert not any(format_score(CALL, prefix + t) for t in tails)
            assert not any(format_score(CALL, prefix + t) for t in witnesses(
                "<think>x</think>\n<tool_call>\nx\n</tool_call>"))
    assert seen["dead"] > 10 and seen["viable"] > 5 and seen.get("unknown", 0) == 0


@pytest.mark.model
def test_policy_responses_are_read_at_their_deciding_token(tmp_path):
    """A real tokenizer's responses (one passing, one failing at its first token, one stopped
    before the layout ends, the same cut at the token limit): each one's deciding token, the mask the statistics read, and the
    bench end to end on a tiny model (every prefix certified)."""
    import json
    from types import SimpleNamespace

    import torch

    from harness.models import load_tokenizer
    from lab import cli
    from lab.bench.credit_policy import deciding_mask, decisions
    from tasks.base import Example

    tok = load_tokenizer("tiny-random")
    texts = [CALL, "Sure. " + CALL, CALL[:CALL.index("\n</tool_call>")]]
    ids = [tok(t, add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for t in texts]
    texts.append(texts[2])
    ids.append(ids[2][:-1])  # the same text cut at the token limit: no end-of-turn token
    width = max(map(len, ids))
    ctx = SimpleNamespace(
        examples=[Example(id="p", messages=(), reference=CALL)] * 4, tokenizer=tok,
        response_ids=torch.tensor([i + [tok.pad_token_id] * (width - len(i)) for i in ids]),
        response_mask=torch.tensor([[1] * len(i) + [0] * (width - len(i)) for i in ids]),
        rewards=torch.tensor([[1.0, 3.0], [0.0, 3.0], [0.0, -3.0], [0.0, -3.0]]),
        reward_names=("format", "correctness"), texts=texts)
    found = decisions(ctx)
    assert [d["where"] for d in found] == ["passed", "early", "end", "cut"]
    assert found[1]["index"] == 0 and sum(d["unknown"] for d in found) == 0
    mask = deciding_mask(ctx, found)
    assert mask[0].sum() == 0
    assert mask[1, :, 0].tolist() == [True, True, False]  # failed, early, end
    assert mask[2, :, len(ids[2]) - 1].tolist() == [True, False, True]  # its last token
    assert int(mask.sum()) == 4  # the cut response has none

    rc = cli.main(["bench", "credit", "--responses", "policy", "--model", "tiny-random", "--task",
                   "bfcl", "--preset", "smoke", "--prompts", "2", "--seeds", "2",
                   "--sources", "uniform,mrtpo", "--output-dir", str(tmp_path)])
    assert rc == 0
    data = json.loads((tmp_path / "credit-bfcl-policy.json").read_text())
    facts = data["facts"]
    assert facts["responses"] == 2 * 2 * 4 and facts["unknown_prefixes"] == 0
    assert sum(facts["where"].values()) == facts["responses"]
    md = (tmp_path / "credit-bfcl-policy.md").read_text()
    assert "--responses policy" in md and "| mrtpo |" in md and "Prefixes certified" in md
