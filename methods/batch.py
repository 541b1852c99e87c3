"""The RolloutBatch contract: everything an advantage strategy may read.

The trainer builds one RolloutBatch per step and hands it to the method; a method never asks
the trainer for anything else, so the trainer never special-cases a method by name.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch


@dataclass(frozen=True)
class RolloutBatch:
    """One step's rollouts.

    Shapes: N responses (B prompts x G samples), K rewards, T response tokens.
    """

    rewards: torch.Tensor  # [N, K] float; NaN where a reward does not apply to a response
    reward_names: tuple[str, ...]  # K names, in the column order of ``rewards``
    reward_bounds: tuple[tuple[float, float], ...]  # K declared (lo, hi) bounds
    group: torch.Tensor  # [N] long; responses with the same value answer the same prompt
    response_mask: torch.Tensor  # [N, T] {0,1}; 1 on valid response tokens
    reward_weights: Optional[torch.Tensor] = None  # [K] fixed weights w_k; None means all 1
    relevance: Optional[torch.Tensor] = None  # [N, K, T] per-reward token relevance (replay)
    teacher_logprobs: Optional[torch.Tensor] = None  # [N, T] teacher log-probs (distillation)
    contrast: Optional[torch.Tensor] = None  # [N, T] CoRT: log pi(y|x) - log pi(y|x_free)
    step: int = 0  # current training step, for schedules
    total_steps: int = 1
    extras: dict = field(default_factory=dict)  # free-form, for methods' own diagnostics

    def __post_init__(self) -> None:
        n, k = self.rewards.shape
        if len(self.reward_names) != k or len(self.reward_bounds) != k:
            raise ValueError(
                f"rewards has {k} columns but {len(self.reward_names)} names and "
                f"{len(self.reward_bounds)} bounds"
            )
        if self.group.shape != (n,):
            raise ValueError(f"group must have shape [{n}], got {tuple(self.group.shape)}")
        if self.response_mask.shape[0] != n:
            raise ValueError(
                f"response_mask must have {n} rows, got {tuple(self.response_mask.shape)}"
            )
        if self.reward_weights is not None and self.reward_weights.shape != (k,):
            raise ValueError(f"reward_weights must have shape [{k}]")

    @property
    def num_rewards(self) -> int:
        return self.rewards.shape[1]

    def weights(self) -> torch.Tensor:
        """[K] the fixed reward weights w_k (all 1 unless the task says otherwise)."""
        if self.reward_weights is None:
            return torch.ones(self.num_rewards, dtype=self.rewards.dtype)
        return self.reward_weights.to(self.rewards.dtype)
