"""AdvancedIF: rubric-judged instruction following, read from ``DATA_DIR/advancedif/``.

Layout: the benchmark's rows as ``*.jsonl`` files (the published columns:
``conversation_history``, a JSON list of ``{role, content}`` messages ending with the user turn
to answer; ``prompt_metadata`` with ``rubrics``, a list of rubric questions, either possibly
JSON-encoded; ``benchmark_name``, e.g. ``if_complex_if_oss``, ``if_carried_context_oss``,
``if_system_steerability_oss``) and ``judge.py`` from the AdvancedIF release (its prompt
templates; see :mod:`tasks.instruct.judge`).

Metrics (percent), as AdvancedIF's processor reports them: ``overall``, responses the judge
finds satisfy all requirements, among all items (a failed judge call counts as not satisfied),
also per benchmark name; ``rubric``, rubric answers containing "yes" among all rubric answers
of the successfully judged items (micro average); ``judge_failures``.
"""
from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from tasks.base import Example
from common.jsonl import read_jsonl
from tasks.jsonio import json_value
from tasks.instruct.judge import compose, load_templates, make_judge, parse

FOLDER = "advancedif"


@dataclass(frozen=True)
class JudgeOptions:
    judge: str = ""
    model: str = "o3-mini-2025-01-31"
    api_key: str = ""
    max_tokens: int = 32768

    @staticmethod
    def from_flags(flags) -> "JudgeOptions":
        import os

        key = os.environ.get(flags.judge_api_key_env, "") if flags.judge_api_key_env else ""
        return JudgeOptions(flags.judge, flags.judge_model, key, flags.judge_max_tokens)


def load(data_dir: Path | None) -> list[Example]:
    if data_dir is None:
        raise ValueError("AdvancedIF is read from --data-dir (advancedif/*.jsonl and the "
                         "release's judge.py)")
    folder = Path(data_dir) / FOLDER
    files = sorted(folder.glob("*.jsonl"))
    if not files:
        raise FileNotFoundError(f"no AdvancedIF rows: expected {folder}/*.jsonl")
    load_templates(folder / "judge.py")  # fail now, not after generating every response
    out = []
    for path in files:
        for lineno, row in read_jsonl(path):
            where = f"{path}:{lineno}"
            history = json_value(row.get("conversation_history"), where,
                                  "conversation_history")
            if not isinstance(history, list) or not history or not all(
                    isinstance(m, dict) and isinstance(m.get("role"), str)
                    and isinstance(m.get("content"), str) for m in history):
                raise ValueError(f"{where}: 'conversation_history' must be a non-empty list "
                                 "of {role, content} messages")
            if history[-1]["role"] != "user":
                raise ValueError(f"{where}: the conversation must end with a user turn")
            meta = json_value(row.get("prompt_metadata"), where, "prompt_metadata")
            rubrics = json_value((meta or {}).get("rubrics") if isinstance(meta, dict)
                                  else None, where, "rubrics")
            if not isinstance(rubrics, list) or not rubrics \
                    or not all(isinstance(r, str) for r in rubrics):
                raise ValueError(f"{where}: 'prompt_metadata.rubrics' must be a non-empty "
                                 "list of strings")
            name = str(row.get("benchmark_name") or "advancedif")
            out.append(Example(
                id=f"advancedif-{path.stem}-{lineno}",
                messages=tuple({"role": m["role"], "content": m["content"]} for m in history),
                reference=tuple(rubrics),
                metadata={"category": name, "benchmark": name,
                          "judge_py": str(folder / "judge.py")}))
    return out


@functools.lru_cache(maxsize=4)
def _templates(path: str) -> dict[str, str]:
    return load_templates(Path(path))


def score(examples: Sequence[Example], responses: Sequence[str], options: JudgeOptions) -> dict:
    if len(examples) != len(responses):
        raise ValueError(f"{len(examples)} examples but {len(responses)} responses")
    judge = make_judge(options.judge, options.model, options.api_key, options.max_tokens)
    prompts = [compose(_templates(e.metadata["judge_py"]), e.metadata["benchmark"],
                       e.messages, r, e.reference) for e, r in zip(examples, responses)]
    answers = judge(prompts)
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    yes = answered = failures = satisfied = 0
    items = []
    for example, raw in zip(examples, answers):
        v = parse(raw, example.reference)
        tally = per[example.metadata["benchmark"]]
        tally[0] += v.satisfied
        tally[1] += 1
        satisfied += v.satisfied
        failures += not v.success
        if v.success:
            yes += v.answers_yes
            answered += v.answers
        items.append({"id": example.id, "category": example.metadata["benchmark"],
                      "satisfied": v.satisfied, "rubric_pass_rate": v.item_rate,
                      "rubrics": len(example.reference), "judge_error": v.error,
                      "judge_output": raw})
    metrics: dict[str, float] = {}
    if items:
        metrics["overall"] = 100.0 * satisfied / len(items)
        for name, (k, n) in sorted(per.items()):
            metrics[f"overall/{name}"] = 100.0 * k / n
        metrics["judge_failures"] = failures
    if answered:
        metrics["rubric"] = 100.0 * yes / answered
    return {"metrics": metrics, "items": items, "counts": {n: t[1] for n, t in per.items()}}
