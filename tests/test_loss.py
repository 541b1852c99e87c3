"""PPO-clip loss, aggregation modes and KL estimators on hand-computed numbers."""
import math

import pytest
import torch

from harness.loss import aggregate, kl_penalty, ppo_clip_loss, token_logprobs


def test_ppo_clip_hand_computed():
    # ratios e^{0.5} = 1.6487 (clipped to 1.2 for S > 0), e^{-0.5} = 0.6065 (clipped to 0.8
    # for S < 0, and min picks the larger loss -0.8 * -1 = ... see below)
    logp = torch.tensor([[0.5, -0.5]])
    old = torch.zeros(1, 2)
    S = torch.tensor([[1.0, -1.0]])
    mask = torch.ones(1, 2)
    loss, info = ppo_clip_loss(logp, old, S, mask, 0.2, 0.2, "token-mean")
    # token 1: -min(1.6487 * 1, 1.2 * 1) = -1.2
    # token 2: -min(0.6065 * -1, 0.8 * -1) = -min(-0.6065, -0.8) = 0.8
    assert math.isclose(float(loss), (-1.2 + 0.8) / 2, abs_tol=1e-6)
    assert math.isclose(info["clip_frac"], 1.0)


@pytest.mark.model
def test_on_policy_gradient_is_advantage_times_score():
    logp = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    S = torch.tensor([[2.0, -1.0]])
    loss, _ = ppo_clip_loss(logp, logp.detach(), S, torch.ones(1, 2))
    loss.backward()
    assert torch.allclose(logp.grad, -S / 2)


def test_aggregation_modes():
    L = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
    m = torch.tensor([[1, 1, 1], [1, 0, 0]])
    assert math.isclose(float(aggregate(L, m, "token-mean")), 10 / 4)
    assert math.isclose(float(aggregate(L, m, "seq-mean-token-sum")), (6 + 4) / 2)
    assert math.isclose(float(aggregate(L, m, "seq-mean-token-mean")), (2 + 4) / 2)
    # Dr. GRPO: mean over sequences of token sums divided by a constant length
    assert math.isclose(float(aggregate(L, m, "seq-mean-token-sum-norm")), (6 / 3 + 4 / 3) / 2,
                        rel_tol=1e-6)
    assert math.isclose(float(aggregate(L, m, "seq-mean-token-sum-norm", max_len=5)),
                        (6 / 5 + 4 / 5) / 2, rel_tol=1e-6)
    # token-mean over a larger mini-batch: this slice's token sum over the whole count
    assert math.isclose(float(aggregate(L, m, "token-mean", total_tokens=20)), 10 / 20)
    with pytest.raises(ValueError, match="known"):
        aggregate(L, m, "sum")


def test_masked_tokens_never_leak_inf_or_nan():
    L = torch.tensor([[1.0, float("inf")], [float("nan"), 2.0]])
    m = torch.tensor([[1, 0], [0, 1]])
    for mode in ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum",
                 "seq-mean-token-sum-norm"):
        assert math.isfinite(float(aggregate(L, m, mode))), mode


def test_token_mean_is_exact_however_a_mini_batch_is_split():
    """Two micro-batches scaled as the trainer scales them (sum / total * steps, then
    DeepSpeed's mean over steps) give the token mean of the whole mini-batch."""
    g = torch.Generator().manual_seed(1)
    L = torch.randn(4, 5, generator=g)
    m = (torch.rand(4, 5, generator=g) > 0.3).long()
    whole = float(aggregate(L, m, "token-mean"))
    total = int(m.sum()) / 2  # 2 accumulation steps, 1 rank
    split = sum(float(aggregate(L[i:i + 2], m[i:i + 2], "token-mean", total_tokens=total))
                for i in (0, 2)) / 2
    assert math.isclose(split, whole, rel_tol=1e-6)


def test_kl_estimators():
    logp = torch.tensor([[-1.0]])
    ref = torch.tensor([[-2.0]])
    # k1 = logp - ref = 1; k2 = 0.5 * 1^2; k3 = e^{-1} - (-1) - 1 = e^{-1}
    assert math.isclose(float(kl_penalty(logp, ref, "kl")), 1.0)
    assert math.isclose(float(kl_penalty(logp, ref, "mse")), 0.5)
    assert math.isclose(float(kl_penalty(logp, ref, "low_var_kl")), math.exp(-1), rel_tol=1e-6)


def test_token_logprobs_chunked_matches_log_softmax():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 7, 11, generator=g)
    tokens = torch.randint(0, 11, (2, 7), generator=g)
    full = torch.log_softmax(logits / 0.7, -1).gather(-1, tokens[..., None]).squeeze(-1)
    assert torch.allclose(token_logprobs(logits, tokens, 0.7, chunk=3), full, atol=1e-6)
