"""The localisation probe (bench localisation) and the checked spans it reads: bootstrap
intervals from scipy on hand data, variant names, the control's check, tool-call value spans,
the SQL query's differing tokens, narrower spans in the diagnostics, and one probe on a
tiny-random model end to end."""
import json
import math
from pathlib import Path

import pytest
import torch

from lab.bench import localisation as loc

TOY = str(Path(__file__).parent / "plugins" / "toy_spans_task.py")


def test_interval_is_scipys_bootstrap_of_the_mean():
    import numpy as np
    from scipy import stats

    vals = [0.8, 1.1, 1.9, 2.4, 1.3, 0.9, 1.7, 2.2]
    mean, low, high = loc.interval(vals, seed=3)
    ref = stats.bootstrap((np.array(vals),), np.mean, confidence_level=0.95,
                          n_resamples=loc.RESAMPLES, method="BCa",
                          rng=np.random.default_rng(3)).confidence_interval
    assert mean == pytest.approx(sum(vals) / len(vals))
    assert (low, high) == pytest.approx((ref.low, ref.high))
    assert low < mean < high and low > 1.0  # these ratios are localised
    assert loc.interval([1.5, 1.5, 1.5]) == (1.5, 1.5, 1.5)  # no spread: no resampling
    from lab.bench.localisation_report import verdict

    assert verdict(low, high).startswith("localised")
    from lab.bench.localisation_report import near_one

    assert (near_one(1.0031), near_one(0.9962), near_one(1.0), near_one(1.2349)) == (
        "1.003", "0.996", "1.00", "1.23")
    assert verdict(0.9, 1.2).startswith("not distinguishable")
    assert verdict(0.5, 0.8).startswith("avoided")


def test_top_positions_and_the_swapped_control_by_hand():
    import torch

    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 0, 0]])
    # reward a peaks at index 1 in all three responses; reward b at 0, 2, 1 (no mode beats 1/3)
    w = torch.tensor([[[0.5, 2.0, 1.0, 0.5], [3.0, 0.5, 0.3, 0.2]],
                      [[0.5, 2.0, 0.5, 9.0], [0.5, 0.5, 2.0, 9.0]],
                      [[0.5, 1.5, 0.0, 0.0], [0.5, 1.5, 0.0, 0.0]]])
    (a, a_share), (_, b_share) = loc.modal_tops(w, mask)
    assert (a, a_share) == (1, 1.0)  # padding (9.0) never counts
    assert b_share == pytest.approx(1 / 3)
    # swapped: each response takes another prompt's response's profile (the only other
    # prompt here, so the draw is forced), cut to its length, nothing added past the other's
    # end, mean 1 again
    got = loc.swapped(w, mask, ["p", "q", "q"], seed=0)
    assert got[1, 0].tolist() == pytest.approx([0.5 * 3 / 3.5, 2.0 * 3 / 3.5, 1.0 * 3 / 3.5,
                                                0.0])
    assert got[0, 0].tolist() in (pytest.approx([0.5 * 4 / 3, 2.0 * 4 / 3, 0.5 * 4 / 3, 0.0]),
                                  pytest.approx([0.5 * 2, 1.5 * 2, 0.0, 0.0]))
    # a profile that is a position stays that position whatever the lengths
    at1 = torch.zeros(3, 1, 4)
    at1[0, 0, 1], at1[1, 0, 1], at1[2, 0, 1] = 4.0, 3.0, 2.0
    assert torch.equal(loc.swapped(at1, mask, ["p", "q", "r"], seed=1), at1)
    # all of the other's mass past this response's end: the uniform profile
    late = torch.zeros(2, 1, 4)
    late[0, 0, 3], late[1, 0, 0] = 4.0, 2.0
    short = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    assert loc.swapped(late, short, ["p", "q"])[1, 0].tolist() == [1.0, 1.0, 0.0, 0.0]
    assert got[2, 0, :2].tolist() == pytest.approx([0.5 * 2 / 2.5, 2.0 * 2 / 2.5])
    assert bool(torch.isnan(loc.swapped(w, mask, ["p", "p", "p"])).all())  # no other prompt
    with pytest.raises(ValueError, match="@swapped"):
        loc.parse_variant("mrtpo@position")  # retired: it could not fail


