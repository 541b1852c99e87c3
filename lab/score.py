"""``python -m harness score``: score stored generations against a task, no model loaded.

Which items: a run's own predictions file (``<x>.predictions.jsonl`` beside its result
``<x>.json``) is scored on exactly that run's items (its ``--eval-limit`` / ``--eval-seed``
subset, its task-family options), so that it gives the run's stored metrics again; ``--like
RUN`` does the same for a predictions file elsewhere, and ``--all-items`` scores against every
item of the benchmark instead. Anything else is scored against every item of ``--task``.

An item without a prediction counts as wrong, whatever the task: it is never scored as an empty
response (a scorer may well accept one). Its metrics are made from the task's per-item scores
(``Task.item_scores``, ``tasks.base.recompose``), the missing items given the worst per-item
value (0; 1 in a metric where smaller is better) at their usual weight; a metric those pairs
do not make is left out, and named. A task without per-item scores is refused when items are
missing. ``--partial`` scores only the items given, and says so. Rows are JSONL ``{"id",
"response"}``; a malformed row is named by file and line.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from harness import config as cfg
from harness.task_config import task_config as with_task

SUFFIX = ".predictions.jsonl"


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


def score_problems(args: argparse.Namespace, task: str) -> list[str]:
    """What ``score`` can refuse before reading any data: an output it could not write, and
    options of another task family than ``task``'s."""
    from harness.preflight import file_problem
    from harness.task_config import foreign_family_options

    out = [p for p in [file_problem(args.output, "--output") if args.output else None] if p]
    return out + list(foreign_family_options(task, vars(args)).values())


def result_of(predictions: Path) -> Path:
    """The result file ``<x>.json`` that a run stores beside its ``<x>.predictions.jsonl``."""
    name = predictions.name
    return predictions.with_name((name[:-len(SUFFIX)] if name.endswith(SUFFIX) else
                                  predictions.stem) + ".json")


def the_run(args: argparse.Namespace) -> tuple[Path | None, dict | None]:
    """The stored run whose items to score (``--like``, else the result beside the predictions
    file), with its result; (None, None): every item of the benchmark."""
    from harness.results import ResultError, load_result

    if args.like and args.all_items:
        raise ValueError("--like RUN scores that run's items and --all-items every item of the "
                         "benchmark: give one of them")
    if args.all_items:
        return None, None
    if args.like:
        path = Path(args.like)
        path = result_of(path) if path.name.endswith(SUFFIX) else path
        if not path.is_file():
            raise FileNotFoundError(f"--like {args.like}: no such result file (give a run's "
                                    "seed<k>.json)")
        return path, load_result(path)
    predictions = Path(args.predictions)
    path = result_of(predictions)
    if not predictions.name.endswith(SUFFIX) or not path.is_file():
        return None, None
    try:
        return path, load_result(path)
    except ResultError as exc:
        raise ResultError(f"{exc}. It lies beside {predictions}, so it is read as the run whose "
                          "items to score: --all-items scores every item of the benchmark "
                          "instead, --like RUN another run's items") from None


def metrics_counting_missing_as_wrong(task, scored: dict, missing: set[str]
                                      ) -> tuple[dict, list[str]]:
    """``scored``'s metrics with the ``missing`` items counted as wrong, and the names of the
    metrics that cannot be (left out). ``scored`` is the task's score of every item, a missing
    one scored as an empty response only to have its record, from which ``Task.item_scores``
    takes the item's weights (which depend on the item, not on its response); its value is
    replaced by the worst one, 0, or 1 in a metric where smaller is better."""
    from tasks.base import recompose

    if task.item_scores is None:
        raise ValueError(
            f"{len(missing)} items of task {task.name!r} have no prediction, and the task gives "
            "no per-item scores (Task.item_scores) through which they could be counted as "
            "wrong (its scorer would judge an empty response, which it may accept): give a "
            "prediction for every item, or --partial to score only the items given")
    items = scored.get("items", [])
    if not missing <= {item.get("id") for item in items}:
        raise ValueError(f"task {task.name!r}: its scorer's items do not name every item by "
                         "its id, so the items without a prediction cannot be counted as "
                         "wrong: give a prediction for every item, or --partial")
    pairs = task.item_scores(items)
    remade = recompose({name: [(float(not task.higher_is_better(name))
                                if item.get("id") in missing else v, w)
                               for item, (v, w) in zip(items, values)]
                        for name, values in pairs.items()})
    made = {k: remade[k] for k in scored["metrics"] if k in remade}
    if not made:
        raise ValueError(f"{len(missing)} items of task {task.name!r} have no prediction, and "
                         "the task's per-item scores make none of its metrics: give a "
                         "prediction for every item, or --partial to score only the items given")
    return made, [k for k in scored["metrics"] if k not in remade]


