"""TCRM (Nikulkov 2026, "Reward Models Are Secretly Value Functions: Temporally Coherent Reward
Modeling", arXiv 2604.22981): a reward model whose output at every token is the conditional
expectation of the final reward given the prefix, learned from outcomes alone. ``losses.py``
holds its training objective and the per-token credit it gives; the method that trains one per
reward on each step's rollouts and allocates its credit is built on them (docs/methods.md,
"TCRM")."""
