"""The RolloutBatch contract: everything an advantage strategy may read.

The trainer builds one RolloutBatch per step and hands it to the method; a method never asks
the trainer for anything else, so the trainer never special-cases a method by name. The
outputs of a method's extra passes arrive in ``passes``, keyed by the pass's name.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from common.lazy import lazy

torch = lazy("torch", globals())  # imported on first use: common/lazy.py


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
    # pass name -> [N, C, T] outputs of the method's extra passes (methods.base.Pass)
    passes: Mapping[str, torch.Tensor] = field(default_factory=dict)
    step: int = 0  # current training step, for schedules
    total_steps: int = 1

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
        for name, value in self.passes.items():
            if value.dim() != 3 or value.shape[0] != n:
                raise ValueError(f"pass {name!r} must be [N={n}, C, T], got "
                                 f"{tuple(value.shape)}")

    def lo_hi(self) -> tuple[torch.Tensor, torch.Tensor]:
        """[K] lower and [K] upper declared bounds of the rewards (float64)."""
        b = torch.tensor(self.reward_bounds, dtype=torch.float64)
        return b[:, 0], b[:, 1]

    @property
    def num_rewards(self) -> int:
        return self.rewards.shape[1]

    def pass_output(self, name: str, method: str) -> torch.Tensor:
        """[N, C, T] output of pass ``name``; a clear error when the trainer did not run it."""
        if name not in self.passes:
            raise ValueError(f"{method} needs the output of the {name!r} pass "
                             f"(RolloutBatch.passes[{name!r}]); the trainer runs the passes "
                             "a method declares")
        return self.passes[name]
