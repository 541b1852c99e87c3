"""The ground-truth credit bench (bench credit): its statistics on hand-made profiles whose
answer is known, the construction on real tool-calling training examples (each response gets
the rewards it was built for; its deciding tokens are exactly the changed characters' tokens),
and one run end to end on a tiny-random model."""
import json
import math

import pytest
import torch

from lab.bench import credit


def train_examples(n: int = 24):
    """The bfcl task's offline training set (what ``smoke-learn`` trains on without data)."""
    import tasks  # noqa: F401 (registers the task families)
    from tasks.registry import TRAIN_SETS

    return TRAIN_SETS.get("tools-synth").load(None, 0)[:n]


def bfcl():
    import tasks  # noqa: F401
    from tasks.registry import TASKS

    return TASKS.get("bfcl")


class CharTokenizer:
    """One token per character (id = code point), end-of-turn id 0: a token's characters are
    exactly one character, so the deciding tokens must be exactly the changed characters."""

    eos_token_id = 0

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}

    def batch_decode(self, rows, skip_special_tokens=False):
        return ["".join("" if i == 0 and skip_special_tokens else "<eot>" if i == 0 else chr(i)
                        for i in row) for row in rows]


def test_statistics_on_hand_made_profiles():
    t, deciding = 10, torch.zeros(10, dtype=torch.bool)
    deciding[[2, 3]] = True  # k = 2
    on_them = torch.zeros(t)
    on_them[[2, 3]] = 5.0
    assert credit.mass_ratio(on_them, deciding) == pytest.approx(t / 2)  # T/k, the largest
    assert credit.precision_at_k(on_them, deciding) == 1.0
    uniform = torch.ones(t)
    assert credit.mass_ratio(uniform, deciding) == pytest.approx(1.0)
    assert credit.precision_at_k(uniform, deciding) == pytest.approx(2 / t)  # chance k/T
    away = torch.ones(t)
    away[[2, 3]] = 0.0
    assert credit.mass_ratio(away, deciding) == 0.0 and credit.precision_at_k(away, deciding) == 0
    # ties at the k-th value are shared in expectation: one deciding token among three tied
    one = torch.zeros(t, dtype=torch.bool)
    one[0] = True
    tied = torch.tensor([1.0, 1.0, 1.0] + [0.0] * 7)
    assert credit.precision_at_k(tied, one) == pytest.approx(1 / 3)
    assert credit.precision_at_k(torch.tensor([2.0, 1.0, 1.0] + [0.0] * 7), one) == 1.0


def test_records_count_pairs_with_advantage_and_split_failed_from_passed():
    # one group of four: format 1, 0, 1, 0; correctness constant (no advantage: not counted)
    n, k, t = 4, 2, 6
    mask = torch.ones(n, t)
    deciding = torch.zeros(n, k, t, dtype=torch.bool)
    deciding[:, :, 1] = True
    w = torch.ones(n, k, t)
    w[:, 0, 1] = 6.0  # format: 6 of the profile's 11 on the deciding token
    rewards = torch.tensor([[1.0, 3.0], [0.0, 3.0], [1.0, 3.0], [0.0, 3.0]])
    failed = torch.tensor([[False, False], [True, False], [False, False], [True, False]])
    recs = credit.records(w, mask, deciding, rewards, torch.zeros(n, dtype=torch.long),
                          ("format", "correctness"), failed)
    assert all("correctness/mass_ratio" not in r for r in recs)
    assert [r["format/mass_ratio"] for r in recs] == pytest.approx([6 / 11 * 6] * 4)
    assert [r["format/precision"] for r in recs] == [1.0] * 4
    assert [r["format/chance"] for r in recs] == pytest.approx([1 / 6] * 4)
    assert ["format:failed/gain" in r for r in recs] == [False, True, False, True]
    stats = credit.summarise(recs, ["p"] * 4)
    assert stats["format/gain"]["mean"] == pytest.approx(5 / 6)
    assert stats["format/gain"]["prompts"] == 1 and math.isnan(stats["format/gain"]["low"])


def test_changed_characters_and_their_places_after_edits():
    assert credit.changed("</think>", "</thing>") == (6, 7, 7)
    assert credit.changed("true", "false") == (0, 3, 4)
    assert credit.changed('"14:15"', '"25:26"') == (1, 6, 6)
    text = "<think> a </think>\nX true Y"
    edits = (credit.Edit("format", 10, 18, "</think>", "</thing>", "tag"),
             credit.Edit("correctness", 21, 25, "true", "false", "value"))
    assert text[10:18] == "</think>" and text[21:25] == "true"
    same, spans = credit.render(text, edits, ())
    assert same == text and spans == {"format": (16, 17), "correctness": (21, 24)}
    both, spans = credit.render(text, edits, ("format", "correctness"))
    assert both == "<think> a </thing>\nX false Y"
    assert both[slice(*spans["format"])] == "g" and both[slice(*spans["correctness"])] == "fals"


