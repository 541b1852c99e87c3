"""BFCL v4 single-turn AST benchmark, prompted in the ToolRL format, scored by bfcl-eval itself.

Data and checker come from the ``bfcl-eval`` wheel (``bfcl_eval/data/BFCL_v4_<category>.json``,
``possible_answer/``, ``eval_checker/ast_eval/ast_checker.ast_checker``). The evaluation follows
ToolRL's own BFCL handler:

* the prompt is the ToolRL system prompt listing the BFCL functions (as BFCL's generation shows
  them: with its language hint appended to descriptions and Java/JavaScript parameter types
  turned into strings), and the user turn under ``**Dialogue Records History**``; the item's own
  system messages are dropped (ToolRL's handler skips them) and the user turn ends with a short
  note on what to do when no tool fits (ToolRL's handler adds one; the wording here is ours);
* the response's ``<tool_call>`` lines are parsed as JSON into ``[{name: {arg: value}}]``, calls
  named "None" are dropped (ToolRL's convention for "no suitable tool"), and the official
  ``ast_checker`` decides. Unlike ToolRL's lenient decoder, a response whose call block is
  missing or has a line that is not a call object is wrong outright and counts against
  ``format_rate``.

Importing bfcl-eval needs care, done once inside :func:`_bfcl` (never at import of this module):
``bfcl_eval.constants.model_config`` imports every model handler, so the one mapping the checker
reads (``MODEL_CONFIG_MAPPING[name].underscore_to_dot``) is provided by a stub module; and
bfcl-eval creates ``result/``, ``score/`` and ``.file_locks/`` under ``BFCL_PROJECT_ROOT`` at
import, so that variable points to a folder of ours in the system temporary folder unless the
user set it (it is set only while bfcl-eval is imported, then removed again).

Aggregation is bfcl-eval's (``eval_runner_helper``): non-live Simple = unweighted mean of the
three simple categories; non-live Overall = unweighted mean of Simple, Multiple, Parallel,
Parallel Multiple; live Overall = mean weighted by item counts. Only categories present in the
scored examples enter an aggregate; an absent category gets no number.
"""
from __future__ import annotations

import functools

import copy
import os
import sys
import tempfile
import threading
import types
from pathlib import Path
from typing import Any, Mapping, Sequence

from tasks.base import Example, VerifierInfo
from tasks.tools.prompt import FORMAT_SPEC, build_messages, parse_tool_calls, render_calls

SIMPLE = ("simple_python", "simple_java", "simple_javascript")
NON_LIVE = SIMPLE + ("multiple", "parallel", "parallel_multiple")
LIVE = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
CATEGORIES = NON_LIVE + LIVE
LANGUAGES = {"simple_java": "java", "simple_javascript": "javascript"}  # the rest: python

# The model name handed to the checker; it only reads ``underscore_to_dot`` for it (False: dotted
# function names are kept as written). No underscore: bfcl maps "_" to "/" in model names.
CHECKER_MODEL = "toolrl-format-prompting"

# Appended to the user turn, as ToolRL's BFCL handler does (our wording).
BFCL_USER_SUFFIX = (
    "If none of the tools fits or a required argument is missing, say so in your response "
    "without calling a tool. Otherwise, make the tool call or calls this turn needs."
)

_LOCK = threading.Lock()
_STATE: types.SimpleNamespace | None = None


def language_of(category: str) -> str:
    return LANGUAGES.get(category, "python")


# ------------------------------------------------------------------------------------------------
# bfcl-eval import
# ------------------------------------------------------------------------------------------------
def _install_model_config_stub() -> None:
    """Provide ``bfcl_eval.constants.model_config`` with just our checker entry.

    If the real module is already imported (someone else loaded bfcl-eval fully), our entry is
    added to its mapping instead.
    """
    name = "bfcl_eval.constants.model_config"
    entry = types.SimpleNamespace(
        model_name=CHECKER_MODEL, display_name=CHECKER_MODEL, underscore_to_dot=False,
        is_fc_model=False, url="", org="", license="", model_handler=None,
    )
    module = sys.modules.get(name)
    if module is None:
        module = types.ModuleType(name, "Stub: the single checker mapping the harness needs.")
        module.MODEL_CONFIG_MAPPING = {}
        sys.modules[name] = module
    module.MODEL_CONFIG_MAPPING.setdefault(CHECKER_MODEL, entry)


