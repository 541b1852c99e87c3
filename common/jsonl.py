"""Reading JSON-lines files (data sets, per-step training logs) with errors that name the file
and the line."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator


def read_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    """(line number, object) for each non-blank line of a JSONL file."""
    path = Path(path)
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
