"""RLLA loader on small files written in the published row schema."""
import json

import pytest

from tasks.tools.rewards import REWARDS
from tasks.tools.rlla import RllaFormatError, load_rlla

SYSTEM = (
    "You are a helpful multi-turn dialogue assistant ...\n\n**Available Tools**\n"
    "In your response, you can use the following tools:\n1. Name: reverse_string\n"
    'Description: Reverses the characters in a string.\nParameters: {"text": {"description": '
    '"The input string.", "type": "str", "default": ""}}\n\n**Output Format**\n...'
)
CALL_GOLD = ('<think> I should use the appropriate tool. </think>\n<tool_call>\n'
             '{"name": "reverse_string", "parameters": {"text": "hello"}}\n</tool_call>')
RESPONSE_GOLD = "<think> I should respond directly. </think>\n<response> Hi there! </response>"


def row(index, gold, split="train"):
    return {
        "data_source": "rlla",
        "prompt": [{"role": "system", "content": SYSTEM},
                   {"role": "user", "content": "**Dialogue Records History**\n<user> Reverse "
                                               "'hello'. </user>"}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": gold},
        "extra_info": {"split": split, "index": index},
    }


ROWS = [row(0, CALL_GOLD), row(1, RESPONSE_GOLD), row(2, CALL_GOLD)]


def write_jsonl(path, rows):
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")


def check_examples(examples, split="train"):
    assert [e.id for e in examples] == [f"rlla-{split}-{i}" for i in range(3)]
    first = examples[0]
    assert first.messages[0] == {"role": "system", "content": SYSTEM}
    assert first.messages[1]["role"] == "user"
    assert first.reference == CALL_GOLD
    assert first.info_for("format").privileged is False
    assert first.info_for("format").text == "**Output Format**\n..."  # RLLA's own, from the prompt
    assert first.info_for("format").text in first.messages[0]["content"]
    assert first.info_for("correctness").privileged is True
    assert first.info_for("correctness").text.startswith("<tool_call>\n{\"name\": \"reverse_")
    assert [r(first, CALL_GOLD) for r in REWARDS] == [1.0, 3.0]
    assert [r(examples[1], RESPONSE_GOLD) for r in REWARDS] == [1.0, 0.0]


def test_parquet(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.Table.from_pylist(ROWS), tmp_path / "train.parquet")
    pq.write_table(pa.Table.from_pylist([row(i, g, "test") for i, g in
                                         enumerate([CALL_GOLD, RESPONSE_GOLD, CALL_GOLD])]),
                   tmp_path / "test.parquet")
    check_examples(load_rlla(tmp_path, "train"))
    check_examples(load_rlla(tmp_path, "validation"), "validation")


def test_jsonl_in_published_subfolder(tmp_path):
    folder = tmp_path / "dataset" / "rlla_4k"
    folder.mkdir(parents=True)
    write_jsonl(folder / "train.jsonl", ROWS)
    check_examples(load_rlla(tmp_path))


def test_json_array(tmp_path):
    (tmp_path / "train.json").write_text(json.dumps(ROWS), encoding="utf-8")
    check_examples(load_rlla(tmp_path))


def test_malformed_jsonl_names_file_and_line(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(RllaFormatError, match=r"train\.jsonl, line 2"):
        load_rlla(tmp_path)


def test_malformed_json_array_names_file_and_line(tmp_path):
    path = tmp_path / "train.json"
    path.write_text("[\n" + json.dumps(ROWS[0]) + ",\n{not json}\n]", encoding="utf-8")
    with pytest.raises(RllaFormatError, match=r"train\.json, line 3"):
        load_rlla(tmp_path)


def test_bad_row_names_file_and_row(tmp_path):
    bad = dict(ROWS[1])
    bad["reward_model"] = {"style": "rule"}
    write_jsonl(tmp_path / "train.jsonl", [ROWS[0], bad])
    with pytest.raises(RllaFormatError, match=r"train\.jsonl, line 2: 'reward_model"):
        load_rlla(tmp_path)


def test_bad_gold_call_block(tmp_path):
    write_jsonl(tmp_path / "train.jsonl", [row(0, "<think> x </think>\n<tool_call>\n{oops\n"
                                                   "</tool_call>")])
    with pytest.raises(RllaFormatError, match=r"line 1: ground truth"):
        load_rlla(tmp_path)


def test_malformed_parquet(tmp_path):
    pytest.importorskip("pyarrow")
    (tmp_path / "train.parquet").write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(RllaFormatError, match=r"train\.parquet"):
        load_rlla(tmp_path)


def test_parquet_bad_row(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [dict(r) for r in ROWS]
    rows[2]["prompt"] = []
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "train.parquet")
    with pytest.raises(RllaFormatError, match=r"train\.parquet, row 2: 'prompt'"):
        load_rlla(tmp_path)


def test_missing_folder_lists_expected_files(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        load_rlla(tmp_path / "nope")
    message = str(info.value)
    assert "train.parquet" in message and "ToolRL" in message and "dataset/rlla_4k" in message


def test_missing_file_and_no_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"test\.parquet"):
        load_rlla(tmp_path, "validation")
    with pytest.raises(FileNotFoundError, match="train.parquet"):
        load_rlla(None)


def test_duplicate_indices_fall_back_to_positions(tmp_path):
    write_jsonl(tmp_path / "train.jsonl", [row(5, CALL_GOLD), row(5, RESPONSE_GOLD)])
    assert [e.id for e in load_rlla(tmp_path)] == ["rlla-train-0", "rlla-train-1"]


# In 17 of the 400 rows of ToolRL's rlla_4k_raw/rlla_sft.json the reasoning itself mentions the
# tag: ToolRL's reading (after the first <tool_call>) starts inside the think span.
MENTION_GOLD = ('<think> Each call goes on its own line inside the <tool_call> tags, as JSON. '
                '</think>\n<tool_call>\n{"name": "reverse_string", "parameters": {"text": "hello"}}'
                '\n{"name": "reverse_string", "parameters": {"text": "olleh"}}\n</tool_call>')


def test_reasoning_that_mentions_the_call_tag(tmp_path):
    from tasks.tools.rewards import gold_calls

    (tmp_path / "train.json").write_text(json.dumps([row(0, CALL_GOLD), row(1, MENTION_GOLD)]))
    examples = load_rlla(tmp_path)
    mention = examples[1]
    assert gold_calls(MENTION_GOLD) == [
        {"name": "reverse_string", "parameters": {"text": "hello"}},
        {"name": "reverse_string", "parameters": {"text": "olleh"}}]
    # the replayed verifier text is the answer's call block, not the reasoning
    assert mention.info_for("correctness").text == MENTION_GOLD[MENTION_GOLD.index(
        "</think>\n") + 9:]
    answer = MENTION_GOLD.replace("inside the <tool_call> tags", "inside the tags")
    assert [r(mention, answer) for r in REWARDS] == [1.0, 3.0]
    one = answer.replace('\n{"name": "reverse_string", "parameters": {"text": "olleh"}}', "")
    # names: Jaccard([r, r], [r]) = 1/2; hello matched: keys 1 + value 1; S_max = 1 + 2 + 2
    assert REWARDS[1](mention, one) == pytest.approx(6 * (0.5 + 2) / 5 - 3)


def test_a_row_whose_answer_block_is_not_json_is_named(tmp_path):
    broken = MENTION_GOLD.replace('{"name": "reverse_string", "parameters": {"text": "olleh"}}',
                                  "reverse_string(text='olleh')")
    (tmp_path / "train.json").write_text(json.dumps([row(0, CALL_GOLD), row(1, broken)]))
    with pytest.raises(RllaFormatError, match=r"train.json, row 1: ground truth has an "
                                              r"unparseable <tool_call> block"):
        load_rlla(tmp_path)