def test_wrong_values_keep_the_json_type_and_differ():
    cases = {"Hanoi": "Ibopj", "z9-Z": "a0-A", 9: 0, 19: 10, -3: -4, 2.5: 2.6, 5.0: 5.1,
             1e-05: 1e-06, True: False, False: True}
    for value, wrong in cases.items():
        got = credit.wrong_value(value)
        assert got == wrong and type(got) is type(value) and got != value
    for value in ("", "--", None, [1], {"a": 1}, float("inf")):
        assert credit.wrong_value(value) is None


def test_every_construction_gets_the_rewards_it_was_built_for():
    task = bfcl()
    for ex in train_examples():
        group = credit.construct(ex, ex.reference, seed=0)
        assert [r.kind for r in group.responses] == list(credit.KINDS)
        values = task.compute_rewards([ex] * 4, [r.text for r in group.responses])
        assert credit.unexpected(group, values, task.rewards) is None
        (fmt, cor), (fmt_b, cor_b), (fmt_c, cor_c), (fmt_d, cor_d) = values
        assert (fmt, cor, fmt_b, cor_b, fmt_c, fmt_d) == (1.0, 3.0, 0.0, 3.0, 1.0, 0.0)
        assert cor_c == cor_d < 3.0
        assert group.responses[0].text == ex.reference
        # outside the places built to fail, each response is the gold output, character for
        # character; at an intact place, its characters are the gold's
        gold_spans = group.responses[0].deciding
        for r in group.responses:
            rebuilt, pos = [], 0
            for name in sorted(r.deciding, key=lambda k: r.deciding[k][0]):
                s, e = r.deciding[name]
                rebuilt += [r.text[pos:s], group.responses[0].text[slice(*gold_spans[name])]]
                if name not in credit.BROKEN[r.kind]:
                    assert r.text[s:e] == group.responses[0].text[slice(*gold_spans[name])]
                else:
                    assert r.text[s:e] != group.responses[0].text[slice(*gold_spans[name])]
                pos = e
            assert "".join(rebuilt + [r.text[pos:]]) == ex.reference
    # a gold output without a call, or without a value to change, is dropped with its reason
    bad = train_examples(1)[0]
    with pytest.raises(credit.Dropped, match="no tool call"):
        credit.construct(bad, "<think> x </think>\n<response> hi </response>", 0)
    with pytest.raises(credit.Dropped, match="no argument"):
        credit.construct(bad, '<think> x </think>\n<tool_call>\n{"name": "f", "parameters": '
                              '{"a": [1]}}\n</tool_call>', 0)


def test_the_deciding_tokens_are_the_changed_characters():
    """With one token per character, a response's deciding tokens for a reward are exactly
    the characters changed for its failure (at an intact place: the same characters)."""
    examples = train_examples(8)
    batch = credit.build(examples, bfcl(), CharTokenizer(), lambda ex: ex.reference, seed=1)
    assert batch.dropped == [] and len(batch.groups) == 8
    rows = [r for g in batch.groups for r in g.responses]
    for r, ids, deciding, text in zip(rows, batch.ids, batch.deciding, batch.texts):
        assert text == r.text and ids[-1] == 0 and len(ids) == len(r.text) + 1
        for name in credit.REWARDS:
            assert deciding[name] == list(range(*r.deciding[name]))
    # a prompt whose group would not get its rewards is dropped, and counted
    import dataclasses

    # a second closing think tag: corrupting the first leaves the layout intact
    broken = [dataclasses.replace(examples[0], id="x", reference=(
        '<think> a </think> </think>\n<tool_call>\n{"name": "f", "parameters": {"a": 1}}\n'
        "</tool_call>"))]
    out = credit.build(broken, bfcl(), CharTokenizer(), lambda ex: ex.reference, seed=0)
    assert out.groups == [] and out.dropped[0][0] == "x" and "format" in out.dropped[0][1]


def test_sources_and_draws_are_checked():
    from lab.bench.credit_report import draws

    assert credit.parse_sources(credit.DEFAULT_SOURCES) == credit.DEFAULT_SOURCES.split(",")
    for bad in ("mrtpo@shuffled", "mrtpo:bf16", "nope", ""):
        with pytest.raises(ValueError):
            credit.parse_sources(bad)
    blocks = draws(100, 16, 3, seed=0)
    assert [len(b) for b in blocks] == [16] * 3 and len({i for b in blocks for i in b}) == 48
    assert draws(100, 16, 3, seed=0) == blocks != draws(100, 16, 3, seed=1)
    with pytest.raises(ValueError, match="distinct training prompts"):
        draws(40, 16, 3, seed=0)


