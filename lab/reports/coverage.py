"""How often the tables' two intervals cover what they claim to, on simulated 0/1 scores shaped
like the tables (a few seeds x 20 items, pass rates from a few percent to a half).

Each simulated comparison draws items (a difficulty logit ``b ~ N(base, item_sd)`` and the
row's own gain on that item ``g ~ N(effect, gain_sd)``), then for every seed one training
effect per row (``N(0, seed_sd)`` on the logit) and one 0/1 score per item and row; ``d[s, i]``
is the row's score minus the reference's, in points. Two quantities are covered or not:

- **these items**: the expected difference on the drawn items (seeds averaged out), what the
  seed-only interval is about (the items held fixed);
- **the item population**: the expected difference over items like them, what the interval
  over seeds and items (``lab.reports.items``) is about.

``python -m lab.reports.coverage [--reps N]`` prints the table docs/results.md quotes;
``tests/test_items.py`` runs a smaller one.
"""
from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

# (name, base logit, item_sd, gain_sd, seed_sd, effect): rates like the smoke tables'
SCENARIOS = (
    ("rare passes (~10 %), items alike", -2.2, 0.8, 0.3, 0.3, 0.4),
    ("rare passes (~10 %), items varied", -2.5, 2.0, 0.8, 0.3, 0.4),
    ("half pass, items varied", 0.0, 2.0, 0.8, 0.3, 0.3),
    ("half pass, seeds varied", 0.0, 1.0, 0.3, 0.8, 0.3),
)


@dataclass(frozen=True)
class Coverage:
    scenario: str
    seeds: int
    items: int
    reps: int
    crossed_population: float  # the interval over seeds and items, of the population's value
    crossed_these: float  # the same interval, of these items' value
    seeds_population: float  # the seed-only interval, of the population's value
    seeds_these: float  # the seed-only interval, of these items' value
    no_spread: float  # share of comparisons where either interval had nothing to go on


def _sigmoid(x):
    import numpy as np

    return 1.0 / (1.0 + np.exp(-x))


def _seed_average(logit, seed_sd):
    """E over a ~ N(0, seed_sd) of sigmoid(logit + a), by Gauss-Hermite quadrature."""
    import numpy as np

    nodes, weights = np.polynomial.hermite_e.hermegauss(40)
    weights = weights / weights.sum()
    return (_sigmoid(np.asarray(logit)[..., None] + seed_sd * nodes) * weights).sum(-1)


def simulate(base: float, item_sd: float, gain_sd: float, seed_sd: float, effect: float,
             seeds: int = 3, items: int = 20, reps: int = 2000, rng_seed: int = 0,
             name: str = "") -> Coverage:
    import numpy as np
    from scipy import stats

    from lab.reports import items as it

    rng = np.random.default_rng(rng_seed)
    # the population's value: items drawn without end (quadrature over seeds, Monte Carlo
    # over items; 400,000 items put its own error near 0.05 points)
    b = rng.normal(base, item_sd, 400_000)
    g = rng.normal(effect, gain_sd, 400_000)
    population = 100.0 * float((_seed_average(b + g, seed_sd) - _seed_average(b, seed_sd)).mean())
    q = float(stats.t.ppf(0.975, seeds - 1))
    hits = np.zeros(4)
    flat = 0
    for _ in range(reps):
        b = rng.normal(base, item_sd, items)
        g = rng.normal(effect, gain_sd, items)
        these = 100.0 * float((_seed_average(b + g, seed_sd) - _seed_average(b, seed_sd)).mean())
        a_row = rng.normal(0, seed_sd, (seeds, 1))
        a_ref = rng.normal(0, seed_sd, (seeds, 1))
        y_row = rng.random((seeds, items)) < _sigmoid(b + g + a_row)
        y_ref = rng.random((seeds, items)) < _sigmoid(b + a_ref)
        d = 100.0 * (y_row.astype(float) - y_ref.astype(float))
        crossed = it.interval(d.tolist())
        per_seed = d.mean(axis=1)
        sd = float(per_seed.std(ddof=1))
        if not crossed.spread or sd <= 1e-12:
            flat += 1  # no interval: covers nothing
            continue
        lo, hi = per_seed.mean() - q * sd / math.sqrt(seeds), per_seed.mean() + q * sd / math.sqrt(seeds)
        hits += [crossed.low <= population <= crossed.high, crossed.low <= these <= crossed.high,
                 lo <= population <= hi, lo <= these <= hi]
    cov = hits / reps
    return Coverage(name, seeds, items, reps, *map(float, cov), flat / reps)


def table(seeds: int = 3, items: int = 20, reps: int = 2000) -> list[Coverage]:
    return [simulate(*params, seeds=seeds, items=items, reps=reps, rng_seed=k, name=name)
            for k, (name, *params) in enumerate(SCENARIOS)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.reports.coverage", description=__doc__)
    p.add_argument("--reps", type=int, default=2000)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--items", type=int, default=20)
    a = p.parse_args(argv)
    print(f"{a.seeds} seeds x {a.items} items, {a.reps} comparisons per scenario; coverage of "
          "the 95 % intervals\n")
    print("| scenario | over seeds and items: population | : these items | seed-only: "
          "population | : these items | no spread |")
    print("|---|---|---|---|---|---|")
    for c in table(a.seeds, a.items, a.reps):
        print(f"| {c.scenario} | {c.crossed_population:.3f} | {c.crossed_these:.3f} | "
              f"{c.seeds_population:.3f} | {c.seeds_these:.3f} | {c.no_spread:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
