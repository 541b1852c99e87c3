"""Quirks of the benchmarks' published files: gold queries that fail in SQLite, Spider-DK's own
layout."""
import math

import pytest

from harness.results import make_record
from tasks import TASKS
from tasks.sql import evaluate
from tasks.sql.evaluate import SqlOptions
from tasks.sql.loaders import load_split
from tasks.sql.schema import tables_entry

from tests.sql.conftest import CONCERT, PETS, build_db, write_json


def answer(sql: str) -> str:
    return f"<think>Look at the tables.</think>\n<answer>\n```sql\n{sql}\n```\n</answer>"


# A translated column named with a reserved word, as in published dev sets whose gold queries
# fail in SQLite: `alter` must be quoted, the gold query does not quote it.
SHOP = """
CREATE TABLE item (item_id INTEGER PRIMARY KEY, name TEXT, "alter" INTEGER);
INSERT INTO item VALUES (1, 'pen', 3), (2, 'cup', 5), (3, 'hat', 5);
"""
DEV = [
    {"db_id": "shop", "question": "How many items?", "query": "SELECT count(*) FROM item"},
    {"db_id": "shop", "question": "Alter of each item?", "query": "SELECT alter FROM item"},
    {"db_id": "shop", "question": "Names of items.", "query": "SELECT name FROM item"},
    {"db_id": "shop", "question": "Items with alter 5?",
     "query": "SELECT name FROM item WHERE alter = 5"},
]
BROKEN = {1, 3}  # indices of the items whose gold query fails


@pytest.fixture(scope="module")
def shop_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("shop")
    path = build_db(root / "spider" / "database" / "shop" / "shop.sqlite", SHOP)
    write_json(root / "spider" / "tables.json", [tables_entry("shop", path)])
    write_json(root / "spider" / "dev.json", DEV)
    return root


@pytest.mark.parametrize("kind", ["gold as prediction", "failing", "running", "no query"])
def test_gold_failures_do_not_depend_on_the_predictions(shop_dir, kind):
    examples = load_split(shop_dir, "spider-dev")
    responses = {"gold as prediction": [answer(e.reference) for e in examples],
                 "failing": [answer("SELECT nothing FROM nowhere")] * 4,
                 "running": [answer("SELECT name FROM item")] * 4,
                 "no query": ["I do not know."] * 4}[kind]
    scored = evaluate.score(examples, responses, SqlOptions())
    assert scored["metrics"]["gold_failures"] == len(BROKEN)
    assert [p["id"] for p in scored["problems"]] == [f"spider-dev-{i}" for i in sorted(BROKEN)]
    assert all('near "alter": syntax error' in p["problem"] for p in scored["problems"])
    for i, item in enumerate(scored["items"]):
        assert bool(item["gold_error"]) == (i in BROKEN)
        if i in BROKEN:
            assert not item["correct"]
            if kind != "gold as prediction":  # there the prediction is the broken query
                assert "alter" not in (item["error"] or "")  # the gold's error is not its own
    rows = evaluate.reward_rows(examples, responses, SqlOptions())
    for i, row in enumerate(rows):
        assert math.isnan(row[2]) == (i in BROKEN)  # training: execution absent, not 0


def test_gold_answers_as_predictions_score_every_runnable_item(shop_dir):
    examples = load_split(shop_dir, "spider-dev")
    scored = evaluate.score(examples, [answer(e.reference) for e in examples], SqlOptions())
    assert scored["metrics"]["spider-dev"] == 50.0  # the two runnable golds; two fail
    # a run's stored result lists them too
    record = make_record(_config(), scored["metrics"], train={}, wall_seconds=0.0,
                         problems=scored["problems"])
    assert [p["id"] for p in record["problems"]] == ["spider-dev-1", "spider-dev-3"]


def test_prediction_running_where_gold_fails_is_still_executable(shop_dir):
    ex = load_split(shop_dir, "spider-dev")[1]
    row = evaluate.reward_rows([ex], [answer('SELECT "alter" FROM item')], SqlOptions())[0]
    assert row[:2] == [1.0, 1.0] and math.isnan(row[2])


def test_score_command_lists_gold_failures(shop_dir, tmp_path, capsys):
    import json

    from lab.cli import main as cli_main

    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps({"id": f"spider-dev-{i}", "response": answer("SELECT 1")})
                             + "\n" for i in range(4)))
    out = tmp_path / "scores.json"
    assert cli_main(["score", "--task", "spider-dev", "--predictions", str(preds),
                     "--data-dir", str(shop_dir), "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "2 items could not be scored fairly" in printed and "spider-dev-3" in printed
    assert json.loads(out.read_text())["metrics"]["gold_failures"] == 2


def _config():
    from harness.config import RunConfig

    return RunConfig()


# -- Spider-DK as its repository publishes it -------------------------------------------------------
@pytest.fixture(scope="module")
def dk_dir(tmp_path_factory):
    """Spider with concert_singer and pets; a Spider-DK checkout beside it with its own
    tables.json (Spider's schemas plus new_concert_singer) and database/ holding only the
    modified new_* database."""
    root = tmp_path_factory.mktemp("dk")
    spider_tables = []
    for db_id, script in (("concert_singer", CONCERT), ("pets", PETS)):
        path = build_db(root / "spider" / "database" / db_id / f"{db_id}.sqlite", script)
        spider_tables.append(tables_entry(db_id, path))
    write_json(root / "spider" / "tables.json", spider_tables)
    new = build_db(root / "spider-dk" / "database" / "new_concert_singer" /
                   "new_concert_singer.sqlite",
                   CONCERT + "INSERT INTO singer VALUES (5, 'Ed', 'Chile', 60, 1.0);")
    write_json(root / "spider-dk" / "tables.json",
               spider_tables + [tables_entry("new_concert_singer", new)])
    write_json(root / "spider-dk" / "Spider-DK.json", [
        {"db_id": "new_concert_singer", "question": "How many singers are old?",
         "query": "SELECT count(*) FROM singer WHERE age > 50"},
        {"db_id": "pets", "question": "How many dogs?",
         "query": "SELECT count(*) FROM pet WHERE kind = 'dog'"}])
    return root


def test_spider_dk_checkout_loads_without_merging(dk_dir):
    examples = TASKS.get("spider-dk").load_eval(dk_dir)
    assert [e.metadata["db_id"] for e in examples] == ["new_concert_singer", "pets"]
    assert examples[0].metadata["db_paths"][0].endswith(
        "spider-dk/database/new_concert_singer/new_concert_singer.sqlite")
    assert examples[1].metadata["db_paths"][0].endswith("spider/database/pets/pets.sqlite")
    scored = TASKS.get("spider-dk").score(examples, [answer(e.reference) for e in examples])
    assert scored["metrics"]["spider-dk"] == 100.0 and scored["metrics"]["gold_failures"] == 0
    # the modified database is the one queried: one singer over 50 there, none in Spider's
    right = evaluate.reward_rows(examples[:1], [answer("SELECT 1 FROM singer LIMIT 1")],
                                 SqlOptions())[0]
    assert right[2] == 1.0


def test_spider_dk_names_every_folder_it_looked_in(dk_dir, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(dk_dir, copy)
    shutil.rmtree(copy / "spider-dk" / "database")
    with pytest.raises(FileNotFoundError) as err:
        load_split(copy, "spider-dk")
    message = str(err.value)
    assert "spider-dk/database/new_concert_singer/new_concert_singer.sqlite or " in message
    assert "spider/database/new_concert_singer/new_concert_singer.sqlite is missing" in message
