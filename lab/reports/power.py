"""The power of Figure 4's exact comparison, for planning a steps-to-threshold study before its
runs: how many seeds a method needs to find a given ratio of median steps, and the smallest
ratio a given number of seeds can find.

The test is ``lab.reports.survival.permutation_p``'s: the log-rank statistic's two-sided
permutation p over every relabelling of the pooled seeds (or, ``paired``, over every swap of
the two methods' outcomes within a seed). Here it is vectorised over the relabellings
(``logrank_z``: one matrix product per statistic), so that a simulation of a few thousand
experiments takes seconds; a test checks it against scipy's statistic and the survival
module's p.

The model of one seed's steps to the threshold: log-normal around the method's median (a
multiplicative spread, ``spread`` = the standard deviation of log steps), rounded up to a whole
step, at least ``first`` (the first step a full trailing window allows), right-censored at
``cap`` (the run's last step). Paired seeds share a seed effect (``shared``: the share of the
log variance two methods' seeds have in common, from their shared first rollout). Every
number it returns is a function of those assumptions, which a plan states beside it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations, product
from typing import Sequence

import numpy as np


def logrank_z(times: np.ndarray, events: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """[P] the log-rank statistic (observed minus expected events of the first group over its
    standard error, scipy's sign) for each of P labellings. ``times`` [N] event or censoring
    steps, ``events`` [N] bool (False: censored), ``groups`` [P, N] bool (True: first group).
    0 where it is undefined (no event, or no variance)."""
    times, events = np.asarray(times, float), np.asarray(events, bool)
    g = np.asarray(groups, float)
    u = np.unique(times[events])
    if u.size == 0:
        return np.zeros(g.shape[0])
    at_risk = (times[:, None] >= u[None, :]).astype(float)  # [N, K]
    dies = ((times[:, None] == u[None, :]) & events[:, None]).astype(float)
    n, d = at_risk.sum(0), dies.sum(0)  # [K]
    n_a, d_a = g @ at_risk, g @ dies  # [P, K]
    share = n_a / n
    observed_minus_expected = (d_a - d * share).sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        tie = np.where(n > 1, (n - d) / np.maximum(n - 1, 1), 1.0)
        var = (d * share * (1 - share) * tie).sum(1)
        z = np.where(var > 0, observed_minus_expected / np.sqrt(var), 0.0)
    return z


def labellings(n_a: int, n_b: int, paired: bool) -> np.ndarray:
    """[P, n_a + n_b] bool: every relabelling of the pooled seeds into groups of the two sizes
    (the first ``n_a`` positions are the observed first group), or, ``paired`` (n_a = n_b),
    every swap within a seed (seed i at positions i and n_a + i)."""
    if paired:
        if n_a != n_b:
            raise ValueError(f"{n_a} and {n_b} seeds: pairing needs the same seeds")
        flips = np.array(list(product((False, True), repeat=n_a)), dtype=bool)
        return np.concatenate([~flips, flips], axis=1)
    out = np.zeros((math.comb(n_a + n_b, n_a), n_a + n_b), dtype=bool)
    for row, chosen in enumerate(combinations(range(n_a + n_b), n_a)):
        out[row, list(chosen)] = True
    return out


def exact_p(a: Sequence[int | None], a_last: Sequence[int], b: Sequence[int | None],
            b_last: Sequence[int], paired: bool = False,
            cache: dict | None = None) -> float:
    """The two-sided permutation p of the log-rank statistic (``survival.permutation_p``'s
    first value); NaN where no seed reached the threshold."""
    steps = [*a, *b]
    if all(s is None for s in steps):
        return math.nan
    times = np.array([s if s is not None else last for s, last in zip(steps, [*a_last,
                                                                             *b_last])], float)
    events = np.array([s is not None for s in steps])
    key = (len(a), len(b), paired)
    perms = (cache.setdefault(key, labellings(*key)) if cache is not None
             else labellings(*key))
    z = np.abs(logrank_z(times, events, perms))
    observed = z[0]  # the first labelling is the observed one (both kinds)
    return float(np.mean(z >= observed - 1e-9 * max(1.0, observed)))


@dataclass(frozen=True)
class Model:
    """Steps to the threshold of one method's seeds (the module's docstring)."""

    median: float  # the reference method's median steps
    spread: float  # standard deviation of log steps (seed to seed)
    cap: int  # the run's last step: later is censored there
    first: int = 1  # the first step that can count (a full trailing window)
    shared: float = 0.0  # share of the log variance a seed's two methods have in common


def draw(model: Model, ratio: float, n: int, rng: np.random.Generator
         ) -> tuple[list[int | None], list[int], list[int | None], list[int]]:
    """One experiment: (first method's steps, its last steps, the reference's, its last), the
    first method's median ``ratio`` times the reference's; None: censored at the cap."""
    common = rng.normal(0, model.spread * math.sqrt(model.shared), n)
    own = model.spread * math.sqrt(1 - model.shared)

    def steps(median: float) -> list[int | None]:
        x = np.exp(math.log(median) + common + rng.normal(0, own, n))
        s = np.maximum(np.ceil(x), model.first).astype(int)
        return [int(v) if v <= model.cap else None for v in s]

    return steps(model.median * ratio), [model.cap] * n, steps(model.median), [model.cap] * n


def power(model: Model, ratio: float, n: int, alpha: float = 0.05, paired: bool = False,
          draws: int = 2000, seed: int = 0) -> float:
    """The share of ``draws`` simulated experiments whose exact p is below ``alpha`` (an
    experiment where no seed reaches the threshold counts as not found)."""
    rng, cache, found = np.random.default_rng(seed), {}, 0
    for _ in range(draws):
        p = exact_p(*draw(model, ratio, n, rng), paired=paired, cache=cache)
        found += (not math.isnan(p)) and p < alpha
    return found / draws


def seeds_needed(model: Model, ratio: float, target: float = 0.8, alpha: float = 0.05,
                 paired: bool = False, max_seeds: int = 12, draws: int = 2000,
                 seed: int = 0) -> int | None:
    """The fewest seeds a method with which the test finds ``ratio`` with ``target`` power;
    None if not within ``max_seeds``."""
    for n in range(2, max_seeds + 1):
        if power(model, ratio, n, alpha, paired, draws, seed) >= target:
            return n
    return None


def smallest_p(n: int, paired: bool = False) -> float:
    """The smallest p the design can give (complete separation): 2 of its labellings."""
    return 2 / (2 ** n if paired else math.comb(2 * n, n))
