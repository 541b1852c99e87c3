"""``python -m harness score``: score stored generations against a task, no model loaded.

Every item of the task is scored; an item without a prediction counts as wrong (``--partial``
scores only the items given, and says so). Rows are JSONL ``{"id", "response"}``; a malformed
row is named by file and line.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from pathlib import Path

from harness import config as cfg


def read_predictions(path: Path) -> dict[str, str]:
    from common.jsonl import read_jsonl

    out: dict[str, str] = {}
    for lineno, row in read_jsonl(path):
        if not isinstance(row.get("id"), str) or not isinstance(row.get("response"), str):
            raise ValueError(f'{path}:{lineno}: expected {{"id": str, "response": str}}')
        if row["id"] in out:
            raise ValueError(f"{path}:{lineno}: duplicate id {row['id']!r}")
        out[row["id"]] = row["response"]
    return out


def score_problems(args: argparse.Namespace) -> list[str]:
    """What ``score`` can refuse before reading any data: an output it could not write, and
    options of another task family."""
    from harness.preflight import family_option_problems, file_problem

    out = [p for p in [file_problem(args.output, "--output") if args.output else None] if p]
    return out + family_option_problems(args.task, set(vars(args)))


def cmd_score(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from harness.preflight import raise_if
    from tasks import TASKS

    registered = TASKS.get(args.task)
    raise_if(score_problems(args), "cannot score")
    task_options = {f.name: getattr(args, f.name) for f in fields(cfg.TaskConfig)
                    if hasattr(args, f.name) and f.name != "task"}
    task = registered.configured(replace(cfg.TaskConfig(task=args.task), **task_options))
    preds = read_predictions(Path(args.predictions))
    if not preds:
        raise ValueError(f"{args.predictions}: no predictions in it (expected JSONL rows "
                         '{"id": ..., "response": ...})')
    examples = {ex.id: ex for ex in task.load_eval(Path(args.data_dir) if args.data_dir else None)}
    unknown = [i for i in preds if i not in examples]
    if unknown:
        raise ValueError(f"{len(unknown)} prediction ids are not items of task {args.task!r}, "
                         f"e.g. {unknown[:3]}")
    missing = [i for i in examples if i not in preds]
    if args.partial:
        chosen = [examples[i] for i in preds]
        responses = [preds[ex.id] for ex in chosen]
    else:  # a missing prediction is a wrong answer: the benchmark's score covers every item
        chosen = list(examples.values())
        responses = [preds.get(ex.id, "") for ex in chosen]
    scored = task.score(chosen, responses)
    if args.partial:
        print(f"{args.task}: PARTIAL, {len(chosen)} of {len(examples)} items scored (--partial: "
              f"the {len(missing)} without a prediction are left out, so this is not the "
              "benchmark's score)")
    elif missing:
        print(f"{args.task}: {len(examples)} items scored; {len(missing)} have no prediction "
              f"and count as wrong (e.g. {missing[:3]}; --partial scores only the "
              f"{len(preds)} given)", file=sys.stderr)
        print(f"{args.task}: {len(examples)} of {len(examples)} items scored, "
              f"{len(missing)} of them without a prediction (counted as wrong)")
    else:
        print(f"{args.task}: {len(examples)} of {len(examples)} items scored")
    scored["missing"] = missing if not args.partial else []
    scored["partial"] = bool(args.partial)
    for name, value in scored["metrics"].items():
        print(f"  {name:<28} {value:.2f}" if isinstance(value, float) else f"  {name:<28} {value}")
    problems = scored.get("problems", [])
    if problems:
        print(f"{len(problems)} items could not be scored fairly (counted as wrong):")
        for problem in problems[:10]:
            print(f"  {problem['id']}: {problem['problem']}")
        if len(problems) > 10:
            print(f"  ... {len(problems) - 10} more" + (" (all in --output)" if args.output
                                                        else "; --output FILE lists them all"))
    if args.output:
        from harness.results import atomic_write_json

        atomic_write_json(Path(args.output), scored)
    return 0


def add_parser(sub) -> None:
    from lab.flags import add_config_flags, formatter

    score = sub.add_parser("score", help="score stored generations; no model is loaded",
                           formatter_class=formatter)
    score.add_argument("--task", required=True)
    score.add_argument("--predictions", required=True, help='JSONL of {"id", "response"}')
    score.add_argument("--data-dir", default=None)
    add_config_flags(score, only=cfg.FAMILY_FIELDS)  # read now: a plugin's families too
    score.add_argument("--plugin", dest="plugins", action="append", default=[],
                       metavar="FILE_OR_MODULE", help="import first: a task of your own")
    score.add_argument("--output", default=None, help="also write the scores as JSON here")
    score.add_argument("--partial", action="store_true",
                       help="score only the items that have a prediction (default: every item "
                            "of the task, a missing prediction counted as wrong)")
    score.set_defaults(handler=cmd_score)
