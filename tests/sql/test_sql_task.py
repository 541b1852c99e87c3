"""Loaders of the published formats, the prompt and format check, rewards and the scorer."""
import json
import math

import pytest

from lab.cli import main as cli_main
from harness.task_config import task_config
from methods.contexts import replay_messages
from tasks import TASKS, TRAIN_SETS
from tasks.sql import evaluate
from tasks.sql.evaluate import SqlOptions
from tasks.sql.loaders import load_split
from tasks.sql.layout import FORMAT_SPEC, count_statements, extract_sql, format_ok
from tasks.sql.prompt import spans
from tasks.sql.schema import schema_text

def flags(task: str, **values):
    """The family options object of ``task`` with these values (what ``configured`` binds)."""
    return task_config({"task": task, **values}).options



def answer(sql: str, think: str = "Look at the tables.") -> str:
    return f"<think>{think}</think>\n<answer>\n```sql\n{sql}\n```\n</answer>"


# -- loaders --------------------------------------------------------------------------------------
@pytest.mark.parametrize("split, n, semantics", [
    ("spider-train", 2, "spider"), ("spider-dev", 3, "spider"), ("spider-test", 2, "spider"),
    ("spider-syn", 1, "spider"), ("spider-realistic", 2, "spider"), ("spider-dk", 1, "spider"),
    ("bird-dev", 2, "bird"),
])
def test_each_published_format_loads(data_dir, split, n, semantics):
    examples = load_split(data_dir, split)
    assert len(examples) == n
    ex = examples[0]
    assert ex.id == f"{split}-0" and ex.metadata["semantics"] == semantics
    assert [i.reward for i in ex.verifier_info] == ["format", "executable", "execution"]
    assert ex.info_for("execution").text == ex.reference and ex.info_for("execution").privileged
    schema = ex.info_for("executable").text
    assert "CREATE TABLE" in schema and schema in ex.messages[1]["content"]
    assert FORMAT_SPEC in ex.messages[0]["content"]


def test_split_specific_fields(data_dir):
    assert load_split(data_dir, "spider-syn")[0].metadata["question"] == "How many pets are hounds?"
    bird = load_split(data_dir, "bird-dev")
    assert "External knowledge: heavier refers to weight > 5" in bird[0].messages[1]["content"]
    assert bird[1].metadata["category"] == "bird-dev/moderate"
    dev = load_split(data_dir, "spider-dev")
    assert [len(e.metadata["db_paths"]) for e in dev] == [2, 2, 1]  # test-suite instance of pets
    assert len(load_split(data_dir, "spider-dev", use_test_suite=False)[0].metadata["db_paths"]) == 1


def test_missing_files_are_named(tmp_path, data_dir):
    with pytest.raises(FileNotFoundError, match="spider-dk"):
        load_split(tmp_path, "spider-dk")
    with pytest.raises(ValueError, match="--data-dir"):
        load_split(None, "spider-dev")
    (tmp_path / "spider").mkdir()
    (tmp_path / "spider" / "tables.json").write_text("[]")
    (tmp_path / "spider" / "database").mkdir()
    with pytest.raises(FileNotFoundError, match="dev.json"):
        load_split(tmp_path, "spider-dev")


def test_malformed_files_name_file_and_item(tmp_path, data_dir):
    import shutil
    shutil.copytree(data_dir / "spider", tmp_path / "spider")
    dev = tmp_path / "spider" / "dev.json"
    dev.write_text('[{"db_id": "pets",\n "question": "q", "query": }]')
    with pytest.raises(ValueError, match=r"dev.json:2: not valid JSON"):
        load_split(tmp_path, "spider-dev")
    dev.write_text(json.dumps([{"db_id": "pets", "question": "q", "query": "SELECT 1"},
                               {"db_id": "pets", "question": "q"}]))
    with pytest.raises(ValueError, match=r"dev.json: item 1: missing or empty string field 'query'"):
        load_split(tmp_path, "spider-dev")
    dev.write_text(json.dumps([{"db_id": "nope", "question": "q", "query": "SELECT 1"}]))
    with pytest.raises(ValueError, match="db_id 'nope' is not in"):
        load_split(tmp_path, "spider-dev")


def test_schema_with_sample_rows(data_dir):
    db = str(data_dir / "spider" / "database" / "pets" / "pets.sqlite")
    plain = schema_text(db)
    assert plain.count("CREATE TABLE") == 2 and "example rows" not in plain
    rows = schema_text(db, 2)
    assert "/* 2 example rows of pet:\npet_id | kind | weight | owner_id\n1 | 'dog' | 12.5 | 1" in rows


