"""The synthetic RLLA-format generator."""
from collections import Counter

from tasks.tools.prompt import parse_tool_calls
from tasks.tools.rewards import REWARDS
from tasks.tools.synth import KINDS, generate
from tasks.tools.toolbox import TOOLS, TOOLS_BY_NAME


def test_deterministic_per_seed_and_different_across_seeds():
    a, b = generate(40, seed=7), generate(40, seed=7)
    assert a == b
    other = generate(40, seed=8)
    assert [e.messages for e in a] != [e.messages for e in other]
    assert len({e.id for e in a}) == 40
    # example i depends only on (seed, i): shorter runs are prefixes
    assert generate(10, seed=7) == a[:10]


def test_gold_scores_perfectly_against_itself():
    for example in generate(400, seed=1):
        assert [r(example, example.reference) for r in REWARDS] == [1.0, 3.0], example.id


def test_covers_all_kinds_with_the_right_shape():
    examples = generate(400, seed=2)
    assert Counter(e.metadata["kind"] for e in examples) == {k: 100 for k in KINDS}
    for example in examples:
        kind = example.metadata["kind"]
        calls = parse_tool_calls(example.reference)
        offered = example.messages[0]["content"].count("\nDescription: ")
        names = [c["name"] for c in calls]
        if kind == "single":
            assert offered == 1 and len(calls) == 1
        elif kind == "multiple":
            assert offered in (2, 3) and len(calls) == 1
        elif kind == "parallel":
            assert offered == 1 and len(calls) in (2, 3) and len(set(names)) == 1
            assert len({str(c["parameters"]) for c in calls}) == len(calls)  # distinct calls
        else:
            assert offered in (2, 3) and len(calls) in (2, 3) and len(set(names)) >= 2
        for c in calls:  # calls name an offered tool and fill its required arguments
            tool = TOOLS_BY_NAME[c["name"]]
            assert f"Name: {tool.name}\n" in example.messages[0]["content"]
            assert set(tool.required) <= set(c["parameters"]) <= set(tool.properties)


def test_prompts_are_short_and_verifier_info_present():
    for example in generate(100, seed=3):
        assert len(example.messages) == 2
        assert sum(len(m["content"]) for m in example.messages) < 2600
        assert example.info_for("format").text in example.messages[0]["content"]
        assert example.info_for("correctness").privileged
        assert example.info_for("correctness").text.startswith("<tool_call>\n")


def test_toolbox_size_and_every_tool_used():
    assert 15 <= len(TOOLS) <= 25
    used = {c["name"] for e in generate(600, seed=4) for c in parse_tool_calls(e.reference)}
    assert used == set(TOOLS_BY_NAME)