def default_project_root() -> Path:
    """Where bfcl-eval may write its (empty) result/score/lock folders: one per user in the
    system temporary folder, reused across runs, never inside site-packages."""
    user = os.getuid() if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
    root = Path(tempfile.gettempdir()) / f"bfcl-project-root-{user}"
    root.mkdir(parents=True, exist_ok=True)
    return root


def _unweighted(accs: list[dict]) -> dict:
    """Fallback equal to bfcl's ``calculate_unweighted_accuracy`` (no N/A handling needed)."""
    return {"accuracy": sum(a["accuracy"] for a in accs) / len(accs),
            "total_count": sum(a["total_count"] for a in accs)}


def _weighted(accs: list[dict]) -> dict:
    """Fallback equal to bfcl's ``calculate_weighted_accuracy``."""
    total = sum(a["total_count"] for a in accs)
    return {"accuracy": sum(a["accuracy"] * a["total_count"] for a in accs) / total,
            "total_count": total}


def _bfcl() -> types.SimpleNamespace:
    """Import what we use from bfcl-eval, once, with the environment it needs."""
    global _STATE
    with _LOCK:
        if _STATE is not None:
            return _STATE
        previous = os.environ.get("BFCL_PROJECT_ROOT")
        if previous is None:
            os.environ["BFCL_PROJECT_ROOT"] = str(default_project_root())
        try:
            _install_model_config_stub()
            try:
                from bfcl_eval.constants.enums import Language
                from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
                from bfcl_eval.utils import load_dataset_entry, load_ground_truth_entry
            except ImportError as exc:
                raise ImportError(
                    "BFCL evaluation needs bfcl-eval (pip install --no-deps bfcl-eval==2026.3.23 "
                    "plus filelock; tree_sitter only for its handlers, not needed here)"
                ) from exc
            try:  # bfcl's own aggregation helpers (pull numpy/pandas; fine when installed)
                from bfcl_eval.eval_checker.eval_runner_helper import (
                    calculate_unweighted_accuracy,
                    calculate_weighted_accuracy,
                )

                def unweighted(accs):
                    return calculate_unweighted_accuracy(accs, display_na_if_category_missing=False)

                def weighted(accs):
                    return calculate_weighted_accuracy(accs, display_na_if_category_missing=False)
            except ImportError:
                unweighted, weighted = _unweighted, _weighted
        finally:
            # eval_config has read the variable at import; do not leak it to the rest of the run.
            if previous is None:
                os.environ.pop("BFCL_PROJECT_ROOT", None)
        _STATE = types.SimpleNamespace(
            ast_checker=ast_checker,
            language={"python": Language.PYTHON, "java": Language.JAVA,
                      "javascript": Language.JAVASCRIPT},
            load_dataset_entry=load_dataset_entry,
            load_ground_truth_entry=load_ground_truth_entry,
            unweighted=unweighted,
            weighted=weighted,
        )
        return _STATE


# ------------------------------------------------------------------------------------------------
# Loading
# ------------------------------------------------------------------------------------------------
def _pick(options: Any) -> tuple[bool, Any]:
    """(present, value): the first non-empty option of an option list, resolved recursively."""
    if not isinstance(options, list):
        return True, options
    for option in options:
        if option != "":
            return True, _resolve(option)
    return False, None  # only "" allowed: an optional argument, left out


def _resolve(value: Any) -> Any:
    """Possible answers nest option lists inside dict values (and lists of such dicts)."""
    if isinstance(value, dict) and all(isinstance(v, list) for v in value.values()):
        out = {}
        for key, options in value.items():
            present, chosen = _pick(options)
            if present:
                out[key] = chosen
        return out
    if isinstance(value, list):
        return [_resolve(v) if isinstance(v, dict) else v for v in value]
    return value


def canonical_calls(ground_truth: list[dict]) -> list[dict]:
    """One concrete call list from a possible answer: each argument's first non-empty option.

    Arguments whose only option is "" (optional, may be omitted) are left out. Used for the
    verifier text and ``metadata["gold_output"]``, never for scoring (scoring uses the checker).
    Java/JavaScript values are left as the possible answer writes them (the model is asked for
    their string form), so for those categories the text is descriptive, not checker-exact.
    """
    calls = []
    for entry in ground_truth:
        (name, params), = entry.items()
        args = {}
        for key, options in params.items():
            present, chosen = _pick(options)
            if present:
                args[key] = chosen
        calls.append({"name": name, "parameters": args})
    return calls