# -- prompt and format ----------------------------------------------------------------------------
def test_format_check():
    assert format_ok(answer("SELECT 1"))
    assert format_ok(answer("SELECT ';' FROM t; -- one statement"))
    assert not format_ok(answer("SELECT 1; SELECT 2"))
    assert not format_ok(answer("SELECT 1", think=" "))  # empty reasoning
    assert not format_ok(answer("SELECT 1") + " trailing")
    assert not format_ok("<answer>```sql\nSELECT 1\n```</answer>")  # no reasoning
    assert not format_ok("<think>a</think><answer>SELECT 1</answer>")  # no code block
    assert not format_ok("<think>a</think><think>b</think>" + answer("SELECT 1")[15:])
    assert count_statements("SELECT 1;") == 1 and count_statements("SELECT 'a;b'") == 1
    assert count_statements("SELECT 1; SELECT 2;") == 2 and count_statements("'open") == -1


def test_extraction_is_lenient_and_takes_the_last_query():
    assert extract_sql(answer("SELECT 1")) == "SELECT 1"
    assert extract_sql("<answer> SELECT 2 </answer>") == "SELECT 2"
    assert extract_sql("```sql\nSELECT 1\n```\nbetter:\n```sql\nSELECT 3\n```") == "SELECT 3"
    assert extract_sql("```\nSELECT 4\n```") == "SELECT 4"
    assert extract_sql("I do not know.") is None
    assert extract_sql("<answer>   </answer>") is None


def test_spans_cover_tags_and_query():
    text = answer("SELECT name FROM pet")
    s = spans(None, text)
    assert [text[a:b] for a, b in s["executable"]] == ["SELECT name FROM pet"]
    assert {text[a:b] for a, b in s["format"]} == {"<think>", "</think>", "<answer>", "</answer>",
                                                   "```sql", "```"}


def test_replay_contexts_drop_the_schema_and_add_the_gold(data_dir):
    ex = load_split(data_dir, "spider-dev")[0]
    without_schema = replay_messages(ex, {"format", "execution"})
    assert "CREATE TABLE" not in without_schema[1]["content"]
    assert ex.reference in without_schema[1]["content"]
    assert "CREATE TABLE" in replay_messages(ex, {"executable"})[1]["content"]


# -- rewards and scoring --------------------------------------------------------------------------
def test_three_rewards_on_hand_written_responses(data_dir):
    ex = load_split(data_dir, "spider-dev")[0]  # SELECT count(*) FROM pet WHERE kind = 'dog'
    cases = {
        answer("SELECT count(*) FROM pet WHERE kind = 'dog'"): [1, 1, 1],
        answer("SELECT count(pet_id) FROM pet WHERE kind = 'dog'"): [1, 1, 1],
        answer("SELECT count(*) FROM pet WHERE kind = 'cat'"): [1, 1, 0],
        answer("SELECT count(*) FROM pets"): [1, 0, 0],  # no such table
        "```sql\nSELECT count(*) FROM pet WHERE kind = 'dog'\n```": [0, 1, 1],  # layout wrong
        "There are two dogs.": [0, 0, 0],
    }
    rows = evaluate.reward_rows([ex] * len(cases), list(cases), SqlOptions())
    assert rows == [[float(v) for v in want] for want in cases.values()]
    task = TASKS.get("spider-mini")
    # a constant equal to the gold's result: correct as the official scorers compare, but it
    # asks the database nothing, so it is not executable (the per-reward path agrees)
    assert [r(ex, answer("SELECT 2")) for r in task.rewards] == [1.0, 0.0, 1.0]


def test_spider_dev_uses_test_suite_databases(data_dir):
    # "Owners with a pet" differs between the two instances once Gus owns the fish: a query that
    # hard-codes the first instance's answer passes there and fails on the test suite.
    ex = load_split(data_dir, "spider-dev")[1]
    hard_coded = answer("SELECT name FROM owner WHERE name IN ('Eve', 'Fay') ORDER BY name")
    right = answer("SELECT name FROM owner WHERE owner_id IN (SELECT owner_id FROM pet) "
                   "ORDER BY name")
    wrong_order = answer("SELECT name FROM owner WHERE owner_id IN (SELECT owner_id FROM pet) "
                         "ORDER BY name DESC")
    keep = SqlOptions(keep_distinct=True)  # gold: DISTINCT names (Eve twice without it)
    rows = evaluate.reward_rows([ex] * 3, [hard_coded, right, wrong_order], keep)
    assert [r[2] for r in rows] == [0.0, 1.0, 0.0]
    single = load_split(data_dir, "spider-dev", use_test_suite=False)[1]
    assert evaluate.reward_rows([single], [hard_coded], keep)[0][2] == 1.0