def test_fewer_than_five_prompts_give_no_interval():
    mean, low, high = loc.interval([1.0, 2.0, 3.0, 4.0], clusters=["a", "b", "c", "d"])
    assert mean == 2.5 and math.isnan(low) and math.isnan(high)
    assert not math.isnan(loc.interval([1.0, 2.0, 3.0, 4.0, 5.0],
                                       clusters=list("abcde"))[1])


def test_variant_names():
    assert loc.parse_variant("mrtpo") == ("mrtpo", "loo", "")
    assert loc.parse_variant("mrtpo@joint") == ("mrtpo", "joint", "")
    assert loc.parse_variant("mrtpo@shuffled") == ("mrtpo", "loo", "shuffled")
    assert loc.parse_variant("p2t@single") == ("p2t", "single", "")
    assert loc.parse_variant("p2t@shuffled") == ("p2t", "loo", "shuffled")
    assert loc.parse_variant("mrtpo@placebo") == ("mrtpo", "loo", "placebo")
    assert loc.parse_variant("mrtpo@order") == ("mrtpo", "loo", "order")
    assert loc.parse_variant("p2t@cross") == ("p2t", "loo", "cross")
    assert loc.parse_variant("p2t@single:bf16") == ("p2t", "single", "")  # replayed in bf16
    with pytest.raises(ValueError, match="only :bf16"):
        loc.parse_variant("mrtpo:fp16")
    with pytest.raises(ValueError, match="mode after @"):
        loc.parse_variant("mrtpo@nope")
    with pytest.raises(ValueError, match="not one"):
        loc.parse_variant("gdpo")
    assert loc.parse_variant("copy-model@order") == ("copy-model", "loo", "order")
    with pytest.raises(ValueError, match="only a control"):
        loc.parse_variant("copy-model@joint")


def test_the_control_fails_when_a_shuffled_interval_excludes_one():
    ok = {"mrtpo@shuffled": {"format/span_ratio": {"n": 9, "mean": 1.0, "low": 0.9,
                                                   "high": 1.1}}}
    bad = {"mrtpo@shuffled": {"format/span_ratio": {"n": 9, "mean": 1.3, "low": 1.1,
                                                    "high": 1.5}},
           "mrtpo": {"format/span_ratio": {"n": 9, "mean": 1.8, "low": 1.6, "high": 2.0}}}
    assert loc.control_failures(ok) == []
    assert loc.control_failures(bad) == ["mrtpo@shuffled format/span_ratio: 1.300 [1.100, "
                                         "1.500] at 95.0 %"]
    # from the values: two ratios checked, so each at 97.5 %; [1.02 .. 1.08] excludes 1
    two = {"mrtpo@shuffled": {
        "a/span_ratio": {"n": 8, "mean": 1.05, "low": 1.03, "high": 1.07,
                         "values": [1.02, 1.04, 1.06, 1.08, 1.03, 1.07, 1.05, 1.05]},
        "b/span_ratio": {"n": 8, "mean": 1.0, "low": 0.9, "high": 1.1,
                         "values": [0.8, 1.2, 0.9, 1.1, 1.0, 1.05, 0.95, 1.0]}}}
    (failure,) = loc.control_failures(two)
    assert failure.startswith("mrtpo@shuffled a/span_ratio: 1.050") and "97.5 %" in failure


def test_tool_call_spans_are_the_name_and_argument_values():
    from tasks.tools.spans import spans

    r = ('<think> x </think>\n<tool_call>\n{"name": "get_weather", "parameters": '
         '{"city": "Paris", "days": [1, 2]}}\nnot json\n</tool_call>')
    got = [r[a:b] for a, b in spans(None, r)["correctness"]]
    assert got == ['"get_weather"', '"Paris"', '[1, 2]', "not json"]


def test_sql_execution_diff_is_where_the_query_differs_from_the_gold_one():
    from tasks.base import Example
    from tasks.sql.prompt import query_diff, spans

    p = "SELECT name FROM singer WHERE age > 30"
    assert [p[a:b] for a, b in query_diff(p, "select name from singer where age < 30")] == [">"]
    assert query_diff(p, p) == []  # the same query: nothing differs
    assert query_diff(p, "SELECT count(*) FROM concert") == []  # too different to align
    ex = Example(id="q", messages=(), reference="SELECT name FROM singer WHERE age < 30")
    resp = f"<think> t </think>\n<answer>\n```sql\n{p}\n```\n</answer>"
    sp = spans(ex, resp)
    assert [resp[a:b] for a, b in sp["execution:diff"]] == [">"]


