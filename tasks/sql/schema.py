"""Database schemas: the prompt's CREATE TABLE text, and Spider's ``tables.json`` entries.

Both are read from the SQLite file itself (opened read-only): the prompt shows the statements
SQLite stores in ``sqlite_master``, so the model sees exactly the names and types the executor
will resolve, optionally followed by a few sample rows per table.
"""
from __future__ import annotations

import functools
import sqlite3
import urllib.parse
from pathlib import Path


def connect_readonly(path: str | Path) -> sqlite3.Connection:
    """A read-only, lock-free connection to a benchmark file (for our own fixed queries)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"database file not found: {path}")
    uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro&immutable=1"
    conn = sqlite3.connect(uri, uri=True)
    conn.text_factory = lambda b: b.decode(errors="ignore")
    return conn


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _value(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, str):
        v = v if len(v) <= 60 else v[:57] + "..."
        return "'" + v.replace("'", "''").replace("\n", " ") + "'"
    if isinstance(v, bytes):
        return f"<{len(v)} bytes>"
    return repr(v)


@functools.lru_cache(maxsize=1024)
def schema_text(path: str, sample_rows: int = 0) -> str:
    """The CREATE TABLE statements of a database, in file order; with ``sample_rows > 0`` each is
    followed by a comment holding that many of its rows."""
    conn = connect_readonly(path)
    try:
        tables = conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' "
            "AND name NOT LIKE 'sqlite_%' AND sql IS NOT NULL ORDER BY rowid").fetchall()
        parts = []
        for name, sql in tables:
            text = sql.strip().rstrip(";") + ";"
            if sample_rows > 0:
                cursor = conn.execute(f"SELECT * FROM {_quote(name)} LIMIT {int(sample_rows)}")
                columns = [d[0] for d in cursor.description]
                rows = cursor.fetchall()
                lines = [f"/* {len(rows)} example rows of {name}:", " | ".join(columns)]
                lines += [" | ".join(_value(v) for v in row) for row in rows]
                text += "\n" + "\n".join(lines) + " */"
            parts.append(text)
    finally:
        conn.close()
    if not parts:
        raise ValueError(f"database {path} has no tables")
    return "\n\n".join(parts)


def tables_entry(db_id: str, path: str | Path) -> dict:
    """Spider's ``tables.json`` entry for one database, derived from the file (natural-language
    names are the original names with underscores as spaces, lower-cased)."""
    conn = connect_readonly(path)
    try:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY rowid")]
        columns: list[list] = [[-1, "*"]]
        types = ["text"]
        primary, foreign = [], []
        index: dict[tuple[str, str], int] = {}
        for t, table in enumerate(tables):
            for cid, name, ctype, _notnull, _default, pk in conn.execute(
                    f"PRAGMA table_info({_quote(table)})"):
                index[(table.lower(), name.lower())] = len(columns)
                if pk:
                    primary.append(len(columns))
                columns.append([t, name])
                kind = (ctype or "").lower()
                types.append("number" if any(k in kind for k in ("int", "real", "num", "float",
                                                                  "double", "dec"))
                             else "time" if "date" in kind or "time" in kind else "text")
        for table in tables:
            for row in conn.execute(f"PRAGMA foreign_key_list({_quote(table)})"):
                ref_table, src, dst = row[2], row[3], row[4]
                if dst is None:  # references the primary key implicitly
                    dst = next(n for (tb, n), i in index.items()
                               if tb == ref_table.lower() and i in primary)
                foreign.append([index[(table.lower(), src.lower())],
                                index[(ref_table.lower(), dst.lower())]])
    finally:
        conn.close()

    def natural(name: str) -> str:
        return name.replace("_", " ").lower()

    return {
        "db_id": db_id,
        "table_names_original": tables,
        "table_names": [natural(t) for t in tables],
        "column_names_original": columns,
        "column_names": [[t, natural(n) if t >= 0 else n] for t, n in columns],
        "column_types": types,
        "primary_keys": primary,
        "foreign_keys": foreign,
    }
