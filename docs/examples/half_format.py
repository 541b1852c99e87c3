"""A method in one file, loaded with --plugin: GDPO with the `format` reward at half weight.

    python -m harness run --plugin docs/examples/half_format.py --method half-format --task bfcl
"""
import torch

from methods import add
from methods.compose import WEIGHTINGS, Weights

WEIGHT = {"format": 0.5}  # reward name -> lambda_k; every other reward keeps 1


def half_format(batch, adv, options):
    """[K] lambda_k; the GDPO normaliser sums lambda_k * A_k over the rewards."""
    lam = [WEIGHT.get(name, 1.0) for name in batch.reward_names]
    return Weights(torch.tensor(lam, dtype=batch.rewards.dtype))


WEIGHTINGS.add("half-format", half_format)
add("half-format", "GDPO with the format reward at half weight", "docs/examples/half_format.py",
    weighting="half-format", reference="gdpo")
