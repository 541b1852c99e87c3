"""What a method is: a name, its options, the extra passes and loss terms it needs, and
advantages(batch) -> S[N, T].

A method module (one file under ``methods/``) declares all of it and registers one
:class:`Method`; the harness runs whatever passes and loss terms a method declares, by the
pass's name, and never by the method's:

* **options**: a frozen dataclass whose fields carry a help string (each becomes a CLI flag,
  ``--mrtpo-beta``) and whose ``problems()`` lists what is wrong with its values, with the fix;
* **passes** (:class:`Pass`): forward passes without gradient of the policy that sampled the
  responses (or of a model the pass keeps and trains itself, in ``ctx.state``), run on each
  worker before the advantages; ``run(ctx, options)`` returns ``[n_local, C, T]`` and the
  harness gathers every worker's rows into ``RolloutBatch.passes[pass.name]`` ``[N, C, T]``;
* **loss terms** (:class:`LossTerm`): a term added to the policy-gradient loss, with a
  no-gradient ``prepare`` step (e.g. a teacher's hidden states) and a per-token ``loss``;
* **parts**: the advantage recipe (normaliser, reward weighting, response filter, token
  allocation), each part a function registered by name in :mod:`methods.compose`.

:class:`PassContext` is what a pass or loss term may ask of the harness: the responses, their
examples and rewards, and hidden states of a model under chat contexts the method builds.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol, Sequence

from common.lazy import lazy

from common.options import option, values_of
from methods.stats import CONVENTIONS, whitening_problem

torch = lazy("torch", globals())  # imported on first use: common/lazy.py


def no_grad(fn: Callable) -> Callable:
    """``torch.no_grad()`` as a decorator that does not import torch when the module loads."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with torch.no_grad():
            return fn(*args, **kwargs)

    return wrapper


def chunk_option() -> Any:
    """``replay_chunk``, shared by every method that takes full-vocabulary distributions of
    its passes (one flag, one default)."""
    return option(128, "response tokens per slice of the full-vocabulary replay distances "
                       "(memory O(chunk*V))")


@dataclass(frozen=True)
class CommonOptions:
    """Options every method understands."""

    conventions: str = option(
        "verl", "conventions of an upstream, verl | trl: the group-std eps (1e-6 | 1e-4), the "
                "whitening eps (1e-8 under the rsqrt | 1e-4 on the std) and the default "
                "whitening (token | sequence)")
    whiten: Optional[str] = option(
        None, "batch whitening: token | sequence | none; None = the method's default. The eps "
              "stays that of --conventions")

    def problems(self) -> list[str]:
        out = []
        if self.conventions not in CONVENTIONS:
            out.append(f"unknown conventions {self.conventions!r}; use one of "
                       f"{', '.join(CONVENTIONS)}")
        if self.whiten not in (None, "token", "sequence", "none"):
            out.append(f"unknown whitening {self.whiten!r}; use token, sequence or none")
        return out


