"""MulDimIF: multi-dimensional constraint following, read from ``DATA_DIR/muldimif/``.

``DATA_DIR/muldimif`` is a checkout of the MulDimIF repository, as published: its questions in
``Data/test.json`` (a JSON list of ``{id, conversations, constraints: [[category, subcategory,
description], ...], contraint_pattern, difficulty?}``) and its evaluation code in
``Code/evaluation/`` (``evaluation.py`` with ``class_mapping`` / ``get_instance`` and the
``scripts`` package of checkers), which imports ``Code/utils/data_utils.py``. The checkers parse
each constraint's natural-language description, and they are not published on any package
registry, so the scorer imports the checkout's own ``evaluation.py`` (code you supplied, like a
plugin) with both ``Code/evaluation`` and ``Code`` on the path, and calls
``get_instance(f"{category}_{subcategory}").check(description, response)`` for each constraint,
as MulDimIF's ``check`` does. That code imports zhconv, pandas and openai at module level (openai
is never called by the rule-based checks): the ``muldimif`` extra installs them, and
:func:`problems` imports the code before training starts, so a missing one is named then.

Metrics (percent), as its ``get_score`` defines them: ``accuracy`` (the paper's "Acc.": prompts
whose constraints all pass), ``macro`` (mean per-prompt fraction), ``micro`` (passed constraints
over all), and ``accuracy/<pattern>`` and ``accuracy/<difficulty>``. A checker that raises on a
response counts that constraint as failed and is counted in ``checker_errors``.
"""
from __future__ import annotations

import contextlib
import functools
import importlib.util
import io
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Sequence

from tasks.base import Example

FOLDER = "muldimif"
EXTRA = ("pip install -c requirements/constraints-cpu.txt -e '.[muldimif]' (zhconv, pandas and "
         "openai: what MulDimIF's evaluation code imports)")


def load(data_dir: Path | None) -> list[Example]:
    if data_dir is None:
        raise ValueError("MulDimIF is read from --data-dir (a checkout of the MulDimIF "
                         "repository at DATA_DIR/muldimif: Data/test.json, Code/evaluation/)")
    folder = Path(data_dir) / FOLDER
    path = folder / "Data" / "test.json"
    if not path.is_file():
        raise FileNotFoundError(f"missing file {path} (MulDimIF's test set)")
    if not (folder / "Code" / "evaluation" / "evaluation.py").is_file():
        raise FileNotFoundError(f"missing {folder / 'Code' / 'evaluation' / 'evaluation.py'} "
                                "(MulDimIF's evaluation code, which holds its checkers)")
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    if not isinstance(rows, list):
        raise ValueError(f"{path}: expected a JSON list")
    out = []
    for i, row in enumerate(rows):
        where = f"{path}: item {i}"
        turns = row.get("conversations") if isinstance(row, dict) else None
        if not isinstance(turns, list) or not turns or not all(
                isinstance(m, dict) and isinstance(m.get("content"), str) for m in turns):
            raise ValueError(f"{where}: 'conversations' must be a non-empty list of messages")
        constraints = row.get("constraints")
        if not isinstance(constraints, list) or not constraints or not all(
                isinstance(c, list) and len(c) >= 3 and all(isinstance(x, str) for x in c)
                for c in constraints):
            raise ValueError(f"{where}: 'constraints' must be a list of "
                             "[category, subcategory, description]")
        pattern = str(row.get("contraint_pattern", row.get("constraint_pattern", "")))
        messages = tuple({"role": m.get("role", "user"), "content": m["content"]}
                         for m in turns if m.get("role", "user") != "assistant")
        out.append(Example(
            id=f"muldimif-{row.get('id', i)}", messages=messages,
            reference=tuple(tuple(c) for c in constraints),
            metadata={"category": pattern or "muldimif", "benchmark": "muldimif",
                      "pattern": pattern, "difficulty": str(row.get("difficulty", "")),
                      "evaluation": str(folder / "Code" / "evaluation")}))
    return out


