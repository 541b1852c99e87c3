"""Instruction-following rewards (one per constraint) and the IFEval / IFBench scorer.

Rewards: slot ``c<k>`` is the k-th constraint of the prompt, {0,1} by the strict check, NaN
where the prompt has fewer constraints (ragged K) or where the checker is unscorable here.
``--if-reward all`` (1 when every scorable constraint is followed) and ``mean`` (the fraction
followed) give one aggregate reward instead, for GRPO-style single-reward baselines.

Scores (percent), as the official code defines them (``evaluation_lib``):
``prompt_strict`` / ``prompt_loose``: prompts whose instructions are all followed, among the
prompts whose instructions are all scorable; ``inst_strict`` / ``inst_loose``: followed
instructions among the scorable ones. Unscorable items are counted apart
(``unscorable_prompts``, ``unscorable_instructions``), never as failures.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from tasks.base import Example
from tasks.instruct import checkers
from tasks.instruct.data import K_MAX

REWARD_MODES = ("per-constraint", "all", "mean")


@dataclass(frozen=True)
class IfOptions:
    """The family's run options (``--if-*`` flags)."""

    reward: str = "per-constraint"

    def __post_init__(self) -> None:
        if self.reward not in REWARD_MODES:
            raise ValueError(f"--if-reward must be one of {', '.join(REWARD_MODES)}, "
                             f"got {self.reward!r}")

    @staticmethod
    def from_flags(flags) -> "IfOptions":
        return IfOptions(reward=flags.if_reward)


def verdicts(example: Example, response: str, loose: bool = False) -> list[bool | None]:
    """Per instruction of the example: followed, not followed, or None (unscorable)."""
    ref = example.reference
    prompt = example.metadata.get("prompt", example.messages[-1]["content"])
    out: list[bool | None] = []
    for iid, kwargs in zip(ref["instruction_id_list"], ref["kwargs"]):
        try:
            out.append(checkers.follows(iid, kwargs, response, prompt, loose, ref["seed"]))
        except checkers.Unscorable:
            out.append(None)
    return out


def reward_row(example: Example, response: str, options: IfOptions) -> list[float]:
    v = verdicts(example, response)
    if options.reward == "per-constraint":
        row = [math.nan if x is None else float(x) for x in v]
        return row + [math.nan] * (K_MAX - len(row))
    scorable = [x for x in v if x is not None]
    if not scorable:
        return [math.nan]
    if options.reward == "all":
        return [float(all(scorable))]
    return [sum(scorable) / len(scorable)]


def reward_rows(examples: Sequence[Example], responses: Sequence[str], options: IfOptions
                ) -> list[list[float]]:
    return [reward_row(e, r, options) for e, r in zip(examples, responses)]


def score(examples: Sequence[Example], responses: Sequence[str]) -> dict:
    """Prompt- and instruction-level accuracy, strict and loose, per benchmark (metric names
    prefixed with the benchmark when several are scored together)."""
    if len(examples) != len(responses):
        raise ValueError(f"{len(examples)} examples but {len(responses)} responses")
    benchmarks = sorted({e.metadata.get("benchmark", "") for e in examples})
    tally: dict[str, dict[str, int]] = {b: {} for b in benchmarks}
    items = []
    for example, response in zip(examples, responses):
        t = tally[example.metadata.get("benchmark", "")]
        strict, loose = verdicts(example, response), verdicts(example, response, loose=True)
        scorable = all(v is not None for v in strict)
        for mode, v in (("strict", strict), ("loose", loose)):
            known = [x for x in v if x is not None]
            t[f"inst_{mode}"] = t.get(f"inst_{mode}", 0) + sum(known)
            t[f"inst_{mode}_n"] = t.get(f"inst_{mode}_n", 0) + len(known)
            if scorable:
                t[f"prompt_{mode}"] = t.get(f"prompt_{mode}", 0) + all(known)
        t["prompts"] = t.get("prompts", 0) + scorable
        t["unscorable_prompts"] = t.get("unscorable_prompts", 0) + (not scorable)
        t["unscorable_instructions"] = t.get("unscorable_instructions", 0) + strict.count(None)
        items.append({"id": example.id, "category": example.metadata.get("category", ""),
                      "instruction_id_list": example.reference["instruction_id_list"],
                      "strict": strict, "loose": loose})
    metrics: dict[str, float] = {}
    for b in benchmarks:
        t = tally[b]
        prefix = f"{b}/" if len(benchmarks) > 1 else ""
        for mode in ("strict", "loose"):
            if t.get("prompts"):
                metrics[f"{prefix}prompt_{mode}"] = 100.0 * t.get(f"prompt_{mode}", 0) / t["prompts"]
            if t.get(f"inst_{mode}_n"):
                metrics[f"{prefix}inst_{mode}"] = 100.0 * t[f"inst_{mode}"] / t[f"inst_{mode}_n"]
        metrics[f"{prefix}unscorable_prompts"] = t.get("unscorable_prompts", 0)
        metrics[f"{prefix}unscorable_instructions"] = t.get("unscorable_instructions", 0)
    return {"metrics": metrics, "items": items,
            "counts": {b: sum(e.metadata.get("benchmark", "") == b for e in examples)
                       for b in benchmarks}}


def item_scores(records: Sequence[dict]) -> dict[str, list[tuple[float, float]]]:
    """Per prediction record, the (value, weight) pair of each of :func:`score`'s accuracies
    (one benchmark): a prompt counts where all its instructions are scorable, an instruction
    where it is scorable."""
    out: dict[str, list[tuple[float, float]]] = {}
    for mode in ("strict", "loose"):
        prompts, instructions = [], []
        for r in records:
            known = [x for x in r[mode] if x is not None]
            scorable = all(x is not None for x in r["strict"])
            prompts.append((float(all(known)), 1.0 if scorable else 0.0))
            instructions.append((sum(known) / len(known) if known else 0.0, float(len(known))))
        out[f"prompt_{mode}"], out[f"inst_{mode}"] = prompts, instructions
    return out
