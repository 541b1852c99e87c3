"""The instruction-following task family (paper Table 2): one reward per constraint.

Registers on import (checker libraries are imported only when a checker is first needed):

* training sets ``hir`` (HIR-16K's first two subsets, 6,998 prompts, from ``--data-dir``) and
  ``if-synth`` (offline: 512 generated prompts per seed with 1-8 constraints each);
* tasks ``ifeval`` (541 prompts) and ``ifbench`` (300), from the wheel that ships them, scored
  prompt- and instruction-level, strict and loose; ``muldimif`` and ``advancedif`` (from
  ``--data-dir``; MulDimIF scored by its own checkers, AdvancedIF by a rubric judge).

``--if-reward all|mean`` replaces the per-constraint rewards by one aggregate (see
:mod:`tasks.instruct.evaluate`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from common.options import option
from tasks.registry import TASKS, TRAIN_SETS, family_options
from tasks.base import Example, Reward, Task, TrainSet
from tasks.instruct import advancedif, data, evaluate, muldimif, spans
from tasks.instruct.advancedif import JudgeOptions
from tasks.instruct.evaluate import IfOptions

FAMILY = "instruct"
SYNTH_SIZE = 512
TRAIN_SET_NAMES = ("hir", "if-synth")


def _rewards(options: IfOptions) -> tuple[Reward, ...]:
    if options.reward != "per-constraint":
        what = ("1 when every scorable constraint is followed" if options.reward == "all"
                else "the fraction of scorable constraints followed")
        return (Reward(options.reward, 0.0, 1.0,
                       lambda e, r: evaluate.reward_row(e, r, options)[0], help=what),)

    def one(k: int):
        return lambda e, r: evaluate.reward_row(e, r, options)[k]

    return tuple(Reward(data.slot(k), 0.0, 1.0, one(k),
                        help=f"the prompt's constraint {k + 1} is followed (strict); NaN if "
                             "absent or unscorable")
                 for k in range(data.K_MAX))


def _for_rewards(examples: list[Example], options: IfOptions) -> list[Example]:
    """With an aggregate reward, every constraint text is that reward's verifier information."""
    if options.reward == "per-constraint":
        return examples
    return [dataclasses.replace(e, verifier_info=tuple(
        dataclasses.replace(i, reward=options.reward) for i in e.verifier_info)) for e in examples]


def _train_set(name: str, help_text: str, needs_data_dir: bool,
               options: IfOptions = IfOptions()) -> TrainSet:
    def load(data_dir: Path | None, seed: int) -> list[Example]:
        examples = data.load_hir(data_dir) if needs_data_dir else data.generate(SYNTH_SIZE, seed)
        return _for_rewards(examples, options)

    return TrainSet(name=name, family=FAMILY, help=help_text, load=load,
                    needs_data_dir=needs_data_dir,
                    present=lambda data_dir: (data_dir / data.HIR_FILE).is_file(),
                    bind=lambda flags: _train_set(name, help_text, needs_data_dir,
                                                  IfOptions.from_flags(flags)))


TRAIN_SETS.add("hir", _train_set(
    "hir", "HIR-16K, first two subsets (type1 + type2, 6,998 prompts), read from "
    "DATA_DIR/HIR_trainv1.jsonl", needs_data_dir=True))
TRAIN_SETS.add("if-synth", _train_set(
    "if-synth", f"Offline generator of HIR-format prompts ({SYNTH_SIZE} per seed): a writing "
    "task plus 1-8 constraints from the IFEval/IFBench checkers", needs_data_dir=False))

HEADLINE = ("prompt_strict", "inst_strict", "prompt_loose", "inst_loose")


@family_options(FAMILY)
@dataclass(frozen=True)
class IfFlags:
    """The instruction-following family's run options: its rewards, and AdvancedIF's judge."""

    if_reward: str = option("per-constraint", "instruction following: per-constraint rewards "
                                            "(c1..c16, ragged), or one aggregate: all | mean")
    judge: str = option("", "AdvancedIF's rubric judge: an OpenAI-compatible endpoint "
                          "(http://HOST:PORT/v1, e.g. a vLLM server) or a local model folder")
    judge_model: str = option("o3-mini-2025-01-31", "model name sent to the judge endpoint "
                                                  "(AdvancedIF's default judge)")
    judge_api_key_env: str = option("OPENAI_API_KEY", "name of the environment variable holding "
                                                    "the judge endpoint's API key (empty: "
                                                    "none)", identity=False)
    judge_max_tokens: int = option(32768, "maximum tokens of a judge answer")

    def problems(self) -> list[str]:
        out = []
        if self.if_reward not in evaluate.REWARD_MODES:
            out.append(f"unknown if_reward {self.if_reward!r}; use one of "
                       f"{', '.join(evaluate.REWARD_MODES)}")
        if self.judge_max_tokens < 1:
            out.append("judge_max_tokens must be 1 or more")
        return out


JUDGED = "advancedif"  # the one benchmark scored by a judge
JUDGE_OPTIONS = ("judge", "judge_model", "judge_api_key_env", "judge_max_tokens")


def _if_task(name: str, what: str, load_eval, score_with, headline: tuple[str, ...] = HEADLINE,
             options: IfOptions = IfOptions(), judge: JudgeOptions = JudgeOptions(),
             preflight=None, item_scores=None) -> Task:
    """``score_with(judge options)`` gives the benchmark's scorer (only AdvancedIF's uses them)."""
    return Task(
        name=name, family=FAMILY, help=what, rewards=_rewards(options),
        train_sets=TRAIN_SET_NAMES, load_eval=load_eval, score=score_with(judge),
        headline=headline,
        # per-constraint spans only mean something when each reward is one constraint
        spans=spans.spans if options.reward == "per-constraint" else None,
        reward_batch=lambda examples, responses: evaluate.reward_rows(examples, responses,
                                                                      options),
        bind=lambda flags: _if_task(name, what, load_eval, score_with, headline,
                                    IfOptions.from_flags(flags),
                                    JudgeOptions.from_flags(flags), preflight, item_scores),
        preflight=preflight, item_scores=item_scores,
        ignores=() if name == JUDGED else JUDGE_OPTIONS,
    )


def _wheel_benchmark(name: str, what: str) -> Task:
    return _if_task(name, what, lambda data_dir: data.load_benchmark(name),
                    lambda judge: evaluate.score, item_scores=evaluate.item_scores)


TASKS.add("ifeval", _wheel_benchmark("ifeval", "IFEval (541 prompts, 25 instruction ids), "
                                               "prompt- and instruction-level accuracy, strict "
                                               "and loose"))
TASKS.add("ifbench", _wheel_benchmark("ifbench", "IFBench test (300 prompts, 58 instruction "
                                                 "ids), prompt- and instruction-level, strict "
                                                 "and loose"))
TASKS.add("muldimif", _if_task(
    "muldimif", "MulDimIF test (1,200 prompts; a checkout of its repository at "
    "DATA_DIR/muldimif: Data/test.json and the checkers in Code/evaluation), accuracy",
    muldimif.load, lambda judge: muldimif.score, ("accuracy", "micro"),
    preflight=muldimif.problems, item_scores=muldimif.item_scores))
TASKS.add("advancedif", _if_task(
    "advancedif", "AdvancedIF (rubric-judged; DATA_DIR/advancedif/*.jsonl and the release's "
    "judge.py), overall and rubric pass rates; needs --judge",
    advancedif.load,
    lambda judge: lambda examples, responses: advancedif.score(examples, responses, judge),
    ("overall", "rubric")))
