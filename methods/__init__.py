"""The method registry: advantage strategies behind one contract, RolloutBatch -> S[N, T].

One method, one file: each module below registers its method (its options, extra passes, loss
terms and parts); ``a+b`` composes presets (``gdpo+saw``, ``grpo+sa-mrpo``, ``saw+gd2po``). A
plugin file registers its own the same way (``--plugin my_method.py``). Functional entry::

    S = methods.advantages("gdpo+saw", batch, whiten="token")
"""
from __future__ import annotations

from common.lazy import lazy

from methods.base import AdvantageOutput, CommonOptions, LossTerm, Method, Parts, Pass, PassContext
from methods.batch import RolloutBatch
from methods.compose import method_advantages
from methods.registry import METHODS, add, get, option_classes, options_class, options_of

# the built-in methods, in the order Table 8 lists them
from methods import grpo, gdpo, saw, dara, dvao, sa_mrpo, gd2po, mrtpo, cort, opsd  # noqa: E402,F401
from methods import verpo, p2t, tcrm  # noqa: E402,F401

torch = lazy("torch", globals())  # imported on first use: common/lazy.py


def options(**values):
    """An options object of every registered method's options with these values, defaults
    elsewhere (a run carries its own method's: ``options_of``)."""
    return options_class()(**values)


def compute(name: str, batch: RolloutBatch, opts=None) -> AdvantageOutput:
    """Token advantages and diagnostics of method ``name`` on ``batch``; the options are
    checked first (each problem named with its fix)."""
    method = get(name)
    opts = opts if opts is not None else options()
    problems = method.problems(opts)
    if problems:
        raise ValueError(f"method {name!r}: " + "; ".join(problems))
    return method_advantages(method, batch, opts)


def advantages(name: str, batch: RolloutBatch, **values) -> torch.Tensor:
    """[N, T] token advantages of method ``name``; ``values`` are option fields."""
    return compute(name, batch, options(**values)).scores


__all__ = ["METHODS", "AdvantageOutput", "CommonOptions", "LossTerm", "Method", "Parts",
           "Pass", "PassContext", "RolloutBatch", "add", "advantages", "compute", "get",
           "method_advantages", "option_classes", "options", "options_class", "options_of"]