def test_a_narrower_span_gets_a_ratio_of_its_own():
    from methods.mrtpo.diagnostics import response_record

    d = torch.tensor([[0.0, 0.0, 1.0, 3.0]])  # 4 tokens, one character each
    ranges = [(0, 1), (1, 2), (2, 3), (3, 4)]
    rec = response_record(d, ["r"], {"r": [(2, 4)], "r:last": [(3, 4)]}, ranges)
    assert rec["r/span_ratio"] == pytest.approx(1.0 / 0.5)  # all of it on half the tokens
    assert rec["r:last/span_ratio"] == pytest.approx(0.75 / 0.25)


@pytest.mark.model
def test_the_probe_runs_every_variant_on_one_batch(tmp_path):
    from lab import cli

    rc = cli.main(["bench", "localisation", "--model", "tiny-random", "--task", "toy-spans",
                   "--plugin", TOY, "--preset", "smoke", "--responses", "8", "--group-size",
                   "4", "--max-response-tokens", "10", "--output-dir", str(tmp_path),
                   "--methods", loc.DEFAULT_VARIANTS + ",p2t,p2t@joint,p2t@shuffled,p2t@placebo,"
                   "p2t@swapped,tcrm,tcrm@outcomes", "--seeds", "2"])
    data = json.loads((tmp_path / "localisation-toy-spans.json").read_text())
    assert rc == (3 if data["control_failures"] else 0)
    refs = [f"{m}{c}" for m in loc.REFERENCE_MODELS
            for c in ("", "@placebo", "@order", "@cross", "@swapped")]
    assert data["variants"] == loc.DEFAULT_VARIANTS.split(",") + [
        "p2t", "p2t@joint", "p2t@shuffled", "p2t@placebo", "p2t@swapped", "tcrm",
        "tcrm@outcomes"] + refs
    # two seeds' batches of 8, pooled: clusters are (seed, prompt), each seed's mean kept
    assert data["seeds"] == [0, 1] and data["facts"]["responses"] == 16
    assert set(data["facts"]["replay_s"]) == set(data["variants"])
    ratio = data["results"]["mrtpo"]["parity/span_ratio"]
    assert set(ratio["seed_means"]) == {"0", "1"} or set(ratio["seed_means"]) == {0, 1}
    assert {c.split(":")[0] for c in ratio["clusters"]} == {"0", "1"}
    # 2 prompts a seed: 4 prompts in all, fewer than loc.MIN_PROMPTS: no interval
    assert ratio["prompts"] == 4 and math.isnan(ratio["low"])
    # the positional check: per variant and reward, a position per seed and a share
    top = data["facts"]["top_position"]["p2t"]["parity"]
    assert len(top["position"]) == 2 and 0 < top["share"] <= 1
    for spec in data["variants"]:
        stats = data["results"][spec]
        # TCRM's profile exists only where the reward's group advantage has a sign
        assert {"parity/span_ratio", "vowels/top10"} <= set(stats) if "tcrm" not in spec \
            else stats
        for s in stats.values():
            assert s["n"] >= 1 and (math.isnan(s["low"]) or s["low"] <= s["mean"] <= s["high"])
    assert "too few prompts for an interval" in \
        (tmp_path / "localisation-toy-spans.md").read_text()
    assert "Where each profile peaks most often" in \
        (tmp_path / "localisation-toy-spans.md").read_text()
    # joint replay gives every reward the same profile
    for spec in ("mrtpo@joint", "p2t@joint"):
        joint = data["results"][spec]
        assert joint["parity/top10"]["mean"] == pytest.approx(joint["vowels/top10"]["mean"])
    # the text controls are paired with the real replay over the same responses; the cross
    # reading puts each reward's profile under the other's name
    assert set(data["specificity"]["placebo"]) == {"mrtpo", "p2t", *loc.REFERENCE_MODELS}
    assert set(data["specificity"]["order"]) == {"mrtpo", *loc.REFERENCE_MODELS}
    assert set(data["specificity"]["placebo"]["mrtpo"]) <= {
        k for k in data["results"]["mrtpo"] if k.endswith("/span_ratio")}
    assert data["results"]["mrtpo@placebo"] != data["results"]["mrtpo"]
    # the placebo holds none of the verifier texts' tokens; the order control all of them
    overlap = data["facts"]["control_overlap"]
    assert set(overlap["placebo"].values()) == {0.0}
    assert all(v > 0.5 for v in overlap["order"].values())
    assert all(s["prompts"] <= s["n"] for s in data["results"]["mrtpo@cross"].values())
    # P2T's profile is its own, not MRTPO's
    assert data["results"]["p2t"]["vowels/top10"] != data["results"]["mrtpo"]["vowels/top10"]
    md = (tmp_path / "localisation-toy-spans.md").read_text()
    assert "| parity/span_ratio |" in md and "Verdicts (mrtpo)" in md
    assert "Token overlap of the placebo texts with the verifier texts: " in md
    # every plain variant against every control it has, the reference models beside them
    assert set(data["specificity"]["swapped"]) == {"mrtpo", "p2t", *loc.REFERENCE_MODELS}
    assert set(data["specificity"]["cross"]) >= {"mrtpo", *loc.REFERENCE_MODELS}
    assert "| mrtpo | parity |" in md and "| copy-model | parity |" in md
    assert "Reference models on the same batch" in md
    # TCRM against the same value model trained on outcomes shuffled within groups
    assert set(data["specificity"]["outcomes"]) == {"tcrm"}
    assert data["results"]["tcrm@outcomes"] != data["results"]["tcrm"]
    # the position model moves one position whatever the text: no text control separates it
    for control in ("placebo", "order"):
        d = data["specificity"][control]["position-model"]["parity/span_ratio"]
        assert d["mean"] == pytest.approx(0.0, abs=1e-9)


