"""The policy loss shared by all methods: PPO-clip with token advantages, optional KL.

Pure tensor functions; shapes: N responses, T response tokens, V vocabulary.
"""
from __future__ import annotations


import torch

AGG_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor, temperature: float = 1.0,
                   chunk: int = 1024) -> torch.Tensor:
    """Log-probability of each sampled token.

    Args:
        logits: [N, T, V] next-token logits aligned with ``tokens``.
        tokens: [N, T] sampled token ids.
        temperature: logits are divided by it, as at sampling time.
        chunk: tokens per slice, so the [.., V] log-normaliser never holds all T at once.
    Returns: [N, T] log pi(token).
    """
    out = torch.empty(tokens.shape, dtype=torch.float32, device=logits.device)
    for s in range(0, tokens.shape[1], chunk):
        lg = logits[:, s:s + chunk].float() / temperature
        picked = lg.gather(-1, tokens[:, s:s + chunk, None]).squeeze(-1)
        out[:, s:s + chunk] = picked - torch.logsumexp(lg, dim=-1)
    return out


def aggregate(loss_mat: torch.Tensor, mask: torch.Tensor, mode: str,
              total_tokens: float | None = None, max_len: int | None = None) -> torch.Tensor:
    """Reduce a [N, T] per-token loss to a scalar; the modes are named as verl names them.

    Args:
        loss_mat, mask: [N, T]; masked tokens never contribute (not even a NaN or inf).
        mode: token-mean | seq-mean-token-mean | seq-mean-token-sum | seq-mean-token-sum-norm.
        total_tokens: token-mean's divisor. Give the valid-token count of the whole
            mini-batch (all micro-batches, all ranks) so that splitting it changes nothing;
            default: this slice's count.
        max_len: seq-mean-token-sum-norm's constant divisor (Dr. GRPO: the maximum response
            length); default: the padded width T.
    """
    m = mask.to(torch.bool)
    masked = torch.where(m, loss_mat, torch.zeros_like(loss_mat))
    if mode == "token-mean":
        denom = total_tokens if total_tokens is not None else m.sum().clamp(min=1)
        return masked.sum() / denom
    seq_sum = masked.sum(dim=1)
    if mode == "seq-mean-token-sum":
        return seq_sum.mean()
    if mode == "seq-mean-token-mean":
        return (seq_sum / m.sum(dim=1).clamp(min=1)).mean()
    if mode == "seq-mean-token-sum-norm":
        return (seq_sum / (max_len or loss_mat.shape[1])).mean()
    raise ValueError(f"unknown loss aggregation {mode!r}; known: {', '.join(AGG_MODES)}")


def ppo_clip_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
                  mask: torch.Tensor, eps_low: float = 0.2, eps_high: float = 0.2,
                  agg: str = "token-mean", **agg_options) -> tuple[torch.Tensor, dict]:
    """``-min(ratio*S, clip(ratio, 1-eps_low, 1+eps_high)*S)`` aggregated.

    Args: logp, old_logp, advantages, mask: [N, T]; ``agg_options`` go to :func:`aggregate`.
    Returns: (scalar loss, {"clip_frac", "ratio_mean"}).
    """
    ratio = torch.exp(logp - old_logp)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * advantages
    loss_mat = -torch.minimum(unclipped, clipped)
    loss = aggregate(loss_mat, mask, agg, **agg_options)
    with torch.no_grad():
        m = mask.to(torch.bool)
        frac = ((clipped < unclipped) & m).sum() / m.sum().clamp(min=1)
        ratio_mean = ratio[m].mean() if m.any() else torch.tensor(1.0)
        token_mean = aggregate(loss_mat, mask, "token-mean")  # for logs, whatever ``agg``
    return loss, {"clip_frac": float(frac), "ratio_mean": float(ratio_mean),
                  "pg_loss": float(token_mean)}


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, kind: str = "low_var_kl") -> torch.Tensor:
    """[N, T] per-token KL(pi || ref) estimate from sampled-token log-probs (Schulman's k1/k2/k3)."""
    if kind == "kl":
        return logp - ref_logp
    if kind == "mse":
        return 0.5 * (logp - ref_logp) ** 2
    if kind == "low_var_kl":
        log_ratio = torch.clamp(ref_logp - logp, -20, 20)
        return torch.clamp(torch.exp(log_ratio) - log_ratio - 1, -10, 10)
    raise ValueError(f"unknown KL estimator {kind!r}; known: low_var_kl, kl, mse")
