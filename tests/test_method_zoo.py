"""Reward weightings, the GD2PO filter and composition, on hand-computed numbers and properties.

The shared example: two prompts x three responses, two rewards with declared bounds
[0, 1] and [-3, 3], one token per response (so whitening is over six values).

    r = [[1, 3], [0, -3], [0, 1],     group 0
         [1, 0], [1,  2], [1, -1]]    group 1

Per-reward group advantages (unbiased std, eps 1e-6):
    A_0 = [1.154699, -0.577349, -0.577349 | 0, 0, 0]          (group 1 is constant)
    A_1 = [0.872871, -1.091089, 0.218218 | -0.218218, 1.091089, -0.872871]
"""
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import methods
from methods import RolloutBatch

R = [[1, 3], [0, -3], [0, 1], [1, 0], [1, 2], [1, -1]]
GROUP = [0, 0, 0, 1, 1, 1]
BOUNDS = ((0.0, 1.0), (-3.0, 3.0))


def make(rewards=R, group=GROUP, lengths=None, bounds=BOUNDS, width=None, relevance=None):
    r = torch.tensor(rewards, dtype=torch.float32)
    n, k = r.shape
    lengths = lengths or [1] * n
    width = width or max(lengths)
    mask = (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).long()
    if relevance is None:  # replay distances for the methods that read them (MRTPO)
        g = torch.Generator().manual_seed(n * 31 + k)
        relevance = torch.rand(n, k, width, generator=g) * mask[:, None, :]
    contrast = torch.randn(n, width, generator=torch.Generator().manual_seed(n)) * mask
    # VERPO's evidence pass: alignment, cost >= 0, evidence available on every other response
    g = torch.Generator().manual_seed(n + 7)
    evidence = torch.stack([torch.randn(n, width, generator=g), torch.rand(n, width, generator=g),
                            (torch.arange(n) % 2 == 0).float()[:, None].expand(n, width)], 1)
    evidence = evidence * mask[:, None, :]
    # P2T's attribution pass: signed influences, one response's row not computed (NaN)
    influence = torch.randn(n, k, width, generator=torch.Generator().manual_seed(n + 11))
    influence = influence * mask[:, None, :]
    influence[0, 0] = float("nan")
    # TCRM's value pass: signed per-token changes of each reward's expected outcome
    value = torch.randn(n, k, width, generator=torch.Generator().manual_seed(n + 13))
    value = value * mask[:, None, :]
    return RolloutBatch(rewards=r, reward_names=tuple(f"r{i}" for i in range(k)),
                        reward_bounds=bounds, group=torch.tensor(group), response_mask=mask,
                        passes={"replay": relevance, "counterfactual": contrast[:, None, :],
                                "evidence": evidence, "attribution": influence,
                                "value": value},
                        step=3, total_steps=10)


def first_token(name, **options):
    return methods.compute(name, make(), methods.options(**options))


def close(out, expected):
    assert torch.allclose(out.scores[:, 0], torch.tensor(expected), atol=1e-5), out.scores[:, 0]


def test_saw():
    # shifted by lo: r~_0 = [1,0,0,1,1,1] (mean 2/3, std 0.516398), r~_1 = r_1 + 3
    # (mean 3.333333, std 2.160247); CV = [0.774597, 0.648074]
    # lambda = 2 CV / sum CV = [1.088933, 0.911067]
    out = first_token("saw", whiten="none")
    assert out.metrics["lambda/r0"] == pytest.approx(1.088933, abs=1e-5)
    assert out.metrics["lambda/r1"] == pytest.approx(0.911067, abs=1e-5)
    close(out, [2.052634, -1.62275, -0.429884, -0.198811, 0.994055, -0.795244])


def test_dara_asym_and_sym():
    # pi_0 = 1/2 (only group 0 has reward-0 signal), pi_1 = 1; lambda = [sqrt 2, 1]
    out = first_token("dara", whiten="none")
    assert out.metrics["lambda/r0"] == pytest.approx(math.sqrt(2), abs=1e-6)
    # asym boosts only positive A_0: 1.154699 * sqrt 2 + 0.872871 = 2.505862; negatives stay
    close(out, [2.505862, -1.668438, -0.359131, -0.218218, 1.091089, -0.872871])
    close(first_token("dara", whiten="none", dara_variant="sym"),
          [2.505862, -1.907584, -0.598277, -0.218218, 1.091089, -0.872871])