def cmd_score(args: argparse.Namespace) -> int:
    from harness.data import stratified_subset
    from harness.preflight import raise_if
    from harness.results import items_hash
    from tasks import TASKS

    run_path, run = the_run(args)
    if run is not None and args.task and args.task != run["task"]:
        raise ValueError(
            f"--task {args.task} disagrees with run {run_path}, which evaluated "
            f"{run['task']!r}: leave --task out to score that run's items"
            + ("" if args.like else f", or --all-items to score every item of {args.task!r}"))
    name = run["task"] if run is not None else args.task
    if not name:
        raise ValueError("--task is required (it is read from the run when the predictions file "
                         "lies beside its run's result, or --like RUN names the run)")
    registered = TASKS.get(name)
    raise_if(score_problems(args, name), "cannot score")
    given = {name: getattr(args, name) for name, (section, _) in cfg.all_fields().items()
             if section == "task" and hasattr(args, name) and name not in ("task", "data_dir")}
    if args.data_dir:
        given["data_dir"] = args.data_dir
    base = (cfg.RunConfig.from_dict(run["config"]).task if run is not None
            else cfg.TaskConfig(task=name))
    task_config = with_task(given, base)
    task = registered.configured(task_config.options)
    everything = task.load_eval(Path(task_config.data_dir) if task_config.data_dir else None)
    if run is not None:  # the run's own items: harness.data.load_eval under its config
        examples = stratified_subset(everything, task_config.eval_limit, task_config.eval_seed)
        which = (f"a {len(examples)}-item subset (seed {task_config.eval_seed}) of its "
                 f"{len(everything)}" if len(examples) < len(everything)
                 else f"all {len(everything)} items")
        was = base.as_dict()
        changed = [f"--{k.replace('_', '-')} {v} (the run's: {was[k]})"
                   for k, v in given.items() if was.get(k) != v]
        print(f"{name}: the items of run {run_path}: {which}"
              + (f"; with {', '.join(changed)}" if changed else ""))
        stored = run.get("data", {}).get("eval")
        if stored and items_hash(examples) != stored:
            print(f"warning: these are not the items run {run_path} evaluated (items hash "
                  f"{items_hash(examples)}, the run's {stored}): the benchmark's data or prompts "
                  "changed since, or --data-dir points elsewhere", file=sys.stderr)
    else:
        examples = everything
        if args.all_items:
            print(f"{name}: every item of the benchmark (--all-items)")
    preds = read_predictions(Path(args.predictions))
    if not preds:
        raise ValueError(f"{args.predictions}: no predictions in it (expected JSONL rows "
                         '{"id": ..., "response": ...})')
    ids = {ex.id for ex in examples}
    unknown = [i for i in preds if i not in ids]
    if unknown:
        known = {ex.id for ex in everything}
        if run is not None and all(i in known for i in unknown):
            raise ValueError(f"{len(unknown)} prediction ids are items of task {name!r} but not "
                             f"of run {run_path}, e.g. {unknown[:3]}: --all-items scores "
                             "against every item of the task")
        raise ValueError(f"{len(unknown)} prediction ids are not items of task {name!r}, "
                         f"e.g. {unknown[:3]}")
    missing = [ex.id for ex in examples if ex.id not in preds]
    left_out: list[str] = []
    if args.partial:
        chosen = [ex for ex in examples if ex.id in preds]
        scored = task.score(chosen, [preds[ex.id] for ex in chosen])
        print(f"{name}: PARTIAL, {len(chosen)} of {len(examples)} items scored (--partial: "
              f"the {len(missing)} without a prediction are left out, so this is not the "
              f"{'run' if run is not None else 'benchmark'}'s score)")
    elif not missing:
        scored = task.score(examples, [preds[ex.id] for ex in examples])
        print(f"{name}: {len(examples)} of {len(examples)} items scored")
    else:
        # the empty response only gives a missing item its record (its weights); its value in
        # every metric is the worst one, never its scorer's verdict on the empty response
        scored = task.score(examples, [preds.get(ex.id, "") for ex in examples])
        scored["metrics"], left_out = metrics_counting_missing_as_wrong(task, scored,
                                                                        set(missing))
        absent = set(missing)
        scored["items"] = [{"id": it.get("id"), "missing": True} if it.get("id") in absent
                           else it for it in scored.get("items", [])]
        hint = "" if run is not None or args.all_items else \
            "; --like RUN scores the items of a run's subset"
        print(f"{name}: {len(missing)} of {len(examples)} items have no prediction and count "
              f"as wrong (e.g. {missing[:3]}; --partial scores only the {len(preds)} given"
              f"{hint})", file=sys.stderr)
        print(f"{name}: {len(examples)} of {len(examples)} items scored, {len(missing)} of "
              "them without a prediction (counted as wrong: the worst per-item score in "
              "every metric, from the task's per-item scores; never the scorer's verdict on an "
              "empty response)")
    scored["missing"] = missing if not args.partial else []
    scored["partial"] = bool(args.partial)
    scored["run"] = str(run_path) if run is not None else None
    scored["left_out_metrics"] = left_out
    for metric, value in scored["metrics"].items():
        print(f"  {metric:<28} {value:.2f}" if isinstance(value, float)
              else f"  {metric:<28} {value}")
    if left_out:
        print(f"  left out: {', '.join(left_out)} (the task's per-item scores do not make "
              "them, so a missing item could not be counted as wrong in them)")
    if run is not None and not args.partial:
        differ = [f"{k} {v} (stored {run['metrics'].get(k)})"
                  for k, v in scored["metrics"].items()
                  if not isinstance(run["metrics"].get(k), (int, float))
                  or not math.isclose(v, run["metrics"][k], rel_tol=0, abs_tol=1e-9)]
        print(f"{name}: " + ("the run's stored metrics, every one" if not differ and not left_out
                             else "not the run's stored metrics: " + "; ".join(
                                 differ + [f"{k} left out" for k in left_out])))
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
    score.add_argument("--task", default=None,
                       help="the benchmark (required, unless the predictions file lies beside "
                            "its run's result or --like names the run: then the run's, and "
                            "another is refused)")
    score.add_argument("--predictions", required=True, help='JSONL of {"id", "response"}')
    score.add_argument("--like", default=None, metavar="RUN",
                       help="score the items a stored run evaluated (its seed<k>.json: its "
                            "--eval-limit subset and task options), as for a run's own "
                            "predictions file, which is scored on its run's items by default")
    score.add_argument("--all-items", action="store_true",
                       help="score against every item of the benchmark, even for a run's own "
                            "predictions file (default there: the run's items)")
    score.add_argument("--data-dir", default=None)
    add_config_flags(score, only=cfg.family_fields())  # read now: a plugin's families too
    score.add_argument("--plugin", dest="plugins", action="append", default=[],
                       metavar="FILE_OR_MODULE", help="import first: a task of your own")
    score.add_argument("--output", default=None, help="also write the scores as JSON here")
    score.add_argument("--partial", action="store_true",
                       help="score only the items that have a prediction (default: every item "
                            "scored, one without a prediction counted as wrong)")
    score.set_defaults(handler=cmd_score)
