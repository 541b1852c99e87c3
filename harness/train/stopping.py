"""Stopping a run once it has its answer (``--stop-when METRIC>=X``, ``--stop-window N``): a
study of steps to a training threshold needs each seed only until it crosses it; the steps
after are not run, and a seed that never crosses it runs to ``--steps`` (right-censored there,
by design). The rule is the one a report reads steps to a threshold by (``lab.reports.figures.
steps_to_threshold``): the first step whose trailing mean over a full window of logged values
reaches the value; the first ``window - 1`` steps have no full window and never count (a
partial window is a mean of fewer, noisier steps and would favour a run that starts high by
chance). Every rank logs the same gathered rewards, so every rank stops at the same step; a
killed run resumes from its checkpoint, replays the same steps and stops at the same one.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Sequence

RULE = re.compile(r"^\s*([\w./:-]+)\s*>=\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$")


@dataclass(frozen=True)
class StopRule:
    metric: str  # a key of the step's log row, e.g. reward/format
    value: float
    window: int  # steps in the trailing mean (1: the step's own value)


def parse(text: str, window: int) -> StopRule | None:
    """The rule ``text`` (``METRIC>=X``) with its window; None for ''; ValueError, saying the
    form, for anything else."""
    if not text.strip():
        return None
    found = RULE.match(text)
    if found is None:
        raise ValueError(f"--stop-when {text!r} is not METRIC>=X (e.g. reward/format>=0.8): "
                         "a logged metric's trailing mean reaching a value")
    if window < 1:
        raise ValueError(f"--stop-window {window}: the trailing mean needs 1 step or more")
    value = float(found.group(2))
    if not math.isfinite(value):
        raise ValueError(f"--stop-when {text!r}: the value must be a finite number")
    return StopRule(found.group(1), value, window)


def first_reached(values: Sequence[float], value: float, window: int = 1) -> int | None:
    """The index of the first of ``values`` (one per logged step, in order) whose trailing
    mean over a full ``window`` reaches ``value``; None if none does."""
    for i in range(window - 1, len(values)):
        part = values[i - window + 1:i + 1]
        if sum(part) / len(part) >= value:
            return i
    return None


def reached(history: Sequence[dict], rule: StopRule) -> bool:
    """Whether the latest row of ``history`` is where ``rule`` is first met (the rows before
    it never met it: the loop stops at the first)."""
    values = [float(r[rule.metric]) for r in history if rule.metric in r]
    if not history or rule.metric not in history[-1]:
        return False
    return first_reached(values, rule.value, rule.window) == len(values) - 1


def mark(rule: StopRule | None, history: list[dict]) -> bool:
    """After a step (its row last in ``history``): whether the run stops here, the row then
    marked ``stop/reached``; a rule reading a metric the step does not log is refused."""
    if rule is None:
        return False
    if rule.metric not in history[-1]:
        raise ValueError(f"--stop-when reads {rule.metric!r}, which a step does not log; it "
                         f"logs {', '.join(sorted(history[-1]))}")
    if reached(history, rule):
        history[-1]["stop/reached"] = 1.0
        return True
    return False