def _split_question(question: list[list[dict]]) -> tuple[str, list[dict]]:
    """(current user text, earlier messages) from BFCL's list of turns; system messages dropped."""
    messages = [m for turn in question for m in turn if m.get("role") != "system"]
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)
    if last_user is None:
        raise ValueError("BFCL item without a user message")
    return str(messages[last_user]["content"]), messages[:last_user]


def load_category(category: str) -> list[Example]:
    """All items of one BFCL v4 category as Examples, in the wheel's order."""
    return list(_category(category))


@functools.lru_cache(maxsize=None)
def _category(category: str) -> tuple[Example, ...]:
    """:func:`load_category`, read once per process (the wheel's files do not change while it
    runs; an Example is frozen): a dry run, its check and the evaluation read the same items."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown BFCL category {category!r}; known: {', '.join(CATEGORIES)}")
    bfcl = _bfcl()
    shown = bfcl.load_dataset_entry(category, include_prereq=False,
                                    include_language_specific_hint=True)
    raw = bfcl.load_dataset_entry(category, include_prereq=False,
                                  include_language_specific_hint=False)
    answers = bfcl.load_ground_truth_entry(category)
    if not ([e["id"] for e in shown] == [e["id"] for e in raw] == [a["id"] for a in answers]):
        raise ValueError(f"BFCL {category}: prompts and possible answers do not line up")
    examples = []
    for prompt_entry, raw_entry, answer in zip(shown, raw, answers):
        user_text, history = _split_question(prompt_entry["question"])
        gold = render_calls(canonical_calls(answer["ground_truth"]))
        examples.append(Example(
            id=prompt_entry["id"],
            messages=build_messages(prompt_entry["function"],
                                    f"{user_text.strip()}\n{BFCL_USER_SUFFIX}", history),
            reference=answer["ground_truth"],
            verifier_info=(VerifierInfo("format", FORMAT_SPEC, privileged=False),
                           VerifierInfo("correctness", gold, privileged=True)),
            metadata={"category": category, "language": language_of(category),
                      "functions": raw_entry["function"], "gold_output": gold},
        ))
    return tuple(examples)


def load(categories: Sequence[str] = CATEGORIES) -> list[Example]:
    """The items of several categories, concatenated in the given order."""
    out: list[Example] = []
    for category in categories:
        out.extend(load_category(category))
    return out


# ------------------------------------------------------------------------------------------------
# Scoring
# ------------------------------------------------------------------------------------------------
def decode(response: str) -> list[dict] | None:
    """A response's calls in BFCL's ``[{name: {arg: value}}]`` form; None when unparseable."""
    calls = parse_tool_calls(response)
    if calls is None:
        return None
    return [{c["name"]: c["parameters"]} for c in calls if c["name"].strip().lower() != "none"]


def check(example: Example, decoded: list[dict]) -> tuple[bool, str]:
    """bfcl's ``ast_checker`` verdict on decoded calls: (valid, error text)."""
    bfcl = _bfcl()
    category = example.metadata["category"]
    try:
        result = bfcl.ast_checker(
            example.metadata["functions"],
            copy.deepcopy(decoded),
            copy.deepcopy(example.reference),
            bfcl.language[example.metadata.get("language", language_of(category))],
            category,
            CHECKER_MODEL,
        )
    except Exception as exc:  # the checker assumes well-typed values; a crash is a wrong answer
        return False, f"checker raised {type(exc).__name__}: {exc}"
    if result["valid"]:
        return True, ""
    return False, f"{result.get('error_type', '')}: {result.get('error', '')}"


