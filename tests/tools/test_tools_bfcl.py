"""BFCL v4 loading, scoring against bfcl-eval's own checker, and aggregation."""
import copy
import importlib.util
import json
import os
from pathlib import Path

import pytest

pytest.importorskip("bfcl_eval")

from tasks.tools import bfcl  # noqa: E402
from tasks.tools.prompt import render_output  # noqa: E402

EXPECTED_COUNTS = {"simple_python": 400, "simple_java": 100, "simple_javascript": 50,
                   "multiple": 200, "parallel": 200, "parallel_multiple": 200,
                   "live_simple": 258, "live_multiple": 1053, "live_parallel": 16,
                   "live_parallel_multiple": 24}
PER_CATEGORY = 3  # real items checked per category


def wheel_file(*parts):
    spec = importlib.util.find_spec("bfcl_eval")
    return Path(list(spec.submodule_search_locations)[0], "data", *parts)


def read_lines(path):
    return {row["id"]: row for row in map(json.loads, path.read_text().splitlines())}


@pytest.fixture(scope="module")
def examples():
    return {c: bfcl.load_category(c) for c in bfcl.CATEGORIES}


@pytest.fixture(scope="module")
def direct_checker():
    """bfcl-eval's ast_checker itself, called as its eval runner calls it."""
    bfcl._bfcl()  # the stubbed model_config and BFCL_PROJECT_ROOT are in place after this
    from bfcl_eval.constants.enums import Language
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker

    languages = {"python": Language.PYTHON, "java": Language.JAVA,
                 "javascript": Language.JAVASCRIPT}
    cache = {}

    def verdict(category, item_id, decoded):
        if category not in cache:  # raw data straight from the wheel's files
            cache[category] = (read_lines(wheel_file(f"BFCL_v4_{category}.json")),
                               read_lines(wheel_file("possible_answer",
                                                     f"BFCL_v4_{category}.json")))
        prompts, answers = cache[category]
        return ast_checker(prompts[item_id]["function"], copy.deepcopy(decoded),
                           answers[item_id]["ground_truth"],
                           languages[bfcl.language_of(category)], category,
                           bfcl.CHECKER_MODEL)["valid"]

    return verdict


def test_counts_and_metadata(examples):
    assert {c: len(v) for c, v in examples.items()} == EXPECTED_COUNTS
    for category, items in examples.items():
        answers = read_lines(wheel_file("possible_answer", f"BFCL_v4_{category}.json"))
        for e in items[:5]:
            assert e.metadata["category"] == category
            assert e.metadata["language"] == bfcl.language_of(category)
            assert e.reference == answers[e.id]["ground_truth"]
            assert e.info_for("correctness").privileged
            assert e.info_for("format").text in e.messages[0]["content"]


def test_prompt_follows_toolrl_format(examples):
    java = examples["simple_java"][0]
    system, user = java.messages
    assert "Name: GeometryPresentation.createPresentation\n" in system["content"]  # dots kept
    assert "Note that the provided function is in Java 8 SDK syntax." in system["content"]
    assert '"type": "any"' not in system["content"]  # Java types shown as strings, as BFCL does
    assert user["content"].startswith("**Dialogue Records History**\n<user> Help me initialize")
    assert user["content"].endswith(bfcl.BFCL_USER_SUFFIX + " </user>")
    with_system = next(e for e in examples["live_simple"] if e.id == "live_simple_58-27-0")
    assert "cinema halls" not in with_system.messages[1]["content"]  # item system text dropped
    assert "list movies in Mumbai?" in with_system.messages[1]["content"]
    # raw (hint-free) functions are kept for the checker
    assert "Java 8 SDK" not in json.dumps(java.metadata["functions"])