def problems(data_dir: Path | None) -> list[str]:
    """What stops MulDimIF from being scored (a missing file, a missing package its evaluation
    code imports), found by importing that code before any training starts."""
    try:
        examples = load(data_dir)
        _official(examples[0].metadata["evaluation"]) if examples else None
    except (OSError, ImportError, ValueError) as exc:
        return [str(exc)]
    return []


@functools.lru_cache(maxsize=2)
def _official(evaluation_dir: str):
    """MulDimIF's evaluation module, imported from the checkout: its ``scripts`` package lies
    beside it and its ``utils`` package one folder up (``Code/utils``)."""
    for folder in (str(Path(evaluation_dir).parent), evaluation_dir):
        if folder in sys.path:
            sys.path.remove(folder)
        sys.path.insert(0, folder)  # evaluation_dir first: its names win
    # its generic top-level names (scripts, utils) must resolve inside this checkout
    for name in [n for n in sys.modules if n.split(".")[0] in ("scripts", "utils")]:
        del sys.modules[name]
    path = Path(evaluation_dir) / "evaluation.py"
    spec = importlib.util.spec_from_file_location("muldimif_evaluation", path)
    module = importlib.util.module_from_spec(spec)
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # it prints Python's version on import
            spec.loader.exec_module(module)
    except ModuleNotFoundError as exc:
        raise ImportError(f"MulDimIF's evaluation code ({path}) imports {exc.name!r}, which is "
                          f"not installed: {EXTRA}") from None
    if not hasattr(module, "get_instance"):
        raise ValueError(f"{path} has no get_instance: not MulDimIF's")
    return module


def score(examples: Sequence[Example], responses: Sequence[str]) -> dict:
    if len(examples) != len(responses):
        raise ValueError(f"{len(examples)} examples but {len(responses)} responses")
    all_pass = macro = passed = total = errors = 0
    groups: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    items = []
    for example, response in zip(examples, responses):
        official = _official(example.metadata["evaluation"])
        judges = []
        for category, subcategory, *rest in example.reference:
            # an unknown constraint class raises here: the data and the code do not match
            checker = official.get_instance(f"{category}_{subcategory}")
            try:
                ok = checker.check(rest[-1], response)
            except Exception:  # noqa: BLE001  a checker failing on a response fails it
                ok, errors = False, errors + 1
            judges.append(1 if ok else 0)
        ok_all = sum(judges) == len(judges)
        all_pass += ok_all
        macro += sum(judges) / len(judges)
        passed += sum(judges)
        total += len(judges)
        for key in (f"accuracy/{example.metadata['pattern']}" if example.metadata["pattern"] else None,
                    f"accuracy/{example.metadata['difficulty']}" if example.metadata["difficulty"] else None):
            if key:
                groups[key][0] += ok_all
                groups[key][1] += 1
        items.append({"id": example.id, "category": example.metadata["category"],
                      "judges": judges, "correct": ok_all})
    n = len(items)
    metrics: dict[str, float] = {}
    if n:
        metrics = {"accuracy": 100.0 * all_pass / n, "macro": 100.0 * macro / n,
                   "micro": 100.0 * passed / total, "checker_errors": errors}
        metrics.update({k: 100.0 * a / b for k, (a, b) in sorted(groups.items())})
    return {"metrics": metrics, "items": items, "counts": {"muldimif": n}}


def item_scores(records: Sequence[dict]) -> dict[str, list[tuple[float, float]]]:
    """Per prediction record, the (value, weight) pair of :func:`score`'s accuracy (every
    constraint followed), macro (the share followed, per prompt) and micro (per constraint)."""
    shares = [(sum(r["judges"]) / len(r["judges"]), len(r["judges"])) for r in records]
    return {"accuracy": [(float(r["correct"]), 1.0) for r in records],
            "macro": [(share, 1.0) for share, _ in shares],
            "micro": [(share, float(n)) for share, n in shares]}
