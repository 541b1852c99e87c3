"""What a method is: a name, the extra forward passes it needs, and advantages(batch) -> S[N,T]."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from methods.batch import RolloutBatch
from methods.stats import CONVENTIONS, Conventions


@dataclass(frozen=True)
class MethodOptions:
    """Options every method understands (method-specific ones are added by later parts)."""

    conventions: str = field(
        default="verl",
        metadata={"help": "conventions of an upstream, verl | trl: the group-std eps (1e-6 | "
                          "1e-4), the whitening eps (1e-8 under the rsqrt | 1e-4 on the std) and "
                          "the default whitening (token | sequence)"},
    )
    whiten: Optional[str] = field(
        default=None,
        metadata={"help": "batch whitening: token | sequence | none; None = the method's default. "
                          "The eps stays that of --conventions"},
    )

    def __post_init__(self) -> None:
        if self.conventions not in CONVENTIONS:
            raise ValueError(
                f"unknown conventions {self.conventions!r}; known: {', '.join(CONVENTIONS)}"
            )
        if self.whiten not in (None, "token", "sequence", "none"):
            raise ValueError(f"unknown whitening {self.whiten!r}; known: token, sequence, none")

    @property
    def conv(self) -> Conventions:
        return CONVENTIONS[self.conventions]


@dataclass(frozen=True)
class AdvantageOutput:
    scores: torch.Tensor  # [N, T] token advantages, zero on masked tokens
    metrics: dict = field(default_factory=dict)  # scalar diagnostics to log per step


@dataclass(frozen=True)
class Method:
    """A registered advantage strategy."""

    name: str
    help: str
    source: str  # where the formula was read (paper / code)
    compute: Callable[[RolloutBatch, MethodOptions], AdvantageOutput]
    needs: str = "none"  # extra forward passes: none | replay | counterfactual | teacher
