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


def test_the_policys_log_probs_are_compared_under_the_engines_definition():
    """An engine that reports a sampled token's log-prob after top-k/top-p (vLLM's V1 sampler)
    is compared with the policy's renormalised over the same kept tokens; one that reports it
    before (the lean engine) with the policy's own."""
    import torch

    from harness.train.update import as_sampled

    logits = torch.tensor([[[2.0, 1.0, 0.0, -1.0], [0.0, 3.0, 1.0, 0.5]]])  # [1, T=2, V=4]
    tokens = torch.tensor([[1, 2]])
    full = (logits / 0.5).log_softmax(-1).gather(2, tokens[..., None])[..., 0]
    assert torch.equal(as_sampled(full, logits, tokens, False, 0.5, 2, 1.0), full)
    assert torch.equal(as_sampled(full, logits, tokens, True, 0.5, 0, 1.0), full)  # no filter
    got = as_sampled(full, logits, tokens, True, 0.5, 2, 1.0)
    # position 0: top-2 are tokens 0 and 1 -> log(e^2 / (e^4 + e^2)) at temperature 0.5
    kept = torch.tensor([4.0, 2.0])
    assert torch.allclose(got[0, 0], kept.log_softmax(-1)[1])
    # position 1: token 2 is the second of the top-2 (logits 3, 1) -> renormalised over them
    assert torch.allclose(got[0, 1], torch.tensor([6.0, 2.0]).log_softmax(-1)[1])
    assert (got > full).all()  # renormalising over fewer tokens raises every kept one
    # a sampled token outside the kept set (a boundary tie elsewhere) keeps the full value
    other = torch.tensor([[3, 2]])
    full3 = (logits / 0.5).log_softmax(-1).gather(2, other[..., None])[..., 0]
    outside = as_sampled(full3, logits, other, True, 0.5, 2, 1.0)
    assert torch.isfinite(outside).all() and outside[0, 0] == full3[0, 0]