def _wrong_value(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 100003
    if isinstance(value, float):
        return value + 1234.5
    if isinstance(value, list):
        return value + ["zz-not-an-option"]
    if isinstance(value, dict):
        return {"zz-not-an-option": 1}
    return "zz-not-an-option"


def _candidates(items):
    """Real items whose first-option answer the checker accepts, with a required argument."""
    out = []
    for e in items:
        calls = bfcl.canonical_calls(e.reference)
        if e.metadata["language"] != "python" and not all(
                isinstance(v, str) for c in calls for v in c["parameters"].values()):
            continue  # Java/JS want string literals; keep the items whose answers are strings
        required = {f["name"]: f["parameters"].get("required", []) for f in e.metadata["functions"]}
        if not all(set(required[c["name"]]) & set(c["parameters"]) for c in calls):
            continue
        if bfcl.score([e], [render_output("t", calls)])["items"][0]["valid"]:
            out.append((e, calls, required))
        if len(out) == PER_CATEGORY:
            return out
    raise AssertionError("not enough candidate items")


def _variants(calls, required):
    """(label, calls or raw text, expected verdict)."""
    first = calls[0]
    key = sorted(first["parameters"])[0]
    wrong_value = copy.deepcopy(calls)
    wrong_value[0]["parameters"][key] = _wrong_value(first["parameters"][key])
    missing = copy.deepcopy(calls)
    del missing[0]["parameters"][sorted(set(required[first["name"]]) & set(first["parameters"]))[0]]
    wrong_name = copy.deepcopy(calls)
    wrong_name[0]["name"] += "_zz"
    variants = [("correct", calls, True), ("wrong value", wrong_value, False),
                ("missing param", missing, False), ("wrong name", wrong_name, False),
                ("extra call", calls + [calls[0]], False),
                ("none call dropped", calls + [{"name": "None", "parameters": {}}], True)]
    if len(calls) > 1:
        variants += [("reordered", calls[::-1], True), ("missing call", calls[:-1], False)]
    return variants


@pytest.mark.parametrize("category", bfcl.CATEGORIES)
def test_scorer_agrees_with_bfcl_checker(category, examples, direct_checker):
    for example, calls, required in _candidates(examples[category]):
        for label, variant, expected in _variants(calls, required):
            response = render_output("reasoning", variant)
            item = bfcl.score([example], [response])["items"][0]
            decoded = [{c["name"]: c["parameters"]} for c in variant if c["name"] != "None"]
            assert item["format_ok"], (example.id, label)
            assert item["valid"] == direct_checker(category, example.id, decoded) == expected, \
                (example.id, label, item["error"])
        name = calls[0]["name"]
        broken = '<think> x </think>\n<tool_call>\n{"name": "' + name + '"\n</tool_call>'
        for response in (broken, "<think> no call </think>\n<response> Sorry. </response>"):
            item = bfcl.score([example], [response])["items"][0]
            assert item == {"id": example.id, "category": category, "valid": False,
                            "format_ok": False, "error": item["error"]}


def test_aggregation_paper_base_row():
    # non-live: simple = mean(5/400, 2/100, 1/50) = mean(1.25, 2, 2) = 1.75;
    # multiple 17/200 = 8.5, parallel 26/200 = 13, parallel_multiple 50/200 = 25
    # overall = (1.75 + 8.5 + 13 + 25) / 4 = 12.0625
    # live: weighted (17 + 101 + 3 + 5) / (258 + 1053 + 16 + 24) = 126 / 1351 = 9.3264
    # (paper: 6.59·258 + 9.59·1053 + 18.75·16 + 20.83·24) / 1351 = 9.33)
    counts = {"simple_python": (5, 400), "simple_java": (2, 100), "simple_javascript": (1, 50),
              "multiple": (17, 200), "parallel": (26, 200), "parallel_multiple": (50, 200),
              "live_simple": (17, 258), "live_multiple": (101, 1053), "live_parallel": (3, 16),
              "live_parallel_multiple": (5, 24)}
    metrics = bfcl.aggregate(counts)
    assert metrics["non_live_simple"] == pytest.approx(1.75)
    assert metrics["non_live_overall"] == pytest.approx(12.0625)
    assert round(metrics["non_live_overall"], 2) == 12.06
    assert metrics["live_overall"] == pytest.approx(100 * 126 / 1351)
    assert round(metrics["live_overall"], 2) == 9.33
    assert [round(metrics[c], 2) for c in bfcl.LIVE] == [6.59, 9.59, 18.75, 20.83]


def test_aggregation_uses_only_present_categories():
    metrics = bfcl.aggregate({"simple_java": (1, 4), "parallel": (3, 4), "live_parallel": (1, 2)})
    assert metrics == {"simple_java": 25.0, "parallel": 75.0, "live_parallel": 50.0,
                       "non_live_simple": 25.0, "non_live_overall": 50.0, "live_overall": 50.0}
    assert bfcl.aggregate({"live_simple": (1, 2)}) == {"live_simple": 50.0, "live_overall": 50.0}
    with pytest.raises(ValueError):
        bfcl.aggregate({"irrelevance": (1, 2)})


def test_fallback_aggregation_equals_bfcl():
    state = bfcl._bfcl()
    accs = [{"accuracy": a, "total_count": n, "display_accuracy": a}
            for a, n in [(0.1, 258), (0.5, 1053), (0.25, 16)]]
    assert state.unweighted(accs)["accuracy"] == pytest.approx(bfcl._unweighted(accs)["accuracy"])
    assert state.weighted(accs)["accuracy"] == pytest.approx(bfcl._weighted(accs)["accuracy"])


def test_score_end_to_end_subset(examples):
    items = examples["simple_python"][:4] + examples["live_simple"][:2]
    responses = [render_output("t", bfcl.canonical_calls(e.reference)) for e in items]
    responses[0] = "not a call"  # wrong, and counts against the format rate
    responses[4] = render_output("t", [{"name": "nope", "parameters": {}}])  # parses, wrong
    result = bfcl.score(items, responses)
    assert result["metrics"] == pytest.approx({
        "simple_python": 75.0, "non_live_simple": 75.0, "non_live_overall": 75.0,
        "live_simple": 50.0, "live_overall": 50.0, "format_rate": 100 * 5 / 6})
    assert result["counts"] == {"simple_python": 4, "live_simple": 2}
    assert [i["valid"] for i in result["items"]] == [False, True, True, True, False, True]
    assert [i["format_ok"] for i in result["items"]] == [False] + [True] * 5
    with pytest.raises(ValueError):
        bfcl.score(items, responses[:-1])


def test_checker_crash_is_a_wrong_answer(examples, monkeypatch):
    example = examples["simple_python"][0]
    state = bfcl._bfcl()

    def crash(*args, **kwargs):
        raise TypeError("unexpected value")

    monkeypatch.setattr(state, "ast_checker", crash)
    response = render_output("t", bfcl.canonical_calls(example.reference))
    item = bfcl.score([example], [response])["items"][0]
    assert item["format_ok"] and not item["valid"]
    assert item["error"].startswith("checker raised TypeError")


def test_bfcl_import_writes_only_into_our_folder():
    before = os.environ.get("BFCL_PROJECT_ROOT")
    bfcl._bfcl()
    assert os.environ.get("BFCL_PROJECT_ROOT") == before  # set only while importing
    from bfcl_eval.constants import eval_config

    if before is None:
        assert Path(eval_config.PROJECT_ROOT) == bfcl.default_project_root()
        assert Path(eval_config.LOCK_DIR).parent == bfcl.default_project_root()


def test_live_overall_of_a_subset_is_weighted_by_full_category_sizes():
    from tasks.tools.bfcl import aggregate, category_size

    sizes = {c: category_size(c) for c in ("live_simple", "live_multiple", "live_parallel",
                                            "live_parallel_multiple")}
    assert sizes == {"live_simple": 258, "live_multiple": 1053, "live_parallel": 16,
                     "live_parallel_multiple": 24}
    # 4 items scored per category (an --eval-limit subset): accuracies 100, 50, 0, 0 percent
    m = aggregate({"live_simple": (4, 4), "live_multiple": (2, 4), "live_parallel": (0, 4),
                   "live_parallel_multiple": (0, 4)})
    # (100 * 258 + 50 * 1053 + 0 * 16 + 0 * 24) / 1351 = 58.068...
    assert abs(m["live_overall"] - (100 * 258 + 50 * 1053) / 1351) < 1e-9