def aggregate(counts: Mapping[str, tuple[int, int]]) -> dict[str, float]:
    """Accuracies (percent) per category and bfcl's aggregates, from (correct, total) counts.

    Categories with no items are ignored; aggregates cover only the categories present.
    """
    bfcl = _bfcl()
    acc = {}
    for category in CATEGORIES:
        correct, total = counts.get(category, (0, 0))
        if total > 0:
            acc[category] = {"accuracy": correct / total, "total_count": total,
                             "display_accuracy": correct / total}
    unknown = set(counts) - set(CATEGORIES)
    if unknown:
        raise ValueError(f"unknown BFCL categories {sorted(unknown)}")
    metrics = {category: 100.0 * value["accuracy"] for category, value in acc.items()}
    groups = []
    simple = [acc[c] for c in SIMPLE if c in acc]
    if simple:
        summary = bfcl.unweighted(simple)
        metrics["non_live_simple"] = 100.0 * summary["accuracy"]
        groups.append(summary)
    groups += [acc[c] for c in ("multiple", "parallel", "parallel_multiple") if c in acc]
    if groups:
        metrics["non_live_overall"] = 100.0 * bfcl.unweighted(groups)["accuracy"]
    # Live Overall weighs categories by their size in the full benchmark, not by how many items
    # were scored: with --eval-limit the subset is stratified (about equal per category), and
    # weighting by subset counts would over-weigh the 16-item live_parallel. On the full
    # benchmark both weightings are the same.
    live = [{**acc[c], "total_count": category_size(c)} for c in LIVE if c in acc]
    if live:
        metrics["live_overall"] = 100.0 * bfcl.weighted(live)["accuracy"]
    return metrics


@functools.lru_cache(maxsize=None)
def category_size(category: str) -> int:
    """Items of one category in the full benchmark (the wheel's data)."""
    return len(load_category(category))


def score(examples: Sequence[Example], responses: Sequence[str]) -> dict:
    """``{"metrics": {...}, "items": [...], "counts": {category: n}}`` for BFCL examples."""
    if len(examples) != len(responses):
        raise ValueError(f"{len(examples)} examples but {len(responses)} responses")
    counts: dict[str, list[int]] = {}
    items = []
    n_format_ok = 0
    for example, response in zip(examples, responses):
        category = example.metadata.get("category")
        if category not in CATEGORIES:
            raise ValueError(f"example {example.id!r} is not a BFCL item (category {category!r})")
        decoded = decode(response)
        format_ok = decoded is not None
        if format_ok:
            n_format_ok += 1
            valid, error = check(example, decoded)
        else:
            valid, error = False, "no parseable <tool_call> block"
        tally = counts.setdefault(category, [0, 0])
        tally[0] += int(valid)
        tally[1] += 1
        items.append({"id": example.id, "category": category, "valid": valid,
                      "format_ok": format_ok, "error": error})
    metrics = aggregate({c: (k, n) for c, (k, n) in counts.items()})
    if items:
        metrics["format_rate"] = 100.0 * n_format_ok / len(items)
    return {"metrics": metrics, "items": items, "counts": {c: n for c, (_, n) in counts.items()}}



def item_scores(records: Sequence[dict]) -> dict[str, list[tuple[float, float]]]:
    """Per prediction record, the (value, weight) pair of each of :func:`aggregate`'s
    accuracies: a category's items weigh 1 / its count; Non-Live Simple averages its
    categories, Non-Live Overall its four groups (Simple as one), Live Overall weighs each
    category by its size in the full benchmark; and the format rate."""
    cats = [r["category"] for r in records]
    n = {c: cats.count(c) for c in set(cats)}
    valid = [float(r["valid"]) for r in records]
    out: dict[str, list[tuple[float, float]]] = {
        c: [(v, float(k == c)) for v, k in zip(valid, cats)] for c in sorted(n)}
    simple = [c for c in SIMPLE if c in n]
    groups = (1 if simple else 0) + sum(c in n for c in ("multiple", "parallel",
                                                         "parallel_multiple"))

    def simple_weight(c: str) -> float:
        return 1.0 / (len(simple) * n[c]) if c in simple else 0.0

    if simple:
        out["non_live_simple"] = [(v, simple_weight(c)) for v, c in zip(valid, cats)]
    if groups:
        out["non_live_overall"] = [
            (v, (simple_weight(c) if c in SIMPLE else 1.0 / n[c] if c in NON_LIVE else 0.0)
             / groups) for v, c in zip(valid, cats)]
    if any(c in n for c in LIVE):
        out["live_overall"] = [(v, category_size(c) / n[c] if c in LIVE else 0.0)
                               for v, c in zip(valid, cats)]
    out["format_rate"] = [(float(r["format_ok"]), 1.0) for r in records]
    return out