class PassContext(Protocol):
    """What the harness gives a pass or a loss term (one worker's responses)."""

    examples: Sequence[Any]  # [n] the Example each response answers (tasks.base.Example)
    texts: Sequence[str]  # [n] the decoded responses
    response_ids: torch.Tensor  # [n, T] long
    response_mask: torch.Tensor  # [n, T] {0, 1}
    rewards: torch.Tensor  # [n, K] float, NaN where absent
    reward_names: tuple[str, ...]  # K
    reward_bounds: tuple[tuple[float, float], ...]  # K declared (lo, hi)
    group: torch.Tensor  # [n] long; whole groups are on one worker, rows in sampling order
    temperature: float  # the rollout temperature (divides logits)
    batch_size: int  # responses per forward
    tokenizer: Any
    spans: Optional[Callable]  # the task's spans(example, response) -> {name: ranges}, or None
    # [n, K] bool: False where every group-normalised advantage of reward k is 0 for response
    # n (absent, or constant over its group: methods.stats.within_group_signal), so a pass
    # that serves per-reward advantages may skip the pair; all True where the caller wants
    # every pair computed (explain, benches, probes)
    signal: torch.Tensor
    # a pass's own state between steps, by pass name (e.g. a model it trains): kept by the
    # run and saved with its checkpoints (pickled), so a resumed run continues it; empty at a
    # run's first step, and for tools and benches that make one context
    state: dict

    def hidden(self, contexts: Sequence[list[dict]], rows: Sequence[int],
               model: str = "policy") -> torch.Tensor:
        """[len(rows), T, H] final hidden states predicting the responses ``rows`` when
        response ``rows[i]`` follows chat ``contexts[i]``; ``model``: policy (the one that
        sampled them) | initial (the policy before training) | current (a plain copy of the
        policy, updated only after the optimizer's last step)."""

    def hidden_variants(self, variants: Sequence[Sequence[list[dict]]], rows: Sequence[int],
                        model: str = "policy") -> list[torch.Tensor]:
        """``[hidden(v, rows, model) for v in variants]``, computed together: the tokens the
        contexts of a prompt group's rows begin with (in every variant) go through the model
        once, so K + 1 replay contexts that differ only in a verifier text cost one prompt.
        A context given as None is not computed (its row of that variant is zeros)."""

    def head(self, model: str = "policy") -> torch.nn.Module:
        """The LM head (hidden -> logits) of ``model``."""

    def embeddings(self, model: str = "policy") -> torch.nn.Module:
        """The input embedding (token ids -> [.., H]) of ``model``."""

    def input_gradients(self, variants: Sequence[Sequence[list[dict]]], rows: Sequence[int],
                        objective: Callable, model: str = "policy") -> tuple[list, Any]:
        """One backward: ``objective(states)`` -> (scalar, aux), with ``states`` as
        ``hidden_variants(variants, rows, model)`` but with gradient with respect to the
        response tokens' input embeddings; returns (C tensors [len(rows), T, H]: the scalar's
        gradient at each response token's embedding in each variant, 0 at a response's last
        token; aux). The model's weights get no gradient."""


@dataclass(frozen=True)
class Pass:
    """An extra no-gradient forward pass whose output the advantages read by its name."""

    name: str  # key in RolloutBatch.passes
    help: str
    run: Callable[[PassContext, Any], torch.Tensor]  # (ctx, options) -> [n, C, T]
    # (ctx, options, [n, C, T] output) -> per-response diagnostic records (gathered over
    # workers), and records -> scalar metrics logged per step
    diagnose: Optional[Callable[[PassContext, Any, torch.Tensor], list]] = None
    summarise: Optional[Callable[[list], dict]] = None
    models: Callable[[Any], frozenset] = lambda options: frozenset({"policy"})
    # it builds its contexts from the examples' verifier information (checked before Ray
    # starts: a training set without it cannot serve this pass); a function of the options
    # where that depends on them
    reads_verifier_info: Any = True  # bool | (options) -> bool


@dataclass(frozen=True)
class LossTerm:
    """A term added to the policy-gradient loss: ``coef(options) * aggregate(loss)``."""

    name: str  # logged per step under this name
    help: str
    forward: str  # the extra forward it prepares, as Table 8 names it (e.g. teacher)
    prepare: Callable[[PassContext, Any], Any]  # (ctx, options) -> data indexable by rows
    # (student logits [m, T, V] with gradient, prepared[rows], ctx, options) -> [m, T]
    loss: Callable[[torch.Tensor, Any, PassContext, Any], torch.Tensor]
    coef: Callable[[Any], float]
    models: Callable[[Any], frozenset] = lambda options: frozenset({"policy"})
    reads_verifier_info: bool = True


@dataclass(frozen=True)
class AdvantageOutput:
    scores: torch.Tensor  # [N, T] token advantages, zero on masked tokens
    metrics: dict = field(default_factory=dict)  # scalar diagnostics to log per step


PART_KINDS = ("normaliser", "weighting", "filter", "allocation")