def test_dvao_per_group_lambda_and_no_whitening():
    # group 0: population stds [0.471405, 2.494438] -> lambda [0.158945, 0.841055]
    # group 1: stds [0, 1.247219] -> lambda [0, 1]; DVAO does not whiten by default
    close(first_token("dvao"), [0.917666, -1.009433, 0.091767, -0.218218, 1.091089, -0.872871])


def test_dvao_degenerate_group_gets_zero():
    b = make(rewards=[[1, 2], [1, 2], [0, 1], [1, 3]], group=[0, 0, 1, 1])
    S = methods.advantages("dvao", b)
    assert torch.all(S[:2] == 0) and torch.all(S[2:] != 0)


def test_sa_mrpo():
    # saturation: mean r_0 = 2/3 -> s_0 = 2/3; mean r_1 = 1/3 -> s_1 = (1/3 + 3) / 6 = 5/9
    # lambda = (1 - s)^0.5 = [0.577350, 0.666667]
    out = first_token("sa-mrpo", whiten="none")
    assert out.metrics["lambda/r1"] == pytest.approx(2 / 3, abs=1e-6)
    close(out, [1.24858, -1.060725, -0.187854, -0.145478, 0.727392, -0.581914])


def test_gd2po_hard_and_whitening_over_kept_responses():
    # response 2 has A_0 < 0 < A_1: a conflict; kappa = 2/3 in group 0 and 1 in group 1
    # S before whitening: 2/3 * [2.027570, -1.668438] | 0 | [-0.218218, 1.091089, -0.872871]
    out = first_token("gd2po", whiten="none")
    assert out.metrics["kept_fraction"] == pytest.approx(5 / 6)
    close(out, [1.351713, -1.112292, 0.0, -0.218218, 1.091089, -0.872871])
    # token whitening over the five kept responses only; the dropped one stays 0
    close(first_token("gd2po"), [1.160065, -1.032252, 0.0, -0.236761, 0.928177, -0.81923])


def test_gd2po_soft_keeps_mild_conflicts():
    # response 2's agreement |sum A| / sum |A| = 0.451416: dropped at tau 0.8, kept at tau 0.4
    assert first_token("gd2po", gd2po_tau=0.8, whiten="none").metrics["kept_fraction"] == \
        pytest.approx(5 / 6)
    assert first_token("gd2po", gd2po_tau=0.4, whiten="none").metrics["kept_fraction"] == 1.0


def test_composition_and_its_errors():
    assert methods.get("gdpo+saw").parts == methods.Parts(normaliser="gdpo", weighting="saw")
    assert methods.get("saw+gd2po").parts.filter == "gd2po"
    close(first_token("gdpo+saw", whiten="none"),
          [2.052634, -1.62275, -0.429884, -0.198811, 0.994055, -0.795244])
    with pytest.raises(ValueError, match="both set the weighting"):
        methods.get("saw+dara")
    with pytest.raises(ValueError, match="both set the normaliser"):
        methods.get("grpo+gdpo")
    with pytest.raises(KeyError, match="Did you mean 'saw'"):
        methods.get("gdpo+saww")
    with pytest.raises(ValueError, match="compose it with gdpo"):
        first_token("grpo+gd2po")
    with pytest.raises(ValueError, match="asymmetric"):
        first_token("grpo+dara")


def test_grpo_with_a_weighting_weights_the_rewards_before_summing():
    # grpo+sa-mrpo: R = 0.577350 r_0 + 0.666667 r_1, then group-normalised
    lam = torch.tensor([1 / math.sqrt(3), 2 / 3])
    R_ = torch.tensor(R, dtype=torch.float64) @ lam.double()
    expected = []
    for g in (0, 1):
        x = R_[g * 3:(g + 1) * 3]
        expected += ((x - x.mean()) / (x.std() + 1e-6)).tolist()
    close(first_token("grpo+sa-mrpo"), expected)


