"""TCRM's objective and credit (methods/tcrm/losses.py) on hand-computed numbers, and the
property the paper builds on: the lookahead (Monte Carlo) and smoothness (TD) terms are
minimised by the conditional expectation of the outcome given the prefix."""
import math

import pytest
import torch

from methods.tcrm import losses


def test_bradley_terry_on_final_tokens_by_hand():
    values = torch.tensor([[0.0, 0.5, 1.0], [0.0, 2.0, 0.0], [9.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0]])
    # finals: 1.0, 2.0, 9.0 (the last valid token of each row)
    assert losses.final_values(values, mask).tolist() == [1.0, 2.0, 9.0]
    got = losses.bradley_terry(values, mask, [(0, 1), (2, 0)])
    want = (math.log1p(math.exp(1.0)) + math.log1p(math.exp(-8.0))) / 2
    assert got.item() == pytest.approx(want, rel=1e-6)
    assert losses.bradley_terry(values, mask, []).item() == 0.0


def test_lookahead_and_smoothness_by_hand_with_fixed_targets():
    values = torch.tensor([[1.0, 2.0, 4.0], [3.0, 1.0, 0.0]], requires_grad=True)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    # lookahead: row 0 -> (1-4)^2, (2-4)^2; row 1 -> (3-1)^2: mean (9 + 4 + 4) / 3
    look = losses.lookahead(values, mask)
    assert look.item() == pytest.approx(17 / 3)
    look.backward()
    # the final outputs are targets: no gradient reaches them
    assert values.grad[0, 2] == 0 and values.grad[1, 1] == 0
    assert values.grad[0, 0].item() == pytest.approx(2 * (1 - 4) / 3)
    values.grad = None
    # smoothness: (1-2)^2, (2-4)^2, (3-1)^2 -> 9 / 3
    smooth = losses.smoothness(values, mask)
    assert smooth.item() == pytest.approx(3.0)
    smooth.backward()
    assert values.grad[0, 2] == 0 and values.grad[0, 1].item() == pytest.approx(2 * (2 - 4) / 3)
    total = losses.tcrm_loss(values, mask, [(0, 1)], 0.5, 0.25)
    assert total.item() == pytest.approx(math.log1p(math.exp(-(4.0 - 1.0))) + 0.5 * 17 / 3
                                         + 0.25 * 3.0)


def _toy():
    """Two steps: token a in {A, B} (P(A) = 0.3), then b in {X, Y} with P(X | A) = 0.6, P(X | B)
    = 0.2; the outcome R(A, X) = 1, R(A, Y) = 0, R(B, X) = 0, R(B, Y) = 1. Its four
    trajectories [prefix-after-prompt, after a, after a b] with their probabilities."""
    paths = [("A", "X", 0.3 * 0.6, 1.0), ("A", "Y", 0.3 * 0.4, 0.0),
             ("B", "X", 0.7 * 0.2, 0.0), ("B", "Y", 0.7 * 0.8, 1.0)]
    expected = {"A": 0.6, "B": 0.8, "": 0.3 * 0.6 + 0.7 * 0.8}  # E[R | prefix]
    return paths, expected


@pytest.mark.parametrize("term", ["lookahead", "smoothness"])
def test_both_regularisers_are_minimised_by_the_conditional_expectation(term):
    """A tabular value per prefix, the final outputs fixed at the outcome (what the final
    token's Bradley-Terry fit gives, up to an affine map): gradient descent on the expected
    term over the four trajectories reaches E[R | prefix] at every prefix. In closed form: the
    descent direction (the gradient; smoothness's has the target's stop-gradient, as TD's) is
    linear in the table, zero at E[R | prefix], and its Jacobian's eigenvalues have positive
    real parts, so that point is the one place the descent rests and it converges there."""
    paths, expected = _toy()
    weights = torch.tensor([p for _, _, p, _ in paths])
    mask = torch.ones(4, 3)
    order = ("", "A", "B")

    def direction(table: torch.Tensor) -> torch.Tensor:
        table = table.clone().requires_grad_(True)
        at = dict(zip(order, table))
        values = torch.stack([torch.stack([at[""], at[a], torch.tensor(r)])
                              for a, _, _, r in paths])
        term_value = getattr(losses, term)(values, mask, weights)
        return torch.autograd.grad(term_value, table)[0]

    best = torch.tensor([expected[p] for p in order])
    assert direction(best).abs().max().item() < 1e-6, term
    # by differences (exact for a linear map; autograd would not see the stop-gradient target)
    jacobian = torch.stack([direction(best + e) - direction(best) for e in torch.eye(3)], 1)
    assert torch.linalg.eigvals(jacobian).real.min().item() > 1e-3, (term, jacobian)
    # linear: the direction anywhere is the Jacobian times the distance from E[R | prefix]
    elsewhere = best + torch.tensor([0.3, -0.2, 0.5])
    assert torch.allclose(direction(elsewhere), jacobian @ (elsewhere - best), atol=1e-6)


def test_preference_pairs_within_groups_and_the_credit_telescopes():
    rewards = torch.tensor([1.0, 0.0, float("nan"), 0.5, 0.5, 2.0])
    group = torch.tensor([0, 0, 0, 1, 1, 1])
    assert losses.preference_pairs(rewards, group) == [(0, 1), (5, 3), (5, 4)]
    values = torch.tensor([[0.2, 0.5, 0.9], [0.1, -0.3, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    credit = losses.token_credit(values, mask, torch.tensor([0.0, 0.1]))
    assert torch.allclose(credit, torch.tensor([[0.2, 0.3, 0.4], [0.0, -0.4, 0.0]]))
    # a row's credits sum to its final value minus the value before the response
    assert torch.allclose(credit.sum(1), torch.tensor([0.9 - 0.0, -0.3 - 0.1]))
