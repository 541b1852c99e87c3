"""Fields of published data sets that may be JSON text or already decoded (JSONL files are
read by :func:`common.jsonl.read_jsonl`)."""
from __future__ import annotations

import json
from typing import Any


def json_value(value: Any, where: str, name: str) -> Any:
    """A field that a published format may store either as JSON text or already decoded."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}: {name!r} is a string but not valid JSON ({exc.msg})") \
                from None
    return value