def test_seeds_with_different_rewards_merge_over_the_seeds_that_have_each():
    """IFEval's rewards are its prompts' constraints, so two seeds' batches can carry different
    ones: a reward is averaged over the seeds that have it (not counted as 0 where absent), and
    a seed without it shows '-' for its top position."""
    from lab.bench.localisation_report import _positions, merged_facts

    def facts(rewards, means, share):
        return {"responses": 64, "prompts": 16, "rewards": rewards,
                "reward_means": means, "mean_response_tokens": 50.0, "generate_s": 10.0,
                "replay_s": {"mrtpo": 5.0},
                "control_overlap": {"placebo": {r: 0.0 for r in rewards}},
                "top_position": {"mrtpo": {r: {"position": 3, "share": share}
                                           for r in rewards}}}

    out = merged_facts([facts(["c0", "c1"], {"c0": 0.5, "c1": 0.2}, 0.4),
                        facts(["c0", "c7"], {"c0": 0.7, "c7": 0.9}, 0.2)])
    assert out["rewards"] == ["c0", "c1", "c7"] and out["responses"] == 128
    assert out["reward_means"] == pytest.approx({"c0": 0.6, "c1": 0.2, "c7": 0.9})
    assert set(out["control_overlap"]["placebo"]) == {"c0", "c1", "c7"}
    top = out["top_position"]["mrtpo"]
    assert top["c7"]["position"] == [None, 3] and top["c7"]["share"] == pytest.approx(0.2)
    assert top["c0"]["share"] == pytest.approx(0.3)
    assert _positions(top["c7"]["position"]) == "[-, 3]"
    # a seed whose reward has no profile (NaN share) does not make the mean NaN
    nan = float("nan")
    one, two = facts(["c0"], {"c0": 0.5}, nan), facts(["c0"], {"c0": 0.5}, 0.3)
    one["top_position"]["mrtpo"]["c0"]["position"] = None
    assert merged_facts([one, two])["top_position"]["mrtpo"]["c0"]["share"] == \
        pytest.approx(0.3)
    assert math.isnan(merged_facts([one, one])["top_position"]["mrtpo"]["c0"]["share"])
    assert _positions([1, 1, 1]) == str([1, 1, 1])  # the committed reports' spelling