def test_uniform_check_and_report_render():
    from lab.bench.credit_report import markdown, uniform_failures

    stat = {"n": 8, "prompts": 8, "mean": 1.0, "low": 1.0, "high": 1.0, "values": [1.0] * 8,
            "clusters": list(range(8))}
    gain = {**stat, "mean": 0.0, "low": 0.0, "high": 0.0}
    precision = {**stat, "mean": 0.1, "low": 0.1, "high": 0.1, "values": [0.1] * 8}
    results = {"uniform": {f"{k}/{s}": {"gain": gain, "precision": precision,
                                        "T": {**stat, "values": [10.0] * 8}}.get(s, stat)
                           for k in credit.REWARDS for s in credit.STATS}}
    assert uniform_failures(results) == []
    assert uniform_failures({"uniform": {"format/mass_ratio": {**stat, "mean": 1.2}}})
    kinds = {kind: {k: 1.0 for k in credit.REWARDS} for kind in credit.KINDS}
    facts = {"drawn": 2, "kept": 2, "dropped_why": {}, "responses": 8, "mean_tokens": 50.0,
             "changed_types": {"str": 2}, "deciding_per_kind": kinds, "rewards_per_kind": kinds,
             "seconds": {"uniform": 0.0}}
    md = markdown(results, facts, "# t", "python -m harness bench credit", "cpu", [0])
    assert "| uniform | 1.00 [1.00, 1.00] (n=8) |" in md and "CHECK FAILED" not in md
    assert "top-k not distinguishable from chance (P(as low) " in md


def test_the_chance_test_sees_rare_hits():
    # one deciding token in 91, 64 responses (16 prompts), no hit: likely at chance
    prompts = [p for p in range(16) for _ in range(4)]
    none = credit.chance_test([0.0] * 64, [1.0] * 64, [91.0] * 64, prompts)
    assert none["observed"] == 0 and none["chance"] == pytest.approx(1 / 91, rel=0.05)
    assert none["low"] == pytest.approx((90 / 91) ** 64, abs=0.02) and none["high"] == 1.0
    # a hit in every response: far above chance, and no draw reaches it
    every = credit.chance_test([1.0] * 64, [1.0] * 64, [91.0] * 64, prompts)
    assert every["high"] == pytest.approx(1 / 20001) and every["low"] == 1.0
    # uniform weights (precision k/T): at chance; k = 2 of 5 tokens is hypergeometric,
    # P(0 hits) = 3/10, P(1) = 6/10, P(2) = 1/10, so precision 0.4 (0.8 hits, never drawn)
    # is as low with P(0) and as high with P(1) + P(2)
    even = credit.chance_test([0.4], [2.0], [5.0], ["p"])
    assert even["chance"] == pytest.approx(0.4, abs=0.01)
    assert (even["low"], even["high"]) == pytest.approx((0.3, 0.7), abs=0.01)


@pytest.mark.model
def test_a_real_tokenizers_deciding_tokens():
    """SmolLM2's BPE: the format place is the one token ``think`` (``thing`` where it is
    broken), an integer's changed digit one token; nothing is dropped."""
    from harness.models import load_tokenizer

    tok = load_tokenizer("tiny-random")
    batch = credit.build(train_examples(), bfcl(), tok, lambda ex: ex.reference, seed=0)
    assert batch.dropped == []
    rows = [r for g in batch.groups for r in g.responses]
    for r, ids, deciding in zip(rows, batch.ids, batch.deciding):
        assert ids[-1] == tok.eos_token_id
        fmt = [tok.decode([ids[i]]) for i in deciding["format"]]
        assert fmt == (["thing"] if "format" in credit.BROKEN[r.kind] else ["think"])
        cor = "".join(tok.decode([ids[i]]) for i in deciding["correctness"])
        s, e = r.deciding["correctness"]
        assert r.text[s:e] in cor  # the tokens cover the changed characters, and little more


@pytest.mark.model
def test_the_bench_runs_every_source_on_a_tiny_model(tmp_path):
    from lab import cli

    rc = cli.main(["bench", "credit", "--model", "tiny-random", "--task", "bfcl", "--preset",
                   "smoke", "--prompts", "3", "--seeds", "2", "--output-dir", str(tmp_path)])
    assert rc == 0
    data = json.loads((tmp_path / "credit-bfcl.json").read_text())
    assert data["sources"] == credit.DEFAULT_SOURCES.split(",") and data["seeds"] == [0, 1]
    facts = data["facts"]
    assert facts["drawn"] == 6 and facts["kept"] == 6 and facts["responses"] == 24
    assert data["uniform_failures"] == []
    for source, stats in data["results"].items():
        for reward in credit.REWARDS:
            s = stats[f"{reward}/mass_ratio"]
            # every response has advantage for both rewards; 6 prompts: a t-interval
            assert s["n"] == 24 and s["prompts"] == 6, source
            assert not math.isnan(s["low"])
            assert {c.split(":")[0] for c in s["clusters"]} == {"0", "1"}
    uniform = data["results"]["uniform"]
    assert uniform["format/mass_ratio"]["mean"] == pytest.approx(1.0)
    assert uniform["correctness/gain"]["mean"] == pytest.approx(0.0, abs=1e-9)
    md = (tmp_path / "credit-bfcl.md").read_text()
    assert "Command: `python -m harness bench credit --task bfcl --preset smoke" in md
    assert "| tcrm |" in md and "Per seed" in md and "Machine: " in md