# --- properties over random batches --------------------------------------------------------
@st.composite
def batches(draw):
    groups = draw(st.integers(1, 4))
    g = draw(st.integers(2, 4))
    k = draw(st.integers(1, 4))
    n = groups * g
    vals = draw(st.lists(st.sampled_from([-3.0, -1.0, 0.0, 0.5, 1.0, 3.0, float("nan")]),
                         min_size=n * k, max_size=n * k))
    lengths = draw(st.lists(st.integers(1, 5), min_size=n, max_size=n))
    return make([vals[i * k:(i + 1) * k] for i in range(n)], [i // g for i in range(n)],
                lengths, bounds=tuple((-3.0, 3.0) for _ in range(k)), width=6)


class _AllOnes:
    def __init__(self, asymmetric=False):
        self.asymmetric = asymmetric

    def __call__(self, batch, adv, options):
        from methods.compose import Weights

        return Weights(torch.ones(batch.num_rewards), asymmetric=self.asymmetric)


@settings(max_examples=50, deadline=None)
@given(batches())
def test_all_lambda_one_weightings_equal_gdpo(b):
    from methods import compose
    from methods.base import Parts
    from methods.compose import WEIGHTINGS

    gdpo = methods.advantages("gdpo", b)
    opts = methods.options()
    for asym in (False, True):
        WEIGHTINGS._entries["_ones"] = _AllOnes(asym)
        try:
            out = compose.compute(Parts(weighting="_ones"), b, opts).scores
        finally:
            del WEIGHTINGS._entries["_ones"]
        assert torch.allclose(out, gdpo, atol=1e-5)
    # DARA and SAW are all-ones when every reward has the same signal: checked via gamma=0
    assert torch.allclose(methods.advantages("sa-mrpo", b, sa_gamma=0.0), gdpo, atol=1e-6)


@settings(max_examples=50, deadline=None)
@given(batches())
def test_every_method_is_zero_on_masked_tokens_and_finite(b):
    for name in methods.METHODS.names():
        S = methods.advantages(name, b)
        assert torch.isfinite(S).all(), name
        assert torch.all(S[b.response_mask == 0] == 0), name


@settings(max_examples=30, deadline=None)
@given(batches(), st.randoms(use_true_random=False))
def test_every_method_is_permutation_equivariant(b, rnd):
    perm = list(range(b.rewards.shape[0]))
    rnd.shuffle(perm)
    p = torch.tensor(perm)
    pb = RolloutBatch(rewards=b.rewards[p], reward_names=b.reward_names,
                      reward_bounds=b.reward_bounds, group=b.group[p],
                      response_mask=b.response_mask[p],
                      passes={k: v[p] for k, v in b.passes.items()}, step=b.step,
                      total_steps=b.total_steps)
    for name in methods.METHODS.names():
        assert torch.allclose(methods.advantages(name, pb), methods.advantages(name, b)[p],
                              atol=1e-5), name


def test_trl_conventions_match_trl():
    """--conventions trl reproduces TRL's normalize_then_sum (recorded by
    tests/fixtures/make_trl_gdpo_fixture.py with the TRL version stored in the fixture),
    ragged rewards included: an absent reward, a reward with one value in its group, and a
    response with no reward at all."""
    import json
    from pathlib import Path

    data = json.loads((Path(__file__).parent / "fixtures" / "trl_gdpo.json").read_text())
    rewards = [[float("nan") if x is None else x for x in row] for row in data["rewards"]]
    n, k = len(rewards), len(rewards[0])
    b = make(rewards, [i // data["group_size"] for i in range(n)], [3] * n,
             bounds=tuple((-3.0, 3.0) for _ in range(k)))
    ours = methods.advantages("gdpo", b, conventions="trl")[:, 0]
    assert data["trl_version"] == "1.16.0"
    assert torch.allclose(ours, torch.tensor(data["advantages"]), atol=1e-5)
