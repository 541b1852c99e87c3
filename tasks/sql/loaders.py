"""Loaders for the published text-to-SQL formats, read from a data folder.

Expected layout under ``--data-dir`` (each benchmark needs only its own entries)::

    spider/                        Spider 1.0 release (the folder may also be named spider_data)
      train_spider.json  dev.json  test.json
      tables.json  test_tables.json
      database/<db>/<db>.sqlite    test_database/<db>/<db>.sqlite
    spider-test-suite/database/<db>/*.sqlite   optional: test-suite databases for dev
    spider-syn/dev.json            Spider-Syn (SpiderSynQuestion), over Spider's databases
    spider-realistic/spider-realistic.json
    spider-dk/                     a checkout of the Spider-DK repository, as published:
      Spider-DK.json  tables.json  database/new_<db>/new_<db>.sqlite
                                   (its other databases are Spider's, found in spider/database)
    bird/dev/                      BIRD dev release (the folder may also be bird/ itself)
      dev.json  dev_tables.json  dev_databases/<db>/<db>.sqlite

Question files are JSON lists of objects with ``db_id``, the question (``question``, or
``SpiderSynQuestion``) and the gold query (``query``, or BIRD's ``SQL``); BIRD's ``evidence``
and ``difficulty`` are kept. A malformed file is an error naming the file and the item.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from tasks.base import Example, VerifierInfo
from tasks.sql.layout import FORMAT_SPEC
from tasks.sql.prompt import build_messages
from tasks.sql.schema import schema_text


@dataclass(frozen=True)
class Split:
    """One question file of a benchmark and where its databases and tables are."""

    name: str  # the benchmark's name in results, e.g. "spider-dev"
    root: tuple[str, ...]  # candidate folders under the data folder, first existing wins
    questions: tuple[str, ...]  # question files under the root, concatenated
    # tables.json candidates, first existing wins: under the root, or "spider:<file>" for
    # Spider's
    tables: tuple[str, ...]
    # database folders, searched in order for each db_id: under the root, or "spider:<folder>"
    databases: tuple[str, ...]
    question_key: str = "question"
    query_key: str = "query"
    semantics: str = "spider"  # result equality: "spider" (test-suite) or "bird" (set)
    test_suite: bool = False  # use spider-test-suite databases when present


SPIDER = ("spider", "spider_data")
SPLITS = {
    "spider-train": Split("spider-train", SPIDER, ("train_spider.json",), ("tables.json",),
                          ("database",)),
    "spider-dev": Split("spider-dev", SPIDER, ("dev.json",), ("tables.json",), ("database",),
                        test_suite=True),
    "spider-test": Split("spider-test", SPIDER, ("test.json",), ("test_tables.json",),
                         ("test_database",)),
    "spider-syn": Split("spider-syn", ("spider-syn",), ("dev.json",), ("spider:tables.json",),
                        ("spider:database",), question_key="SpiderSynQuestion"),
    "spider-realistic": Split("spider-realistic", ("spider-realistic",),
                              ("spider-realistic.json",), ("spider:tables.json",),
                              ("spider:database",)),
    # a checkout of the Spider-DK repository: its own tables.json (Spider's schemas plus its
    # modified new_* databases) and database/ with only those; the rest are Spider's
    "spider-dk": Split("spider-dk", ("spider-dk", "Spider-DK"), ("Spider-DK.json",),
                       ("tables.json", "spider:tables.json"), ("database", "spider:database")),
    "bird-dev": Split("bird-dev", ("bird/dev", "bird"), ("dev.json",), ("dev_tables.json",),
                      ("dev_databases",), query_key="SQL", semantics="bird"),
}


def _root(data_dir: Path, candidates: Sequence[str], what: str) -> Path:
    for name in candidates:
        if (data_dir / name).is_dir():
            return data_dir / name
    raise FileNotFoundError(
        f"{what}: none of {', '.join(str(data_dir / c) for c in candidates)} exists. "
        f"Expected layout under the data folder: see tasks/sql/loaders.py (e.g. "
        f"{data_dir / candidates[0]}/…)")


def _resolve(data_dir: Path, root: Path, entry: str, split: Split) -> Path:
    if entry.startswith("spider:"):
        return _root(data_dir, SPIDER, f"{split.name} uses Spider's databases") / entry[7:]
    return root / entry


def _tables_file(data_dir: Path, root: Path, split: Split) -> Path:
    """The first of the split's tables.json candidates that exists (the last one, to be named
    as missing, when none does)."""
    candidates = [_resolve(data_dir, root, e, split) for e in split.tables]
    return next((p for p in candidates if p.is_file()), candidates[-1])


def _database_folders(data_dir: Path, root: Path, split: Split) -> list[Path]:
    """The split's database folders in search order; an error naming them when none
    exists."""
    candidates = [_resolve(data_dir, root, entry, split) for entry in split.databases]
    if not any(p.is_dir() for p in candidates):
        raise FileNotFoundError(f"{split.name}: missing database folder "
                                f"{' or '.join(str(p) for p in candidates)}")
    return candidates


def _read_json_list(path: Path) -> list:
    if not path.is_file():
        raise FileNotFoundError(f"missing file {path}")
    try:
        with path.open(encoding="utf-8") as fh:
            data = json.load(fh)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 ({exc})") from None
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list, got {type(data).__name__}")
    return data


def read_tables(path: Path) -> dict[str, dict]:
    """``tables.json`` as {db_id: entry}."""
    out = {}
    for i, entry in enumerate(_read_json_list(path)):
        if not isinstance(entry, dict) or not isinstance(entry.get("db_id"), str):
            raise ValueError(f"{path}: item {i} has no string 'db_id'")
        out[entry["db_id"]] = entry
    return out


def database_path(folder: Path, db_id: str) -> Path:
    return folder / db_id / f"{db_id}.sqlite"


def test_suite_paths(data_dir: Path, db_id: str, main: Path) -> list[Path]:
    """The main database first, then the test-suite instances of ``db_id`` (if installed)."""
    folder = data_dir / "spider-test-suite" / "database" / db_id
    extra = sorted(p for p in folder.glob("*.sqlite") if p.name != main.name) \
        if folder.is_dir() else []
    return [main] + extra


def make_example(ex_id: str, db_id: str, question: str, query: str, db_paths: Sequence[Path],
                 semantics: str, benchmark: str, evidence: str = "", difficulty: str = "",
                 sample_rows: int = 0) -> Example:
    """An Example with the three rewards' verifier information (format spec, schema, gold)."""
    schema = schema_text(str(db_paths[0]), sample_rows)
    return Example(
        id=ex_id,
        messages=build_messages(schema, question, evidence),
        reference=query,
        verifier_info=(VerifierInfo("format", FORMAT_SPEC, privileged=False),
                       VerifierInfo("executable", schema, privileged=False),
                       VerifierInfo("execution", query, privileged=True)),
        metadata={"category": benchmark if not difficulty else f"{benchmark}/{difficulty}",
                  "benchmark": benchmark, "db_id": db_id,
                  "db_paths": tuple(str(p) for p in db_paths), "semantics": semantics,
                  "difficulty": difficulty, "question": question, "evidence": evidence},
    )


