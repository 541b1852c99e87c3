"""The contracts every task family fulfils: Example, Reward, TrainSet, Task.

An :class:`Example` is everything the rest of the harness needs to know about one prompt: the
chat messages to generate from, the reference answer, and for each reward the text its
verifier checks (used later by token-level methods that replay a response with and without it).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence


@dataclass(frozen=True)
class VerifierInfo:
    """The context one reward's verifier checks."""

    reward: str  # name of the reward this information belongs to
    text: str  # the verifier's context: a format spec, a gold call, a constraint's text, ...
    privileged: bool  # True: not in the prompt (e.g. the gold answer), seen only in replays


@dataclass(frozen=True)
class Example:
    """One prompt of a training set or a benchmark."""

    id: str  # unique within its split; used to join predictions back to items
    messages: tuple[Mapping[str, str], ...]  # chat messages, {"role", "content"}
    reference: Any  # the gold answer in the family's own form
    verifier_info: tuple[VerifierInfo, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)  # category, db id, ...

    def info_for(self, reward: str) -> VerifierInfo:
        for info in self.verifier_info:
            if info.reward == reward:
                return info
        raise KeyError(f"example {self.id!r} has no verifier information for reward {reward!r}")


@dataclass(frozen=True)
class Reward:
    """A verifiable reward: a named function with declared bounds.

    ``fn(example, response)`` returns a float in [lo, hi], or NaN where the reward does not
    apply to this example (methods treat NaN as "absent").
    """

    name: str
    lo: float
    hi: float
    fn: Callable[[Example, str], float]
    help: str = ""

    def __call__(self, example: Example, response: str) -> float:
        value = float(self.fn(example, response))
        if not math.isnan(value) and not (self.lo <= value <= self.hi):
            raise ValueError(
                f"reward {self.name!r} returned {value}, outside its declared bounds "
                f"[{self.lo}, {self.hi}] (example {example.id!r})"
            )
        return value


def score_rewards(rewards: Sequence[Reward], example: Example, response: str) -> list[float]:
    """All rewards of one response, in declaration order."""
    return [r(example, response) for r in rewards]


@dataclass(frozen=True)
class TrainSet:
    """A source of training examples (a loader of a published format, or a generator)."""

    name: str
    family: str
    help: str
    # load(data_dir, seed) -> examples; data_dir may be None for offline generators
    load: Callable[[Path | None, int], list[Example]]
    needs_data_dir: bool = False


@dataclass(frozen=True)
class Task:
    """What ``--task`` names: a benchmark (or group) to evaluate, with its family's training set.

    ``load_eval(data_dir)`` returns the benchmark's examples; ``score(examples, responses)``
    returns ``{"metrics": {name: value}, "items": [per-item records]}``.
    """

    name: str
    family: str
    help: str
    rewards: tuple[Reward, ...]
    train_sets: tuple[str, ...]  # names in TRAIN_SETS, in order of preference
    load_eval: Callable[[Path | None], list[Example]]
    score: Callable[[Sequence[Example], Sequence[str]], dict]
    headline: tuple[str, ...] = ()  # metric names shown in the run's summary table
    # spans(example, response) -> {reward or part name: [(start, end) character ranges]}: what
    # each verifier reads and the response's parts, for token-level diagnostics (optional)
    spans: Optional[Callable[[Example, str], dict]] = None
