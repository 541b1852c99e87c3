"""spider-mini: builds into Spider's layout, and every gold query scores 100 through the same
loaders, sandbox and scorer as the published data, without changing a database file."""
import json

import pytest

from tasks import TASKS, TRAIN_SETS
from tasks.sql import evaluate, mini
from tasks.sql.evaluate import SqlOptions
from tasks.sql.loaders import load_split
from tests.sql.conftest import checksums


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return mini.build(tmp_path_factory.mktemp("cache"))


def gold_response(example) -> str:
    return f"<think>Use the schema.</think>\n<answer>\n```sql\n{example.reference}\n```\n</answer>"


def test_build_is_spider_layout_and_idempotent(built, tmp_path_factory):
    spider = built / "spider"
    tables = json.loads((spider / "tables.json").read_text())
    assert len(tables) == 5
    for entry in tables:
        assert 3 <= len(entry["table_names_original"]) <= 6
        assert entry["foreign_keys"], entry["db_id"]
        assert (spider / "database" / entry["db_id"] / f"{entry['db_id']}.sqlite").is_file()
    assert mini.build(built.parent) == built  # second call reuses the folder
    assert built.name == f"spider-mini-{mini.source_hash()}"


def test_train_and_dev_use_disjoint_databases_and_questions(built):
    train = load_split(built, "spider-train", benchmark="spider-mini-train")
    dev = load_split(built, "spider-dev", benchmark="spider-mini")
    assert len(train) >= 90 and len(dev) >= 50
    assert not {e.metadata["db_id"] for e in train} & {e.metadata["db_id"] for e in dev}
    questions = [e.metadata["question"] for e in train + dev]
    assert len(set(questions)) == len(questions)
    assert {e.metadata["difficulty"] for e in dev} == {"easy", "medium", "hard", "extra"}


@pytest.mark.parametrize("split", ["spider-train", "spider-dev"])
def test_every_gold_query_is_correct_under_the_scorer(built, split):
    examples = load_split(built, split)
    before = checksums(built)
    rows = evaluate.reward_rows(examples, [gold_response(e) for e in examples], SqlOptions())
    assert all(r == [1.0, 1.0, 1.0] for r in rows), [e.reference for e, r in zip(examples, rows)
                                                      if r != [1.0, 1.0, 1.0]]
    assert checksums(built) == before


def test_registered_task_and_training_set():
    task = TASKS.get("spider-mini")
    examples = task.load_eval(None)
    assert examples[0].id == "spider-mini-0" and examples[0].metadata["benchmark"] == "spider-mini"
    scored = task.score(examples, [gold_response(e) for e in examples])
    assert scored["metrics"]["spider-mini"] == 100.0
    assert scored["metrics"]["spider-mini/extra"] == 100.0
    wrong = task.score(examples, ["<answer>```sql\nSELECT 1\n```</answer>"] * len(examples))
    assert wrong["metrics"]["spider-mini"] == 0.0 and wrong["metrics"]["format_rate"] == 0.0
    assert wrong["metrics"]["executable_rate"] == 0.0  # reads no table: not executable
    train = TRAIN_SETS.get("spider-mini-train").load(None, 0)
    assert train[0].metadata["benchmark"] == "spider-mini-train"