def load_split(data_dir: Path | None, split_name: str, sample_rows: int = 0,
               use_test_suite: bool = True, benchmark: str | None = None) -> list[Example]:
    """All items of one split as Examples, ids ``<benchmark>-<index>`` (the benchmark name
    defaults to the split's)."""
    if split_name not in SPLITS:
        raise ValueError(f"unknown text-to-SQL split {split_name!r}; known: {', '.join(SPLITS)}")
    split = SPLITS[split_name]
    if data_dir is None:
        raise ValueError(f"{split_name} is read from --data-dir (published format; see "
                         "tasks/sql/loaders.py for the layout); without one, use spider-mini")
    data_dir = Path(data_dir)
    root = _root(data_dir, split.root, split_name)
    tables_path = _tables_file(data_dir, root, split)
    db_folders = _database_folders(data_dir, root, split)
    tables = read_tables(tables_path)
    benchmark = benchmark or split_name
    examples: list[Example] = []
    for file_name in split.questions:
        path = root / file_name
        for i, item in enumerate(_read_json_list(path)):
            where = f"{path}: item {i}"
            if not isinstance(item, dict):
                raise ValueError(f"{where}: expected an object")
            question = item.get(split.question_key, item.get("question"))
            query, db_id = item.get(split.query_key), item.get("db_id")
            for key, value in ((split.question_key, question), (split.query_key, query),
                               ("db_id", db_id)):
                if not isinstance(value, str) or not value.strip():
                    raise ValueError(f"{where}: missing or empty string field {key!r}")
            if db_id not in tables:
                raise ValueError(f"{where}: db_id {db_id!r} is not in {tables_path}")
            found = [database_path(f, db_id) for f in db_folders]
            main = next((p for p in found if p.is_file()), None)
            if main is None:
                raise FileNotFoundError(f"{where}: database file "
                                        f"{' or '.join(str(p) for p in found)} is missing")
            paths = test_suite_paths(data_dir, db_id, main) \
                if split.test_suite and use_test_suite else [main]
            examples.append(make_example(
                f"{benchmark}-{len(examples)}", db_id, question, query, paths, split.semantics,
                benchmark, evidence=str(item.get("evidence") or ""),
                difficulty=str(item.get("difficulty") or ""), sample_rows=sample_rows))
    if not examples:
        raise ValueError(f"{split_name}: no items in {root}")
    return examples
