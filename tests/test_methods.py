"""GRPO / GDPO on hand-computed numbers, and properties over random batches."""
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import methods
from methods import RolloutBatch
from methods.stats import group_normalise, whiten


def batch(rewards, group, lengths, width=None):
    r = torch.tensor(rewards, dtype=torch.float32)
    width = width or max(lengths)
    mask = (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).long()
    k = r.shape[1]
    return RolloutBatch(rewards=r, reward_names=tuple(f"r{i}" for i in range(k)),
                        reward_bounds=tuple((-3.0, 3.0) for _ in range(k)),
                        group=torch.tensor(group), response_mask=mask)


# One group of three responses, two rewards:
#   r = [[1, 2], [0, 1], [1, -3]]
HAND = dict(rewards=[[1, 2], [0, 1], [1, -3]], group=[0, 0, 0], lengths=[2, 1, 3])


def test_grpo_hand_computed():
    # R = [3, 1, -2], mean 2/3, deviations 7/3, 1/3, -8/3,
    # unbiased var = (49 + 1 + 64) / 9 / 2 = 19/3, std = 2.5166115
    # A = [0.9271726, 0.1324532, -1.0596259]; no whitening in GRPO
    S = methods.advantages("grpo", batch(**HAND))
    expected = torch.tensor([[0.9271726, 0.9271726, 0], [0.1324532, 0, 0],
                             [-1.0596259, -1.0596259, -1.0596259]])
    assert torch.allclose(S, expected, atol=1e-5)


def test_gdpo_hand_computed():
    # reward 1: [1, 0, 1], mean 2/3, var 1/3 -> A1 = [0.5773503, -1.1547005, 0.5773503]
    # reward 2: [2, 1, -3], mean 0, var 7   -> A2 = [0.7559289, 0.3779645, -1.1338934]
    # sum = [1.3332792, -0.7767361, -0.5565431]; token whitening over 2 + 1 + 3 tokens:
    # mean 0.0366988, unbiased var 1.0159452 -> [1.2863653, -0.8070262, -0.5885681]
    S = methods.advantages("gdpo", batch(**HAND))
    expected = torch.tensor([[1.2863653, 1.2863653, 0], [-0.8070262, 0, 0],
                             [-0.5885681, -0.5885681, -0.5885681]])
    assert torch.allclose(S, expected, atol=1e-5)


def test_gdpo_without_whitening_is_the_sum_of_per_reward_advantages():
    S = methods.advantages("gdpo", batch(**HAND), whiten="none")
    assert torch.allclose(S[:, 0], torch.tensor([1.3332792, -0.7767361, -0.5565431]), atol=1e-5)


def test_group_of_one_gets_mean_zero_std_one_and_nan_is_ignored():
    x = torch.tensor([[2.0, float("nan")], [1.0, 4.0], [3.0, 6.0]])
    out = group_normalise(x, torch.tensor([0, 1, 1]), eps=0.0)
    assert out[0, 0] == 2.0  # single member: (2 - 0) / 1
    assert math.isnan(out[0, 1])
    # group 1, column 0: [1, 3], mean 2, unbiased std sqrt(2)
    assert torch.allclose(out[1:, 0], torch.tensor([-1, 1]) / math.sqrt(2))


def test_ragged_rewards_absent_reward_contributes_nothing():
    nan = float("nan")
    # reward 2 is absent from the whole group: GDPO equals GDPO on reward 1 alone
    b2 = batch([[1, nan], [0, nan], [1, nan]], [0, 0, 0], [1, 1, 1])
    b1 = batch([[1], [0], [1]], [0, 0, 0], [1, 1, 1])
    assert torch.allclose(methods.advantages("gdpo", b2), methods.advantages("gdpo", b1))


def test_response_with_no_reward_gets_zero_advantage():
    nan = float("nan")
    b = batch([[1, 0], [0, 1], [nan, nan]], [0, 0, 0], [2, 2, 2])
    for name in ("grpo", "gdpo"):
        for mode in ("none", "token", "sequence"):
            S = methods.advantages(name, b, whiten=mode)
            assert torch.all(S[2] == 0), (name, mode)  # whitening does not shift it either


def test_trl_conventions_use_eps_1e4_and_sequence_whitening():
    b = batch(**HAND)
    S = methods.advantages("gdpo", b, conventions="trl")
    # per-response sums with group eps 1e-4, then (x - mean) / (std + 1e-4) over responses
    A1 = torch.tensor([1 / 3, -2 / 3, 1 / 3]) / (math.sqrt(1 / 3) + 1e-4)
    A2 = torch.tensor([2.0, 1.0, -3.0]) / (math.sqrt(7) + 1e-4)
    s = A1 + A2
    expected = (s - s.mean()) / (s.std() + 1e-4)
    assert torch.allclose(S[:, 0], expected, atol=1e-5)


