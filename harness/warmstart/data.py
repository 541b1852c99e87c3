"""The warm start's data: (prompt, demonstration) pairs from the run's training set.

A demonstration is the training example's reference answer written in the family's response
layout (``TrainSet.demonstration``). Benchmark items never enter: every pair's user turn is
checked against the evaluated task's items before anything trains.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Sequence

import torch

from tasks.base import Example


@dataclass(frozen=True)
class Demonstration:
    example: Example
    target: str  # the response to imitate, in the family's layout


def demonstrations(run) -> list[Demonstration]:
    """The warm start's pairs, from the training set the run itself uses (drawn with the warm
    start's own seed; read once per run: ``Run.demonstrations``). Fails when the set has no
    reference answers in a layout."""
    from harness.data import load_train

    ts = run.train_set
    if ts.demonstration is None:
        raise ValueError(f"training set {ts.name!r} ({ts.family}) has no reference answers in a "
                         "response layout, so it cannot warm-start a model; run without "
                         "--warm-start")
    return [Demonstration(ex, ts.demonstration(ex))
            for ex in load_train(run, run.config.warmstart.warm_start_seed)]


def user_turns(example: Example) -> str:
    """What makes an item an item: its user messages (system prompts are shared by design)."""
    return "\n".join(m["content"] for m in example.messages if m["role"] == "user")


def benchmark_overlap(demos: Sequence[Demonstration], benchmark: Sequence[Example]) -> list[str]:
    """Ids of demonstrations whose user turns equal a benchmark item's."""
    seen = {user_turns(ex).strip() for ex in benchmark}
    return [d.example.id for d in demos if user_turns(d.example).strip() in seen]


def benchmark_items_problem(run, demos: Sequence[Demonstration],
                            benchmark: Sequence[Example]) -> str | None:
    """Why these demonstrations cannot be trained on (some are items of the run's whole
    benchmark, not just its evaluated subset), or None."""
    overlap = benchmark_overlap(demos, benchmark)
    if overlap:
        return (f"{len(overlap)} warm-start demonstrations are benchmark items of "
                f"{run.task.name!r} (e.g. {overlap[:3]}); refusing to train on them")
    return None


def content_hash(demos: Sequence[Demonstration]) -> str:
    """A digest of every prompt and target, so that a changed generator makes a new cache key."""
    h = hashlib.sha256()
    for d in demos:
        h.update(json.dumps([list(map(dict, d.example.messages)), d.target],
                            sort_keys=True).encode())
    return h.hexdigest()


def encode(tokenizer, demos: Sequence[Demonstration], max_prompt_tokens: int
           ) -> tuple[list[tuple[list[int], list[int]]], list[int]]:
    """(prompt ids, target ids) per demonstration, and the index in ``demos`` of each pair; the
    target ends with the end-of-turn token, so the model learns to stop. Prompts longer than
    ``max_prompt_tokens`` are dropped, as RL drops them."""
    from harness.rollouts import render_prompt

    out, source = [], []
    for k, d in enumerate(demos):
        prompt = tokenizer(render_prompt(tokenizer, d.example),
                           add_special_tokens=False)["input_ids"]
        if len(prompt) > max_prompt_tokens:
            continue
        target = tokenizer(d.target, add_special_tokens=False)["input_ids"]
        out.append((prompt, target + [tokenizer.eos_token_id]))
        source.append(k)
    if not out:
        raise ValueError(f"every warm-start prompt is longer than --max-prompt-tokens "
                         f"({max_prompt_tokens})")
    return out, source


def batch(pairs: Sequence[tuple[list[int], list[int]]], pad: int
          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Prompts left-padded to [B, P], targets right-padded to [B, T], as rollouts are laid out
    (so the loss reuses the RL forward): (prompt ids, prompt mask, target ids, target mask)."""
    from harness.rollouts import left_pad

    p_ids, p_mask = left_pad([p for p, _ in pairs], pad)
    width = max(len(t) for _, t in pairs)
    t_ids = torch.full((len(pairs), width), pad, dtype=torch.long)
    t_mask = torch.zeros((len(pairs), width), dtype=torch.long)
    for i, (_, t) in enumerate(pairs):
        t_ids[i, :len(t)] = torch.tensor(t, dtype=torch.long)
        t_mask[i, :len(t)] = 1
    return p_ids, p_mask, t_ids, t_mask
