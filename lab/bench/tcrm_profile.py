"""TCRM in ``bench localisation``: its variants (the profile aligned with each reward's
advantage, or its magnitude; no placebo: it reads no verifier text) and its profile on the
bench's batch."""
from __future__ import annotations


def parse_mode(spec: str, mode: str, controls: tuple[str, ...]) -> tuple[str, str, str]:
    """``tcrm`` in ``bench localisation``: (``tcrm``, aligned | abs, control or "")."""
    if mode in ("placebo", "order"):
        raise ValueError(f"{spec!r}: TCRM reads no verifier text, so it has no @{mode}; its "
                         "controls are @shuffled, @cross and @swapped")
    if mode in controls:
        return "tcrm", "aligned", mode
    if mode not in ("", "aligned", "abs"):
        raise ValueError(f"unknown variant {spec!r}: tcrm takes @abs, @shuffled, @cross or "
                         "@swapped")
    return "tcrm", mode or "aligned", ""


def profile(ctx, options, mode: str):
    """``bench localisation``'s TCRM profile: the value model trained on the batch (as the pass
    trains on each step's rollouts) and its credit, as the allocation weights it (beta 1)
    with the sign of each reward's group advantage; pairs without one (the reward constant
    in the group) have no profile (NaN)."""
    import torch

    from methods.mrtpo import mrtpo_token_weights
    from methods.tcrm import PASS, VALUE, online, token_weights

    state = online.ValueState(options.tcrm_model, tuple(ctx.reward_names), 0,
                              options.tcrm_train_layers, options.tcrm_lr)
    if options.tcrm_model is None:
        state.ensure(ctx.model("policy"))  # nothing has trained: the starting policy
    ctx.state[PASS] = state
    with torch.no_grad():
        credit = VALUE.run(ctx, options)
    r = ctx.rewards
    sign = torch.zeros_like(r)
    for g in ctx.group.unique():
        rows = ctx.group == g
        sign[rows] = torch.sign(r[rows] - r[rows].nanmean(dim=0, keepdim=True))
    sign = torch.nan_to_num(sign, nan=0.0)

    def to_weights(raw, shuffled, seed):
        x = token_weights(raw, sign, ctx.response_mask, 1.0, mode)  # mean 1: the profile
        w = mrtpo_token_weights(x, ctx.response_mask, 1.0, shuffle=shuffled, seed=seed)
        w[sign == 0] = float("nan")
        return w

    return credit, to_weights
