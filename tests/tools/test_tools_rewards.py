"""ToolRL rewards on hand-written responses, each with its hand-computed value."""
import json
import math

import pytest

from tasks.base import Example
from tasks.tools.rewards import (
    CORRECTNESS_REWARD,
    FORMAT_REWARD,
    REWARDS,
    call_text,
    correctness_score,
    format_score,
    multiset_jaccard,
)


def call(name, **params):
    return json.dumps({"name": name, "parameters": params})


def out(*lines, think="<think> reasoning </think>", response=None):
    text = think + "\n<tool_call>\n" + "\n".join(lines) + "\n</tool_call>"
    if response is not None:
        text += f"\n<response> {response} </response>"
    return text


PARIS = call("get_weather", city="Paris", unit="celsius")
GOLD = out(PARIS)  # one call with 2 params: S_max = 1 + (1 + 2) = 4
GOLD_PAR = out(call("get_weather", city="Paris"), call("get_weather", city="Tokyo"))  # S_max = 5
GOLD_RESPONSE_ONLY = "<think> chit-chat </think>\n<response> Hello! </response>"
GOLD_BOTH = out(PARIS, response="Checking the weather.")


def both(gold, response):
    return format_score(gold, response), correctness_score(gold, response)


def test_correct_call():
    assert both(GOLD, out(PARIS)) == (1.0, 3.0)


def test_exact_match_ignores_key_order_and_spacing():
    same = '{"parameters": {"unit": "celsius", "city": "Paris"},   "name": "get_weather"}'
    assert both(GOLD, out(same)) == (1.0, 3.0)


def test_wrong_argument_value():
    # names J = 1; keys J({city,unit},{city,unit}) = 1; equal values: city = 1 -> S = 3
    # 6 * 3 / 4 - 3 = 1.5
    assert both(GOLD, out(call("get_weather", city="Paris", unit="fahrenheit"))) == (1.0, 1.5)


def test_missing_argument():
    # names 1; keys J({city,unit},{city}) = 1/2; values 1 -> S = 2.5; 6 * 2.5 / 4 - 3 = 0.75
    assert correctness_score(GOLD, out(call("get_weather", city="Paris"))) == pytest.approx(0.75)


def test_extra_argument():
    # names 1; keys J = 2/3; values 2 -> S = 11/3; 6 * (11/3) / 4 - 3 = 2.5
    pred = out(call("get_weather", city="Paris", unit="celsius", days=3))
    assert correctness_score(GOLD, pred) == pytest.approx(2.5)


def test_wrong_name():
    # names J([get_weather],[get_forecast]) = 0; no same-name call -> S = 0 -> -3
    pred = out(call("get_forecast", city="Paris", unit="celsius"))
    assert both(GOLD, pred) == (1.0, -3.0)


def test_extra_call():
    # names J([gw],[gw,lt]) = 1/2; the gold call matches fully: 1 + 2 -> S = 3.5
    # 6 * 3.5 / 4 - 3 = 2.25
    pred = out(PARIS, call("local_time", city="Paris"))
    assert both(GOLD, pred) == (1.0, 2.25)


def test_extra_call_without_parameters_of_another_name_does_not_crash():
    # rlla.py only reads "parameters" of same-name calls: same arithmetic as above, 2.25
    pred = out(PARIS, json.dumps({"name": "local_time"}))
    assert correctness_score(GOLD, pred) == 2.25


def test_same_name_call_without_parameters_is_minimum():
    # a same-name call without "parameters" raises inside rlla.py's scorer -> -3
    pred = out(call("get_weather", city="Tokyo"), json.dumps({"name": "get_weather"}))
    assert correctness_score(GOLD_PAR, pred) == -3.0


def test_missing_call():
    # names J([gw,gw],[gw]) = 1/2; Paris matched: keys 1 + value 1 = 2; Tokyo unmatched
    # S = 2.5; S_max = 1 + 2 + 2 = 5; 6 * 2.5 / 5 - 3 = 0
    assert correctness_score(GOLD_PAR, out(call("get_weather", city="Paris"))) == 0.0


def test_parallel_calls_in_other_order():
    # not an exact match (list order differs) but S = 1 + 2 + 2 = S_max -> 3
    pred = out(call("get_weather", city="Tokyo"), call("get_weather", city="Paris"))
    assert both(GOLD_PAR, pred) == (1.0, 3.0)


def test_parallel_calls_matched_once_each():
    # two identical predictions: names J = 1; Paris takes one (2), Tokyo the other (keys 1 + 0)
    # S = 1 + 2 + 1 = 4; 6 * 4 / 5 - 3 = 1.8
    pred = out(call("get_weather", city="Paris"), call("get_weather", city="Paris"))
    assert correctness_score(GOLD_PAR, pred) == pytest.approx(1.8)