def test_distinct_is_dropped_unless_kept(data_dir):
    ex = load_split(data_dir, "spider-dev")[1]  # gold has DISTINCT and ORDER BY
    dup = answer("SELECT T1.name FROM owner AS T1 JOIN pet AS T2 ON T1.owner_id = T2.owner_id "
                 "ORDER BY T1.name")  # Eve twice
    assert evaluate.reward_rows([ex], [dup], SqlOptions())[0][2] == 1.0  # Spider's default
    assert evaluate.reward_rows([ex], [dup], SqlOptions(keep_distinct=True))[0][2] == 0.0


def test_gold_failure_makes_execution_absent(data_dir):
    from dataclasses import replace
    ex = load_split(data_dir, "spider-dev")[0]
    broken = replace(ex, reference="SELECT nope FROM pet")
    row = evaluate.reward_rows([broken], [answer("SELECT 1 FROM pet")], SqlOptions())[0]
    assert row[:2] == [1.0, 1.0] and math.isnan(row[2])
    scored = evaluate.score([broken], [answer("SELECT 1 FROM pet")], SqlOptions())
    assert scored["metrics"]["gold_failures"] == 1 and not scored["items"][0]["correct"]


def test_bird_uses_set_equality(data_dir):
    ex = load_split(data_dir, "bird-dev")[0]  # SELECT kind FROM pet WHERE weight > 5: dog, dog
    rows = evaluate.reward_rows([ex] * 2, [answer("SELECT DISTINCT kind FROM pet WHERE weight > 5"),
                                           answer("SELECT kind, 1 FROM pet WHERE weight > 5")],
                                SqlOptions())
    assert [r[2] for r in rows] == [1.0, 0.0]


def test_score_metrics_and_average(data_dir):
    task = TASKS.get("text2sql")
    examples = task.load_eval(data_dir)
    assert {e.metadata["benchmark"] for e in examples} == {
        "spider-dev", "spider-test", "spider-syn", "spider-realistic", "spider-dk", "bird-dev"}
    golds = [answer(e.reference) for e in examples]
    scored = task.score(examples, golds)
    m = scored["metrics"]
    assert m["average"] == 100.0 and m["executable_rate"] == 100.0 and m["format_rate"] == 100.0
    assert m["bird-dev/simple"] == 100.0 and m["gold_failures"] == 0
    half = [g if i % 2 == 0 else "no" for i, g in enumerate(golds)]
    m = task.score(examples, half)["metrics"]
    expected = {}
    for b in {e.metadata["benchmark"] for e in examples}:
        idx = [i for i, e in enumerate(examples) if e.metadata["benchmark"] == b]
        expected[b] = 100.0 * sum(i % 2 == 0 for i in idx) / len(idx)
        assert m[b] == pytest.approx(expected[b])
    assert m["average"] == pytest.approx(sum(expected.values()) / 6)


def test_options_reach_the_task_through_bind(data_dir):
    task = TASKS.get("spider-dev").configured(flags("spider-dev", sql_sample_rows=1))
    assert "example rows" in task.load_eval(data_dir)[0].messages[1]["content"]
    train = TRAIN_SETS.get("spider").configured(flags("spider-dev", sql_sample_rows=1))
    assert "example rows" in train.load(data_dir, 0)[0].messages[1]["content"]


def test_score_command(tmp_path, data_dir, capsys):
    examples = TASKS.get("spider-dev").load_eval(data_dir)
    preds = tmp_path / "preds.jsonl"
    preds.write_text("\n".join(json.dumps({"id": e.id, "response": answer(e.reference)})
                               for e in examples[:2]) + "\n")
    out = tmp_path / "scores.json"
    assert cli_main(["score", "--task", "spider-dev", "--predictions", str(preds),
                     "--data-dir", str(data_dir), "--sql-timeout", "2",
                     "--output", str(out), "--partial"]) == 0
    printed = capsys.readouterr().out
    assert "spider-dev: PARTIAL, 2 of 3 items scored" in printed
    assert json.loads(out.read_text())["metrics"]["spider-dev"] == 100.0
    # without --partial the item without a prediction counts as wrong
    assert cli_main(["score", "--task", "spider-dev", "--predictions", str(preds),
                     "--data-dir", str(data_dir), "--output", str(out)]) == 0
    assert json.loads(out.read_text())["metrics"]["spider-dev"] == pytest.approx(200 / 3)
