"""The text-to-SQL task family (paper Table 1): sandboxed SQLite execution, three rewards,
Spider / Spider-Syn / Spider-Realistic / Spider-DK / BIRD dev, and the offline spider-mini.

Registers on import:

* training sets ``spider`` (Spider train, ``train_spider.json``, from ``--data-dir``) and ``spider-mini-train`` (offline, built from ``tasks/sql/spider_mini``);
* tasks ``spider-mini`` (offline), ``spider-dev``, ``spider-test``, ``spider-syn``,
  ``spider-realistic``, ``spider-dk``, ``bird-dev`` (from ``--data-dir``, layout in
  :mod:`tasks.sql.loaders`) and ``text2sql``, the six benchmarks of Table 1 with their
  unweighted ``average``.

The ``--sql-*`` options (time limit, processes, row cap, DISTINCT handling, sample rows in the
prompt) reach the tasks through ``Task.bind``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from tasks.registry import TASKS, TRAIN_SETS
from tasks.base import Example, Reward, Task, TrainSet
from tasks.sql import evaluate, mini
from tasks.sql.evaluate import SqlOptions
from tasks.sql.layout import demonstration
from tasks.sql.loaders import SPLITS, load_split
from tasks.sql.prompt import spans

FAMILY = "sql"
TRAIN_SET_NAMES = ("spider", "spider-mini-train")
TABLE1 = ("spider-dev", "spider-test", "spider-syn", "spider-realistic", "spider-dk", "bird-dev")


def _rewards(options: SqlOptions) -> tuple[Reward, ...]:
    def one(k: int):
        return lambda example, response: evaluate.reward_rows([example], [response], options)[0][k]

    helps = ("the response has <think> then <answer> with one ```sql block of one statement",
             "the query runs without error within the sandbox's limits",
             "the query's result equals the gold query's (NaN when the gold query fails)")
    return tuple(Reward(name, 0.0, 1.0, one(k), help=h)
                 for k, (name, h) in enumerate(zip(evaluate.REWARD_NAMES, helps)))


def _train_set(name: str, help_text: str, needs_data_dir: bool,
               options: SqlOptions = SqlOptions()) -> TrainSet:
    def load(data_dir: Path | None, seed: int) -> list[Example]:
        if needs_data_dir:
            return load_split(data_dir, "spider-train", options.sample_rows)
        return load_split(mini.build(), "spider-train", options.sample_rows,
                          benchmark="spider-mini-train")

    def present(data_dir: Path) -> bool:
        split = SPLITS["spider-train"]
        return any((data_dir / root / q).is_file() for root in split.root
                   for q in split.questions)

    return TrainSet(name=name, family=FAMILY, help=help_text, load=load,
                    needs_data_dir=needs_data_dir, demonstration=demonstration, present=present,
                    bind=lambda flags: _train_set(name, help_text, needs_data_dir,
                                                  SqlOptions.from_flags(flags)))


TRAIN_SETS.add("spider", _train_set(
    "spider", "Spider train (train_spider.json, 7,000 prompts; the paper reports 6,915 after a "
    "filtering it does not describe) read from DATA_DIR/spider", needs_data_dir=True))
TRAIN_SETS.add("spider-mini-train", _train_set(
    "spider-mini-train", "Offline Spider-format training set of this project (3 databases; "
    "tasks/sql/spider_mini)", needs_data_dir=False))


def _sql_task(name: str, splits: Sequence[str], what: str, headline: tuple[str, ...],
              offline: bool = False, options: SqlOptions = SqlOptions()) -> Task:
    splits = tuple(splits)

    def load_eval(data_dir: Path | None) -> list[Example]:
        if offline:
            return load_split(mini.build(), "spider-dev", options.sample_rows,
                              benchmark="spider-mini")
        out: list[Example] = []
        for split in splits:
            out.extend(load_split(data_dir, split, options.sample_rows))
        return out

    return Task(
        name=name, family=FAMILY, help=what,
        rewards=_rewards(options),
        train_sets=("spider-mini-train", "spider") if offline else TRAIN_SET_NAMES,
        load_eval=load_eval,
        score=lambda examples, responses: evaluate.score(examples, responses, options),
        headline=headline, spans=spans, item_scores=evaluate.item_scores,
        reward_batch=lambda examples, responses: evaluate.reward_rows(examples, responses,
                                                                      options),
        bind=lambda flags: _sql_task(name, splits, what, headline, offline,
                                     SqlOptions.from_flags(flags)),
    )


_RATES = ("executable_rate", "format_rate")
TASKS.add("spider-mini", _sql_task(
    "spider-mini", ("spider-mini",), "Offline Spider-format dev set of this project (2 "
    "databases unseen in its training set); execution accuracy, Spider semantics",
    ("spider-mini",) + _RATES, offline=True))
for _split, _what in (
        ("spider-dev", "Spider dev (1,034), execution accuracy with test-suite databases when "
                       "DATA_DIR/spider-test-suite has them"),
        ("spider-test", "Spider test (2,147), execution accuracy"),
        ("spider-syn", "Spider-Syn dev (1,034 synonym-substituted questions)"),
        ("spider-realistic", "Spider-Realistic (508 questions without explicit column names)"),
        ("spider-dk", "Spider-DK (535 questions needing domain knowledge)"),
        ("bird-dev", "BIRD dev (1,534, with evidence), execution accuracy by set equality")):
    TASKS.add(_split, _sql_task(_split, (_split,), _what, (_split,) + _RATES))
TASKS.add("text2sql", _sql_task(
    "text2sql", TABLE1, "Paper Table 1: Spider dev/test/Syn/Realistic/DK and BIRD dev, with "
    "their unweighted average", TABLE1 + ("average",)))
del _split, _what
