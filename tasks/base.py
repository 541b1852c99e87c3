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
        check_bounds(self, value, example)
        return value


def check_bounds(reward: Reward, value: float, example: Example) -> None:
    if not math.isnan(value) and not (reward.lo <= value <= reward.hi):
        raise ValueError(
            f"reward {reward.name!r} returned {value}, outside its declared bounds "
            f"[{reward.lo}, {reward.hi}] (example {example.id!r})"
        )


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
    # present(data_dir) -> whether that folder holds this set's files; a set that needs a data
    # folder is chosen by default only where it is present (else the family's offline set)
    present: Optional[Callable[[Path], bool]] = None
    # bind(family options) -> TrainSet with the run's family options applied (SQL prompts)
    bind: Optional[Callable[[Any], "TrainSet"]] = None
    # demonstration(example) -> the reference answer written in the family's response layout,
    # for the supervised warm start (None: this set has no reference answers to imitate)
    demonstration: Optional[Callable[[Example], str]] = None

    def configured(self, options: Any) -> "TrainSet":
        """This training set under a run's family options (``TaskConfig.options``; itself
        when it reads none)."""
        return self.bind(options) if self.bind is not None and options is not None else self

    def found_in(self, data_dir: Path | str | None) -> bool:
        """Whether this set can be read from ``data_dir`` (offline sets: always)."""
        if not self.needs_data_dir:
            return True
        if data_dir is None:
            return False
        return self.present(Path(data_dir)) if self.present is not None else True


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
    # metrics where smaller is better (error rates, steps, ...); every other metric of the task
    # is better when larger: tables mark the best row and compare rows by this direction
    lower_is_better: tuple[str, ...] = ()
    # spans(example, response) -> {reward or part name: [(start, end) character ranges]}: what
    # each verifier reads and the response's parts, for token-level diagnostics (optional)
    spans: Optional[Callable[[Example, str], dict]] = None
    # reward_batch(examples, responses) -> one row of reward values per response, in the order
    # of ``rewards``: for families that score a batch at once (e.g. SQL executed in parallel)
    reward_batch: Optional[Callable[[Sequence[Example], Sequence[str]], list[list[float]]]] = None
    # bind(family options) -> Task with the run's family options applied (SQL limits, ...)
    bind: Optional[Callable[[Any], "Task"]] = None
    # preflight(data_dir) -> problems that would stop the evaluation after training (a missing
    # package that a benchmark's own evaluation code imports), each with its fix; checked
    # before any worker starts
    preflight: Optional[Callable[[Path | None], list[str]]] = None
    # item_scores(records) -> {metric: [(value, weight), ...]}, one pair per prediction record
    # (``score``'s items, as ``seed<k>.predictions.jsonl`` stores them): each metric it names
    # is 100 * sum(w * v) / sum(w) over the items (:func:`recompose`), so that a comparison's
    # interval can resample the items as well as the seeds; the weights depend on which items
    # were evaluated, not on the responses. ``score`` counts an item without a prediction as
    # wrong through it (the worst value at its record's weight); without it, ``score`` refuses
    # a benchmark score with items missing rather than judge an empty response
    item_scores: Optional[Callable[[Sequence[Mapping]], dict]] = None
    # options of its family this task never reads (the judge of a task scored without one):
    # given, they would do nothing but rename the run's folder, so they are refused
    ignores: tuple[str, ...] = ()

    def higher_is_better(self, metric: str) -> bool:
        return metric not in self.lower_is_better

    def configured(self, options: Any) -> "Task":
        """This task under a run's family options (``TaskConfig.options``; itself when it
        reads none)."""
        return self.bind(options) if self.bind is not None and options is not None else self

    def compute_rewards(self, examples: Sequence[Example], responses: Sequence[str]
                        ) -> list[list[float]]:
        """Reward rows for (example, response) pairs, checked against the declared bounds."""
        if len(examples) != len(responses):
            raise ValueError(f"{len(examples)} examples but {len(responses)} responses")
        if self.reward_batch is None:
            return [score_rewards(self.rewards, e, r) for e, r in zip(examples, responses)]
        rows = self.reward_batch(examples, responses)
        for example, row in zip(examples, rows):
            if len(row) != len(self.rewards):
                raise ValueError(f"task {self.name!r}: reward_batch gave {len(row)} values, "
                                 f"{len(self.rewards)} rewards are declared")
            for reward, value in zip(self.rewards, row):
                check_bounds(reward, value, example)
        return [[float(v) for v in row] for row in rows]


def recompose(scores: Mapping[str, Sequence[tuple[float, float]]]) -> dict[str, float]:
    """The metrics (percent) that :attr:`Task.item_scores`' per-item pairs make."""
    out = {}
    for name, pairs in scores.items():
        total = sum(w for _, w in pairs)
        if total > 0:
            out[name] = 100.0 * sum(v * w for v, w in pairs) / total
    return out