@dataclass(frozen=True)
class Parts:
    """A method as a composition of parts; None = not set by this preset (defaults apply)."""

    normaliser: Optional[str] = None  # a registered normaliser (default gdpo)
    weighting: Optional[str] = None  # a registered reward weighting
    filter: Optional[str] = None  # a registered response filter
    allocation: Optional[str] = None  # a registered token allocation (default uniform)

    def merge(self, other: "Parts", names: tuple[str, str]) -> "Parts":
        """Combine two presets; both setting the same kind of part is an error."""
        out = {}
        for kind in PART_KINDS:
            a, b = getattr(self, kind), getattr(other, kind)
            if a is not None and b is not None and a != b:
                raise ValueError(f"{names[0]!r} and {names[1]!r} both set the {kind} "
                                 f"({a} vs {b}); compose at most one of each kind")
            out[kind] = a if a is not None else b
        return Parts(**out)


@dataclass(frozen=True)
class Method:
    """A registered advantage strategy: a preset of parts with its passes and loss terms."""

    name: str
    help: str
    source: str  # where the formula was read (paper / code)
    parts: Parts = Parts()
    options: tuple[type, ...] = ()  # its option dataclasses (CommonOptions is always there)
    passes: tuple[Pass, ...] = ()
    loss_terms: tuple[LossTerm, ...] = ()
    # the loss is the loss terms alone, no policy-gradient term (OPSD as published)
    pg_term: bool = True
    # the method it reduces to with its own part switched off (explain's comparison)
    reference: Optional[str] = None
    # its parts' functions, looked up when the method is (``methods.get``; compose.bind)
    bound: Optional[tuple] = field(default=None, compare=False, repr=False)

    @property
    def needs(self) -> tuple[str, ...]:
        """Names of the extra forward passes and loss terms (Table 8's "extra passes")."""
        return tuple(p.name for p in self.passes) + tuple(t.forward for t in self.loss_terms)

    @property
    def reads_verifier_info(self) -> tuple[str, ...]:
        """The passes and loss terms that may build contexts from verifier information."""
        return tuple(x.name for x in self.passes + self.loss_terms if x.reads_verifier_info)

    def verifier_info_readers(self, options) -> tuple[str, ...]:
        """The passes and loss terms that build contexts from verifier information under
        ``options``."""
        def reads(x) -> bool:
            flag = x.reads_verifier_info
            return bool(flag(options) if callable(flag) else flag)

        return tuple(x.name for x in self.passes + self.loss_terms if reads(x))

    def models(self, options) -> frozenset:
        """Models its passes and loss terms read: policy | initial | current."""
        out: frozenset = frozenset()
        for item in self.passes + self.loss_terms:
            out |= item.models(options)
        return out

    def reward_problems(self, options, rewards: Sequence[str]) -> list[str]:
        """What is wrong with ``options`` for a task of these rewards: each option class's
        ``problems_with_rewards(rewards)`` where it has one (a saved model of other rewards)."""
        out: list[str] = []
        for cls in self.options:
            check = getattr(values_of(options, cls), "problems_with_rewards", None)
            if check is not None:
                out += _checked(self.name, cls, lambda: check(tuple(rewards)))
        return out

    def problems(self, options) -> list[str]:
        """What is wrong with ``options`` (any object with the option fields) for this
        method, each with its fix."""
        out = [p for cls in (CommonOptions,) + self.options
               for p in _checked(self.name, cls, values_of(options, cls).problems)]
        common = values_of(options, CommonOptions)
        if self.pg_term and common.whiten in (None, "token", "sequence", "none") \
                and common.conventions in CONVENTIONS:
            mode = common.whiten or CONVENTIONS[common.conventions].whiten
            problem = whitening_problem(self.parts.allocation, mode)
            if problem:
                out.append(problem)
        return out



def _checked(method: str, cls: type, check: Callable[[], list]) -> list[str]:
    """An options class's own check; one that raises (a plugin's bug) is one problem naming
    the class and the error, not a traceback."""
    try:
        return list(check())
    except Exception as exc:  # noqa: BLE001 - any error of the check is the problem
        where = getattr(cls, "__module__", "?")
        return [f"the options check of method {method!r} ({cls.__name__} in {where}) raised "
                f"{type(exc).__name__}: {exc}; fix its problems()"]


__all__ = ["AdvantageOutput", "CommonOptions", "LossTerm", "Method", "Parts", "Pass",
           "PassContext", "option", "values_of"]
