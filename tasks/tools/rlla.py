"""Loader of RLLA, the ToolRL training data, in its published form.

Published by qiancheng0/ToolRL in ``dataset/rlla_4k/``: ``train.parquet`` (3,920 rows) and
``test.parquet`` (80 rows, the paper's validation split), verl's RL row schema::

    {"data_source": "rlla",
     "prompt": [{"role": "system", "content": <instruction with the tool list and format>},
                {"role": "user", "content": "**Dialogue Records History**\\n<user> ... </user>"}],
     "ability": ..., "reward_model": {"style": "rule", "ground_truth": <gold output>},
     "extra_info": {"split": ..., "index": ..., ...}}

The same rows as JSON lines (``train.jsonl``) or a JSON array (``train.json``) are accepted too.
The prompt messages are kept exactly as published (their system prompt is RLLA's own text).
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Iterator

from tasks.base import Example
from tasks.tools.prompt import FORMAT_SPEC
from tasks.tools.rewards import gold_calls, verifier_info

SOURCE_HINT = (
    "RLLA is published in the ToolRL repository (https://github.com/qiancheng0/ToolRL, folder "
    "dataset/rlla_4k: train.parquet and test.parquet); copy those files into the data folder"
)
FORMAT_HEADER = "**Output Format**"  # where RLLA's system prompt starts its format instructions
# split name -> published file stem
SPLIT_FILES = {"train": "train", "validation": "test", "test": "test"}
EXTENSIONS = (".parquet", ".jsonl", ".json")
# Sub-folders searched under the user's data folder, so it may point at the ToolRL checkout, its
# dataset folder, or the rlla_4k folder itself.
SUBDIRS = ("", "rlla_4k", "rlla", "dataset/rlla_4k", "ToolRL/dataset/rlla_4k")


class RllaFormatError(ValueError):
    """A data file that does not follow the published RLLA row schema."""


def find_file(data_dir: Path | str | None, split: str = "train") -> Path:
    """The file holding ``split``; raises FileNotFoundError listing the expected names."""
    if split not in SPLIT_FILES:
        raise ValueError(f"unknown RLLA split {split!r}; expected one of {sorted(SPLIT_FILES)}")
    stem = SPLIT_FILES[split]
    expected = [f"{stem}{ext}" for ext in EXTENSIONS]
    if data_dir is None:
        raise FileNotFoundError(
            f"RLLA needs a data folder (none was given); expected {' or '.join(expected)} in it "
            f"or in one of its sub-folders {[s for s in SUBDIRS if s]}. {SOURCE_HINT}."
        )
    root = Path(data_dir).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(
            f"RLLA data folder {str(root)!r} does not exist; expected {' or '.join(expected)} "
            f"in it. {SOURCE_HINT}."
        )
    for sub in SUBDIRS:
        for name in expected:
            path = root / sub / name
            if path.is_file():
                return path
    raise FileNotFoundError(
        f"no RLLA {split} file in {str(root)!r}: expected {' or '.join(expected)} there or in "
        f"one of {[s for s in SUBDIRS if s]}. {SOURCE_HINT}."
    )


def _rows_parquet(path: Path) -> Iterator[tuple[str, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - pyarrow ships with ray in our installs
        raise ImportError(
            f"reading {path} needs pyarrow (pip install pyarrow), or convert it to JSON lines"
        ) from exc
    try:
        rows = pq.read_table(path).to_pylist()
    except Exception as exc:
        raise RllaFormatError(f"{path}: not a readable parquet file ({exc})") from exc
    for i, row in enumerate(rows):
        yield f"row {i}", row


def _rows_jsonl(path: Path) -> Iterator[tuple[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield f"line {number}", json.loads(line)
            except ValueError as exc:
                raise RllaFormatError(f"{path}, line {number}: not valid JSON ({exc})") from exc


def _rows_json(path: Path) -> Iterator[tuple[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RllaFormatError(f"{path}, line {exc.lineno}: not valid JSON ({exc.msg})") from exc
    except ValueError as exc:  # not UTF-8
        raise RllaFormatError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, list):
        raise RllaFormatError(f"{path}: expected a JSON array of rows, got {type(data).__name__}")
    for i, row in enumerate(data):
        yield f"row {i}", row


def _example(path: Path, where: str, row: Any, split: str, position: int) -> Example:
    """One row -> Example, with errors that name the file and the row/line."""

    def bad(message: str) -> RllaFormatError:
        return RllaFormatError(f"{path}, {where}: {message}")

    if not isinstance(row, dict):
        raise bad(f"expected an object, got {type(row).__name__}")
    prompt = row.get("prompt")
    if not isinstance(prompt, list) or not prompt:
        raise bad("'prompt' must be a non-empty list of chat messages")
    messages = []
    for message in prompt:
        if (not isinstance(message, dict) or not isinstance(message.get("role"), str)
                or not isinstance(message.get("content"), str)):
            raise bad("every prompt message needs string 'role' and 'content'")
        messages.append({"role": message["role"], "content": message["content"]})
    reward_model = row.get("reward_model")
    gold = reward_model.get("ground_truth") if isinstance(reward_model, dict) else None
    if not isinstance(gold, str) or not gold.strip():
        raise bad("'reward_model.ground_truth' must be a non-empty string")
    try:
        gold_calls(gold)  # the correctness reward parses it on every step: fail now, not later
    except ValueError as exc:
        raise bad(f"ground truth has an unparseable <tool_call> block ({exc})") from exc
    extra = row.get("extra_info") if isinstance(row.get("extra_info"), dict) else {}
    # The format reward's (non-privileged) verifier text is the format section of RLLA's own
    # system prompt, so that it is text the prompt really contains.
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    start = system.find(FORMAT_HEADER)
    format_text = system[start:].strip() if start >= 0 else FORMAT_SPEC
    index = extra.get("index", position)
    return Example(
        id=f"rlla-{split}-{index}",
        messages=tuple(messages),
        reference=gold,
        verifier_info=verifier_info(gold, format_text),
        metadata={"source": "rlla", "split": split, "index": index,
                  "data_source": row.get("data_source")},
    )


def load_rlla(data_dir: Path | str | None, split: str = "train") -> list[Example]:
    """RLLA ``split`` ("train": 3,920 rows; "validation"/"test": 80 rows) as Examples."""
    path = find_file(data_dir, split)
    reader = {".parquet": _rows_parquet, ".jsonl": _rows_jsonl, ".json": _rows_json}[path.suffix]
    name = "validation" if split == "test" else split
    examples = [_example(path, where, row, name, i)
                for i, (where, row) in enumerate(reader(path))]
    if not examples:
        raise RllaFormatError(f"{path}: no rows")
    if len({e.id for e in examples}) != len(examples):
        # extra_info.index is not unique in this file: fall back to row positions for the ids
        examples = [dataclasses.replace(e, id=f"rlla-{name}-{i}") for i, e in enumerate(examples)]
    return examples
