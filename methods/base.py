"""What a method is: a name, the extra forward passes it needs, and advantages(batch) -> S[N,T]."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

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

    dara_variant: str = field(
        default="asym",
        metadata={"help": "DARA: asym (boost positive advantages only) | sym (scale them)"},
    )
    dara_cap: float = field(default=5.0, metadata={"help": "DARA: upper bound of lambda"})
    sa_gamma: float = field(
        default=0.5, metadata={"help": "SA-MRPO: lambda = (1 - saturation)^gamma; 0 is GDPO"})
    mrtpo_beta: float = field(
        default=0.5, metadata={"help": "MRTPO: allocation strength beta in w = (1-beta) + "
                                       "beta*rho; 0 is GDPO"})
    replay: str = field(
        default="loo", metadata={"help": "MRTPO replay contexts: loo (with all vs without "
                                         "reward k's text) | single | joint (one profile)"})
    shuffle_relevance: bool = field(
        default=False, metadata={"help": "MRTPO ablation: permute each response's relevance "
                                         "over its tokens"})
    replay_chunk: int = field(
        default=128, metadata={"help": "response tokens per slice of the full-vocabulary "
                                       "replay distances (memory O(chunk*V))"})
    cort_clip: float = field(
        default=2.0, metadata={"help": "CoRT: contrast mapped to [0, c] before the mean-1 "
                                       "normalisation"})
    cort_map: str = field(
        default="clip", metadata={"help": "CoRT: clip (clip(delta, 0, c)) | sigmoid "
                                          "(c * sigmoid(delta))"})
    cort_warmup: float = field(
        default=0.2, metadata={"help": "CoRT: SmoothStep ramp length as a fraction of the "
                                       "training steps"})
    opsd_beta: float = field(
        default=0.5, metadata={"help": "OPSD: generalised JSD mixing weight (0.5 = symmetric)"})
    opsd_teacher: str = field(
        default="initial", metadata={"help": "OPSD teacher: initial (the fixed initial policy) "
                                             "| current (the policy before this update)"})
    opsd_coef: float = field(
        default=1.0, metadata={"help": "OPSD: weight of the distillation loss"})
    gd2po_tau: Optional[float] = field(
        default=None,
        metadata={"help": "GD2PO: None = hard filter (drop every conflicting response); a "
                          "float = soft filter (drop when agreement < tau; 0.8 in the paper)"},
    )

    def __post_init__(self) -> None:
        if self.conventions not in CONVENTIONS:
            raise ValueError(
                f"unknown conventions {self.conventions!r}; known: {', '.join(CONVENTIONS)}"
            )
        if self.opsd_teacher not in ("initial", "current"):
            raise ValueError(f"unknown OPSD teacher {self.opsd_teacher!r}; known: initial, current")
        if self.replay not in ("loo", "single", "joint"):
            raise ValueError(f"unknown replay mode {self.replay!r}; known: loo, single, joint")
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
class Parts:
    """A method as a composition of parts; None = not set by this preset (defaults apply)."""

    normaliser: Optional[str] = None  # grpo | gdpo (default gdpo)
    weighting: Optional[str] = None  # saw | dara | dvao | sa-mrpo
    filter: Optional[str] = None  # gd2po
    allocation: Optional[str] = None  # token allocation: uniform (default) | mrtpo | cort
    extra_loss: Optional[str] = None  # opsd; alone (no normaliser named) it has no reward term

    def merge(self, other: "Parts", names: tuple[str, str]) -> "Parts":
        """Combine two presets; both setting the same kind of part is an error."""
        out = {}
        for kind in ("normaliser", "weighting", "filter", "allocation", "extra_loss"):
            a, b = getattr(self, kind), getattr(other, kind)
            if a is not None and b is not None and a != b:
                raise ValueError(f"{names[0]!r} and {names[1]!r} both set the {kind} "
                                 f"({a} vs {b}); compose at most one of each kind")
            out[kind] = a if a is not None else b
        return Parts(**out)


@dataclass(frozen=True)
class Method:
    """A registered advantage strategy: a preset of parts."""

    name: str
    help: str
    source: str  # where the formula was read (paper / code)
    parts: Parts
    needs: tuple[str, ...] = ()  # extra forward passes: replay | counterfactual | teacher

    def compute(self, batch: RolloutBatch, options: MethodOptions) -> AdvantageOutput:
        from methods.compose import compute

        return compute(self.parts, batch, options)
