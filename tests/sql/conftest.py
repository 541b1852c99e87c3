"""A small data folder in the published Spider / Spider-Syn / Realistic / DK / BIRD layouts."""
import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from tasks.sql.schema import tables_entry

CONCERT = """
CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INTEGER,
                     net_worth REAL);
CREATE TABLE concert (concert_id INTEGER PRIMARY KEY, title TEXT, year INTEGER,
                      singer_id INTEGER, FOREIGN KEY (singer_id) REFERENCES singer(singer_id));
INSERT INTO singer VALUES (1, 'Ana', 'France', 31, 2.5), (2, 'Bo', 'Sweden', 45, NULL),
  (3, 'Cy', 'France', 27, 10.0), (4, 'Di', 'Peru', 31, 0.75);
INSERT INTO concert VALUES (1, 'Spring', 2014, 1), (2, 'Summer', 2015, 1), (3, 'Fall', 2015, 3),
  (4, 'Winter', 2016, NULL);
"""
PETS = """
CREATE TABLE owner (owner_id INTEGER PRIMARY KEY, name TEXT);
CREATE TABLE pet (pet_id INTEGER PRIMARY KEY, kind TEXT, weight REAL, owner_id INTEGER,
                  FOREIGN KEY (owner_id) REFERENCES owner(owner_id));
INSERT INTO owner VALUES (1, 'Eve'), (2, 'Fay'), (3, 'Gus');
INSERT INTO pet VALUES (1, 'dog', 12.5, 1), (2, 'cat', 3.0, 1), (3, 'dog', 20.0, 2),
  (4, 'fish', 0.1, NULL);
"""
BIG = """
CREATE TABLE a (x INTEGER);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
INSERT INTO a SELECT i FROM n;
"""

SPIDER_TRAIN = [
    {"db_id": "concert_singer", "question": "How many singers are there?",
     "query": "SELECT count(*) FROM singer"},
    {"db_id": "concert_singer", "question": "List the names of singers from France.",
     "query": "SELECT name FROM singer WHERE country = 'France'"},
]
SPIDER_DEV = [
    {"db_id": "pets", "question": "How many pets are dogs?",
     "query": "SELECT count(*) FROM pet WHERE kind = 'dog'"},
    {"db_id": "pets", "question": "Names of owners with a pet, by name.",
     "query": "SELECT DISTINCT T1.name FROM owner AS T1 JOIN pet AS T2 ON T1.owner_id = "
              "T2.owner_id ORDER BY T1.name"},
    {"db_id": "concert_singer", "question": "Average age of singers per country.",
     "query": "SELECT country, avg(age) FROM singer GROUP BY country"},
]


def build_db(path: Path, script: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.executescript(script)
    conn.commit()
    conn.close()
    return path


def write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def make_data_dir(root: Path) -> Path:
    spider = root / "spider"
    dbs = {"concert_singer": CONCERT, "pets": PETS}
    tables = []
    for db_id, script in dbs.items():
        path = build_db(spider / "database" / db_id / f"{db_id}.sqlite", script)
        build_db(spider / "test_database" / db_id / f"{db_id}.sqlite", script)
        tables.append(tables_entry(db_id, path))
    write_json(spider / "tables.json", tables)
    write_json(spider / "test_tables.json", tables)
    write_json(spider / "train_spider.json", SPIDER_TRAIN)
    write_json(spider / "dev.json", SPIDER_DEV)
    write_json(spider / "test.json", SPIDER_TRAIN)
    # a test-suite instance of pets where Gus owns the fish: distinguishes more queries
    build_db(root / "spider-test-suite" / "database" / "pets" / "pets_1.sqlite",
             PETS.replace("(4, 'fish', 0.1, NULL)", "(4, 'fish', 0.1, 3)"))
    write_json(root / "spider-syn" / "dev.json", [
        {"db_id": "pets", "SpiderQuestion": SPIDER_DEV[0]["question"],
         "SpiderSynQuestion": "How many pets are hounds?", "query": SPIDER_DEV[0]["query"]}])
    write_json(root / "spider-realistic" / "spider-realistic.json", SPIDER_DEV[:2])
    write_json(root / "spider-dk" / "Spider-DK.json", SPIDER_DEV[2:])
    bird = root / "bird" / "dev"
    path = build_db(bird / "dev_databases" / "pets" / "pets.sqlite", PETS)
    write_json(bird / "dev_tables.json", [tables_entry("pets", path)])
    write_json(bird / "dev.json", [
        {"question_id": 0, "db_id": "pets", "question": "Kinds of pets heavier than 5?",
         "evidence": "heavier refers to weight > 5", "SQL": "SELECT kind FROM pet WHERE weight > 5",
         "difficulty": "simple"},
        {"question_id": 1, "db_id": "pets", "question": "Owner of the heaviest pet?",
         "evidence": "", "SQL": "SELECT T1.name FROM owner AS T1 JOIN pet AS T2 ON "
                                "T1.owner_id = T2.owner_id ORDER BY T2.weight DESC LIMIT 1",
         "difficulty": "moderate"}])
    return root


def checksums(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory) -> Path:
    return make_data_dir(tmp_path_factory.mktemp("sqldata"))


@pytest.fixture(scope="session")
def big_db(tmp_path_factory) -> Path:
    return build_db(tmp_path_factory.mktemp("big") / "big.sqlite", BIG)
