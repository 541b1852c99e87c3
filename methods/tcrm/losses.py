"""TCRM's objective and credit, as pure tensor functions (docs/methods.md, "TCRM").

A value model reads a response and outputs ``v[n, t]``: its estimate, after token t, of the
final reward. Three terms train it (the paper's): the Bradley-Terry loss on the final token of
pairs of responses to the same prompt whose reward differs; the **lookahead** term, each
intermediate output regressed on the same response's final output (Monte Carlo: the target is
the outcome the prefix led to); the **smoothness** term, each output regressed on the next one
(one-step TD). Targets are held fixed (stop-gradient), as regression targets in value learning
are: minimised over a function of the prefix, both make ``v(t)`` the conditional expectation of
the final output given the prefix (``tests/test_tcrm.py`` checks it on a two-step toy).
The credit of token t is the change it made to that expectation, ``v(t) - v(t-1)``, with
``v(-1)`` the value before the response (after the prompt).
"""
from __future__ import annotations

from typing import Optional, Sequence

from common.lazy import lazy

torch = lazy("torch", globals())


def last_index(mask: "torch.Tensor") -> "torch.Tensor":
    """[N] the position of each row's last valid token (mask [N, T] {0, 1}, every row
    non-empty)."""
    positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
    return torch.where(mask.bool(), positions, torch.full_like(positions, -1)).max(dim=1).values


def final_values(values: "torch.Tensor", mask: "torch.Tensor") -> "torch.Tensor":
    """[N] each row's output at its last valid token (values [N, T])."""
    return values.gather(1, last_index(mask)[:, None])[:, 0]


def bradley_terry(values: "torch.Tensor", mask: "torch.Tensor",
                  pairs: Sequence[tuple[int, int]]) -> "torch.Tensor":
    """Scalar: mean over ``pairs`` (i preferred to j) of ``-log sigmoid(v_i(T_i) - v_j(T_j))``,
    the final tokens' Bradley-Terry loss (0 without pairs)."""
    if not pairs:
        return values.sum() * 0.0
    final = final_values(values, mask)
    i = torch.tensor([a for a, _ in pairs], device=values.device)
    j = torch.tensor([b for _, b in pairs], device=values.device)
    return torch.nn.functional.softplus(-(final[i] - final[j])).mean()


def _weighted_mean(squares: "torch.Tensor", keep: "torch.Tensor",
                   weights: Optional["torch.Tensor"]) -> "torch.Tensor":
    """Mean of ``squares`` [N, T] over ``keep`` [N, T], each row weighted by ``weights`` [N]."""
    w = keep.to(squares.dtype)
    if weights is not None:
        w = w * weights[:, None].to(squares.dtype)
    total = w.sum()
    return (squares * w).sum() / total if total > 0 else squares.sum() * 0.0


def lookahead(values: "torch.Tensor", mask: "torch.Tensor",
              weights: Optional["torch.Tensor"] = None) -> "torch.Tensor":
    """Scalar: mean over each row's valid tokens before its last of ``(v(t) - sg v(T))^2``: every
    intermediate output regressed on the row's own final output (Monte Carlo). ``weights`` [N]:
    a weight per row (e.g. a trajectory's probability)."""
    final = final_values(values, mask).detach()
    keep = mask.bool() & (torch.arange(values.shape[1], device=values.device)[None, :]
                          < last_index(mask)[:, None])
    return _weighted_mean((values - final[:, None]) ** 2, keep, weights)


def smoothness(values: "torch.Tensor", mask: "torch.Tensor",
               weights: Optional["torch.Tensor"] = None) -> "torch.Tensor":
    """Scalar: mean over valid tokens whose next token is valid of ``(v(t) - sg v(t+1))^2``
    (one-step TD, no discount: the reward comes at the end)."""
    keep = mask[:, :-1].bool() & mask[:, 1:].bool()
    squares = (values[:, :-1] - values[:, 1:].detach()) ** 2
    return _weighted_mean(squares, keep, weights)


def tcrm_loss(values: "torch.Tensor", mask: "torch.Tensor", pairs: Sequence[tuple[int, int]],
              lookahead_coef: float, smoothness_coef: float) -> "torch.Tensor":
    """The objective: Bradley-Terry + ``lookahead_coef`` lookahead + ``smoothness_coef``
    smoothness."""
    return (bradley_terry(values, mask, pairs) + lookahead_coef * lookahead(values, mask)
            + smoothness_coef * smoothness(values, mask))


def preference_pairs(rewards: "torch.Tensor", group: "torch.Tensor"
                     ) -> list[tuple[int, int]]:
    """(i, j) for responses to the same prompt (``group`` [N]) with ``rewards[i] > rewards[j]``
    ([N]; NaN: the reward does not apply, never paired)."""
    r, g = rewards.tolist(), group.tolist()
    return [(i, j) for i in range(len(r)) for j in range(len(r))
            if g[i] == g[j] and r[i] == r[i] and r[j] == r[j] and r[i] > r[j]]


def token_credit(values: "torch.Tensor", mask: "torch.Tensor",
                 before: "torch.Tensor") -> "torch.Tensor":
    """[N, T] each token's change of the expected outcome, ``v(t) - v(t-1)``, with ``v(-1) =
    before`` [N] (the value after the prompt); 0 on masked tokens. Over a row's tokens the
    credits sum to ``v(T) - before``."""
    previous = torch.cat([before[:, None].to(values.dtype), values[:, :-1]], dim=1)
    return (values - previous) * mask.to(values.dtype)
