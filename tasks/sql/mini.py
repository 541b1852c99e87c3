"""spider-mini: a small Spider-format set written for this project, built once into a cache.

Sources live in ``tasks/sql/spider_mini/``: one SQL script per database
(``databases/<db>.sql``: CREATE TABLE with keys, then INSERTs) and Spider's question files
(``train_spider.json`` over three databases, ``dev.json`` over two others: like Spider, train
and dev databases are disjoint). :func:`build` turns them into a folder in Spider's published
layout (``spider/{train_spider.json, dev.json, tables.json, database/<db>/<db>.sqlite}``) so the
same loaders, sandbox and scorer serve it as the real data.

The folder is named by a hash of the sources, built in a temporary folder and renamed into
place, so concurrent builders (Ray workers) never see a half-written set and an edited source
gives a new folder.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

from tasks.sql.schema import tables_entry

SOURCE = Path(__file__).with_name("spider_mini")
QUESTION_FILES = ("train_spider.json", "dev.json")


def default_cache() -> Path:
    return Path(__file__).resolve().parents[2] / ".cache" / "data"


def _scripts() -> list[Path]:
    scripts = sorted((SOURCE / "databases").glob("*.sql"))
    if not scripts:
        raise FileNotFoundError(f"spider-mini sources are missing: no {SOURCE}/databases/*.sql")
    return scripts


def source_hash() -> str:
    digest = hashlib.sha256()
    for path in _scripts() + [SOURCE / name for name in QUESTION_FILES]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def build(cache: Path | None = None) -> Path:
    """The built data folder (its ``spider/`` holds the Spider layout); built on first use."""
    cache = Path(cache) if cache is not None else default_cache()
    target = cache / f"spider-mini-{source_hash()}"
    if (target / "spider" / "tables.json").is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".spider-mini-", dir=cache))
    try:
        spider = work / "spider"
        tables = []
        for script in _scripts():
            db_id = script.stem
            db_path = spider / "database" / db_id / f"{db_id}.sqlite"
            db_path.parent.mkdir(parents=True)
            shutil.copy(script, db_path.parent / "schema.sql")
            conn = sqlite3.connect(db_path)
            try:
                conn.executescript(script.read_text(encoding="utf-8"))
                conn.commit()
            except sqlite3.Error as exc:
                raise ValueError(f"{script}: {exc}") from None
            finally:
                conn.close()
            tables.append(tables_entry(db_id, db_path))
        (spider / "tables.json").write_text(json.dumps(tables, indent=2) + "\n", encoding="utf-8")
        for name in QUESTION_FILES:
            shutil.copy(SOURCE / name, spider / name)
        try:
            os.rename(work, target)
        except OSError:  # another process finished first: its folder is the same
            if not (target / "spider" / "tables.json").is_file():
                raise
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return target
