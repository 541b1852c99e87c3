"""The tool-calling task family (ToolRL rewards, RLLA / synthetic training data, BFCL v4).

Registers on import (``tasks/__init__.py`` imports this package after creating the registries):

* training sets ``rlla`` (the published RLLA train split, needs a data folder) and
  ``tools-synth`` (an offline generator, 512 examples per seed);
* tasks ``bfcl`` (all ten single-turn AST categories), ``bfcl-non-live``, ``bfcl-live`` and one
  per category (``bfcl-simple-python``, ..., ``bfcl-live-parallel-multiple``).

Importing stays cheap: bfcl-eval is imported only when a BFCL task loads or scores.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from tasks.registry import TASKS, TRAIN_SETS
from tasks.base import Example, Task, TrainSet
from tasks.tools import bfcl  # bfcl-eval itself is imported lazily, on first load/score
from tasks.tools.bfcl import LIVE, NON_LIVE
from tasks.tools.rewards import REWARDS
from tasks.tools.spans import spans

FAMILY = "tools"
SYNTH_SIZE = 512  # examples per seed of ``tools-synth``
TRAIN_SET_NAMES = ("rlla", "tools-synth")


def _load_rlla(data_dir: Path | None, seed: int) -> list[Example]:
    from tasks.tools.rlla import load_rlla

    return load_rlla(data_dir, "train")


def _load_synth(data_dir: Path | None, seed: int) -> list[Example]:
    from tasks.tools.synth import generate

    return generate(SYNTH_SIZE, seed)


def _demonstration(example: Example) -> str:
    """The gold output is already written in the layout (RLLA's ground truth, or the
    generator's think + tool_call rendering)."""
    return example.reference


def _rlla_present(data_dir: Path) -> bool:
    from tasks.tools.rlla import find_file

    try:
        find_file(data_dir, "train")
    except FileNotFoundError:
        return False
    return True


TRAIN_SETS.add("rlla", TrainSet(
    name="rlla", family=FAMILY, needs_data_dir=True, load=_load_rlla, present=_rlla_present,
    demonstration=_demonstration,
    help="RLLA (ToolRL) train split, 3,920 prompts, read from DATA_DIR "
    "(train.parquet from ToolRL's dataset/rlla_4k).",
))
TRAIN_SETS.add("tools-synth", TrainSet(
    name="tools-synth", family=FAMILY, needs_data_dir=False, load=_load_synth,
    demonstration=_demonstration,
    help=f"Offline generator of RLLA-format tool calls ({SYNTH_SIZE} per seed): single, "
    "multiple, parallel and parallel-multiple calls over the built-in toolbox "
    "(tasks/tools/toolbox.py).",
))


def _bfcl_task(name: str, categories: Sequence[str], headline: tuple[str, ...], what: str) -> Task:
    categories = tuple(categories)

    def load_eval(data_dir: Path | None) -> list[Example]:
        # The data ships in the bfcl-eval wheel; a data folder is not needed.
        return bfcl.load(categories)

    def score(examples: Sequence[Example], responses: Sequence[str]) -> dict:
        return bfcl.score(examples, responses)

    return Task(
        name=name, family=FAMILY, help=f"BFCL v4 {what} (AST checker, ToolRL prompt format).",
        rewards=REWARDS, train_sets=TRAIN_SET_NAMES, load_eval=load_eval, score=score,
        headline=headline, spans=spans, item_scores=bfcl.item_scores,
    )


TASKS.add("bfcl", _bfcl_task("bfcl", NON_LIVE + LIVE,
                             ("non_live_overall", "live_overall", "format_rate"),
                             "single-turn: 6 non-live + 4 live categories"))
TASKS.add("bfcl-non-live", _bfcl_task("bfcl-non-live", NON_LIVE,
                                      ("non_live_overall", "non_live_simple", "format_rate"),
                                      "non-live categories"))
TASKS.add("bfcl-live", _bfcl_task("bfcl-live", LIVE, ("live_overall", "format_rate"),
                                  "live categories"))
for _category in NON_LIVE + LIVE:
    _name = "bfcl-" + _category.replace("_", "-")
    TASKS.add(_name, _bfcl_task(_name, (_category,), (_category, "format_rate"),
                                f"category {_category}"))
del _category, _name
