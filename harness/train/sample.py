"""Stages 1-2: sample responses to this worker's prompts, score them, gather over workers."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

import torch

from harness import engine as eng
from harness.console.progress import stage
from harness.rollouts import Rollout
from tasks.base import Example, Task


@dataclass
class Sampled:
    """One step's responses: this worker's rows, and what every worker's rows share."""

    rollout: Rollout  # this worker's responses
    rewards: list[list[float]]  # [n_local][K]
    rows: list[Example]  # [n_local] the Example each response answers
    groups: list[int]  # [n_local] the step's global prompt index of each response
    all_rewards: torch.Tensor  # [N, K] every worker's rows, in rank order
    all_lengths: torch.Tensor  # [N]
    all_groups: torch.Tensor  # [N]
    offset: int  # this worker's first row in the gathered tensors
    metrics: dict

    @property
    def width(self) -> int:
        return int(self.all_lengths.max())

    @property
    def mask(self) -> torch.Tensor:
        """[N, width] {0, 1} valid response tokens of every worker's rows."""
        return (torch.arange(self.width)[None, :] < self.all_lengths[:, None]).to(torch.long)


def token_digest(ids: torch.Tensor, mask: torch.Tensor) -> float:
    """The sampled tokens (each row's valid ones, in order) as one number: the first 13 hex
    digits of their SHA-256, exact as a float (< 2**53)."""
    import hashlib

    h = hashlib.sha256()
    for row, keep in zip(ids.tolist(), mask.tolist()):
        h.update(str([t for t, k in zip(row, keep) if k]).encode())
    return float(int(h.hexdigest()[:13], 16))


def sample(engine, task: Task, prompts: Sequence[Example], step_prompts: Sequence[int],
           rank: int, world: int, config, step: int, cuda: bool) -> Sampled:
    """``prompts``: the step's prompts (all workers'); this worker takes every world-th one.
    Generation (the engine wakes for it and, where it can, sleeps after it: its own rule), then
    the rewards, gathered."""
    r = config.rollout
    mine = list(range(rank, len(step_prompts), world))
    examples = [prompts[step_prompts[j]] for j in mine]
    t0 = time.perf_counter()
    stage("sampling")
    ro = engine.generate(examples, r.group_size, r.max_response_tokens, r.temperature, r.top_p,
                         r.top_k, seed=config.seed * 1_000_003 + step * 1009 + rank)
    metrics = {"time/generate": time.perf_counter() - t0}
    if cuda:  # the device's use while the rollout engine is awake (vLLM's KV cache included):
        # an engine that sleeps after generating measured it just before it slept
        metrics["gpu/used_generating_gb"] = engine.awake_used_gb \
            if "sleep" in engine.capabilities else eng.gpu_used_gb()
    rows = [examples[i] for i in ro.example_index]
    t1 = time.perf_counter()
    stage("rewards")
    rewards = task.compute_rewards(rows, ro.texts)
    metrics["time/rewards"] = time.perf_counter() - t1
    # what this rank drew, as a number the step's log keeps: seeds that share a first rollout
    # must show the same one (tests/test_committed_results.py)
    metrics["rollout/token_digest"] = token_digest(ro.response_ids, ro.response_mask)
    lengths = ro.response_mask.sum(dim=1).tolist()
    groups = [mine[i] for i in ro.example_index]
    parts = eng.all_gather_objects((rewards, lengths, groups))
    offset = sum(len(p[0]) for p in parts[:rank])
    all_lengths = torch.tensor([x for p in parts for x in p[1]])
    metrics["response_length"] = float(all_lengths.float().mean())
    return Sampled(
        ro, rewards, rows, groups,
        all_rewards=torch.tensor([x for p in parts for x in p[0]],
                                 dtype=torch.float32).reshape(len(all_lengths), -1),
        all_lengths=all_lengths, all_groups=torch.tensor([x for p in parts for x in p[2]]),
        offset=offset, metrics=metrics)