def test_unknown_method_lists_known_names():
    with pytest.raises(KeyError) as err:
        methods.advantages("gdpoo", batch(**HAND))
    assert "Did you mean 'gdpo'" in str(err.value) and "grpo" in str(err.value)


@st.composite
def random_batches(draw, k=None):
    groups = draw(st.integers(1, 4))
    g = draw(st.integers(2, 4))
    k = k or draw(st.integers(1, 4))
    n = groups * g
    vals = draw(st.lists(st.sampled_from([-3.0, -1.0, 0.0, 0.5, 1.0, 2.0, 3.0]),
                         min_size=n * k, max_size=n * k))
    lengths = draw(st.lists(st.integers(1, 6), min_size=n, max_size=n))
    return batch([vals[i * k:(i + 1) * k] for i in range(n)],
                 [i // g for i in range(n)], lengths, width=7)


@settings(max_examples=60, deadline=None)
@given(random_batches(k=1))
def test_k1_gdpo_equals_whitened_grpo(b):
    grpo = methods.advantages("grpo", b, whiten="token")
    gdpo = methods.advantages("gdpo", b)
    assert torch.allclose(grpo, gdpo, atol=1e-5)


@settings(max_examples=60, deadline=None)
@given(random_batches())
def test_zero_on_masked_tokens_and_whitened_moments(b):
    for name in ("grpo", "gdpo"):
        S = methods.advantages(name, b)
        assert torch.all(S[b.response_mask == 0] == 0)
    S = methods.advantages("gdpo", b)
    vals = S[b.response_mask.bool()].double()
    raw = methods.advantages("gdpo", b, whiten="none")[b.response_mask.bool()].double()
    if raw.var() > 1e-4:  # eps 1e-8 under the rsqrt only matters for near-constant batches
        assert abs(float(vals.mean())) < 1e-5
        assert abs(float(vals.var()) - 1) < 1e-3


@settings(max_examples=40, deadline=None)
@given(random_batches(), st.randoms(use_true_random=False))
def test_permuting_responses_permutes_advantages(b, rnd):
    n = b.rewards.shape[0]
    perm = list(range(n))
    rnd.shuffle(perm)
    p = torch.tensor(perm)
    pb = RolloutBatch(rewards=b.rewards[p], reward_names=b.reward_names,
                      reward_bounds=b.reward_bounds, group=b.group[p],
                      response_mask=b.response_mask[p])
    for name in ("grpo", "gdpo"):
        assert torch.allclose(methods.advantages(name, pb), methods.advantages(name, b)[p],
                              atol=1e-5)


def test_whiten_keep_drops_responses():
    S = torch.tensor([[1.0, 1.0], [2.0, 2.0], [9.0, 9.0]])
    m = torch.ones(3, 2)
    out = whiten(S, m, "token", 1e-8, keep=torch.tensor([True, True, False]))
    assert torch.all(out[2] == 0)
    assert abs(float(out[:2].mean())) < 1e-6


def test_groups_with_signal_counts_groups_whose_rewards_differ():
    from methods.stats import groups_with_signal

    nan = float("nan")
    rewards = torch.tensor([[0., 1.], [0., 1.],      # group 0: flat on both rewards
                            [0., 1.], [1., 1.],      # group 1: reward 0 differs
                            [nan, 2.], [nan, 3.],    # group 2: reward 1 differs, reward 0 absent
                            [1., nan], [nan, 0.]])   # group 3: one value per reward: no signal
    group = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    assert groups_with_signal(rewards, group) == 0.5
    assert groups_with_signal(rewards[:2], group[:2]) == 0.0
    assert groups_with_signal(torch.zeros(0, 2), torch.zeros(0, dtype=torch.long)) == 0.0


def test_within_group_signal_is_false_exactly_where_group_normalise_gives_zero():
    from methods.stats import group_normalise, within_group_signal

    nan = float("nan")
    values = torch.tensor([[0.3, 1.0, nan], [0.3, 0.0, nan], [0.3, nan, 2.0],  # group 7
                           [0.1, 0.5, 0.0], [0.1, 0.5, 1.0]])  # group 9
    group = torch.tensor([7, 7, 7, 9, 9])
    signal = within_group_signal(values, group)
    # col 0 constant in both groups; col 1 varies in group 7 (NaN row absent), constant in 9;
    # col 2: a lone valid value in group 7 keeps its raw reward (signal), varies in group 9
    assert signal.tolist() == [[False, True, False], [False, True, False],
                               [False, False, True], [False, False, True],
                               [False, False, True]]
    adv = torch.nan_to_num(group_normalise(values, group, 1e-6), nan=0.0)
    assert (adv[~signal] == 0).all() and (adv[signal] != 0).all()
