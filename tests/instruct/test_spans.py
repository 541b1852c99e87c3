"""The characters an instruction's checker reads (Table 4), and the per-type diagnostics."""
import torch

from methods.mrtpo.diagnostics import response_record, summarise
from tasks.base import Example
from tasks.instruct.spans import checker_span, spans


def test_each_typed_checker_reads_its_part():
    text = 'Intro <<My Title>> with apple and APPLE. Is there anything else I can help with?'
    assert checker_span("detectable_format:title", {}, text) == [(6, 18)]
    assert [text[s:e] for s, e in checker_span("keywords:existence", {"keywords": ["apple"]},
                                                text)] == ["apple", "APPLE"]
    assert [text[s:e] for s, e in checker_span("keywords:frequency",
                                                {"keyword": "apple", "frequency": 2,
                                                 "relation": "at least"}, text)] == ["apple",
                                                                                     "APPLE"]
    end = checker_span("startend:end_checker",
                       {"end_phrase": "Is there anything else I can help with?"}, text + "  ")
    assert [text[s:e] for s, e in end] == ["Is there anything else I can help with?"]
    assert checker_span("startend:end_checker", {"end_phrase": "Bye."}, text) == []
    quoted = ' "All of it." '
    assert checker_span("startend:quotation", {}, quoted) == [(1, 2), (12, 13)]
    assert checker_span("startend:quotation", {}, "no quotes") == []
    assert checker_span("length_constraints:number_words", {"num_words": 5}, text) == []


def test_spans_name_each_slots_type():
    ex = Example(id="x", messages=({"role": "user", "content": "p"},),
                 reference={"instruction_id_list": ["length_constraints:number_words",
                                                    "detectable_format:title"],
                            "kwargs": [{"num_words": 5}, {}], "seed": 0})
    out = spans(ex, "<<T>> body")
    assert out == {"c2": [(0, 5)], "types": {"c2": "title"}}


def test_satisfied_constraints_add_their_shares_per_type():
    # 4 tokens; the title span covers token 0; reward c1 (title) satisfied, c2 not
    ranges = [(0, 5), (5, 6), (6, 10), (10, 12)]
    sp = {"c1": [(0, 5)], "c2": [(6, 10)], "types": {"c1": "title", "c2": "keyword"}}
    d = torch.tensor([[3.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    rec = response_record(d, ["c1", "c2"], sp, ranges, values=[1.0, 0.0])
    assert rec["type/title/dist"] == 0.75 and rec["type/title/tok"] == 0.25
    assert rec["type/title/n"] == 1.0 and "type/keyword/n" not in rec  # c2 not satisfied
    # Table 4's pooled rows: the satisfied title instance; the violated keyword one (0.25 / 0.25)
    assert (rec["type/all_satisfied/dist"], rec["type/all_satisfied/n"]) == (0.75, 1.0)
    assert rec["type/all_violated/dist"] == 0.25 and rec["type/all_violated/tok"] == 0.25
    assert rec["type/all_violated/n"] == 1.0
    assert rec["c1/span_ratio"] == 3.0
    # per type, satisfied or not: title 0.75 / 0.25 = 3; keyword 0.25 / 0.25 = 1
    assert rec["type:title/span_ratio"] == 3.0 and rec["type:keyword/span_ratio"] == 1.0
    other = {"type/title/dist": 0.5, "type/title/tok": 0.1, "type/title/n": 3.0}
    out = summarise([rec, other])
    assert out["diag/type/title/n"] == 4.0
    assert abs(out["diag/type/title/dist"] - (0.75 + 3 * 0.5) / 4) < 1e-12