def test_zero_score_candidate_is_not_consumed():
    # gold A{x:1}; pred A{y:2}: key J 0, values 0 -> total 0, not taken. S = names 1 only.
    # S_max = 1 + (1 + 1) = 3; 6 * 1 / 3 - 3 = -1
    assert correctness_score(out(call("A", x=1)), out(call("A", y=2))) == pytest.approx(-1.0)


def test_numeric_equality_is_python_equality():
    # 1.0 == 1 in Python, as in rlla.py: exact match
    assert correctness_score(out(call("A", x=1)), out(call("A", x=1.0))) == 3.0


def test_malformed_json():
    pred = out('{"name": "get_weather", "parameters": {"city": "Paris"')
    assert both(GOLD, pred) == (1.0, -3.0)


def test_line_that_is_not_an_object():
    assert correctness_score(GOLD, out('["get_weather", "Paris"]')) == -3.0
    assert correctness_score(GOLD, out('"get_weather"')) == -3.0


def test_parameters_not_a_dict():
    assert correctness_score(GOLD, out('{"name": "get_weather", "parameters": [1]}')) == -3.0


def test_blank_line_in_block():
    # rlla.py splits the block on newlines and parses every piece: a blank line is not JSON
    pred = out(call("get_weather", city="Paris"), "", call("get_weather", city="Tokyo"))
    assert correctness_score(GOLD_PAR, pred) == -3.0


def test_empty_block():
    assert both(GOLD, "<think> x </think>\n<tool_call>\n</tool_call>") == (0.0, -3.0)


def test_missing_tags():
    assert both(GOLD, "<think> x </think>\n" + PARIS) == (0.0, -3.0)
    assert both(GOLD, "<think> x </think>\n<tool_call>\n" + PARIS) == (0.0, -3.0)


def test_duplicated_tags():
    # format: <tool_call> must occur exactly once -> 0; correctness reads the first block -> 3
    twice = out(PARIS) + "\n<tool_call>\n" + PARIS + "\n</tool_call>"
    assert both(GOLD, twice) == (0.0, 3.0)


def test_think_missing():
    assert both(GOLD, "<tool_call>\n" + PARIS + "\n</tool_call>") == (0.0, 3.0)


def test_text_after_block_breaks_format():
    assert both(GOLD, out(PARIS) + "\nDone.") == (0.0, 3.0)


def test_response_only_gold():
    # correctness is 0 whatever the response when the gold makes no call
    reply = "<think> hi </think>\n<response> Sure. </response>"
    assert both(GOLD_RESPONSE_ONLY, reply) == (1.0, 0.0)
    assert both(GOLD_RESPONSE_ONLY, out(PARIS)) == (0.0, 0.0)
    # a duplicated <response> fails format
    twice = "<think> hi </think>\n<response> a </response><response> b </response>"
    assert format_score(GOLD_RESPONSE_ONLY, twice) == 0.0


def test_call_and_response_gold():
    assert both(GOLD_BOTH, out(PARIS, response="On it.")) == (1.0, 3.0)
    assert both(GOLD_BOTH, out(PARIS)) == (0.0, 3.0)


def test_think_only_gold():
    assert format_score("<think> x </think>", "<think> y </think>") == 1.0
    assert format_score("<think> x </think>", "<think> y </think>\n<response> z </response>") == 0.0


def test_whitespace_and_chat_markers():
    assert both(GOLD, "\n  " + out(PARIS) + "\n\n") == (1.0, 3.0)
    assert both(GOLD, out(PARIS) + "<|im_end|>\nleftover") == (1.0, 3.0)


def test_multiset_jaccard():
    assert multiset_jaccard([], []) == 1.0
    assert multiset_jaccard(["a"], []) == 0.0
    assert multiset_jaccard(["a", "a", "b"], ["a", "b", "b"]) == pytest.approx(2 / 4)


def test_reward_objects_and_bounds():
    example = Example(id="x", messages=(), reference=GOLD)
    assert [r.name for r in REWARDS] == ["format", "correctness"]
    assert (FORMAT_REWARD.lo, FORMAT_REWARD.hi) == (0.0, 1.0)
    assert (CORRECTNESS_REWARD.lo, CORRECTNESS_REWARD.hi) == (-3.0, 3.0)
    assert [r(example, out(PARIS)) for r in REWARDS] == [1.0, 3.0]
    for response in ["", "garbage", out("{}"), out(PARIS, PARIS, PARIS)]:
        for reward in REWARDS:
            value = reward(example, response)
            assert not math.isnan(value) and reward.lo <= value <= reward.hi


def test_call_text():
    assert call_text(GOLD) == "<tool_call>\n" + PARIS + "\n</tool_call>"
    assert call_text(GOLD_RESPONSE_ONLY) == GOLD_RESPONSE_ONLY
