"""Reading the JSON and JSONL files of published data sets, with errors that name file and line."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator


def read_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    """(line number, object) for each non-blank line of a JSONL file."""
    if not path.is_file():
        raise FileNotFoundError(f"missing file {path}")
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{lineno}: expected a JSON object")
            yield lineno, row


def json_value(value: Any, where: str, name: str) -> Any:
    """A field that a published format may store either as JSON text or already decoded."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}: {name!r} is a string but not valid JSON ({exc.msg})") \
                from None
    return value
