"""TCRM in ``bench localisation``: its variants (the profile aligned with each reward's
advantage, or its magnitude; no placebo: it reads no verifier text) and its profile on the
bench's batch."""
from __future__ import annotations


def parse_mode(spec: str, mode: str, controls: tuple[str, ...]) -> tuple[str, str, str]:
    """``tcrm`` in ``bench localisation``: (``tcrm``, aligned | abs, control or "")."""
    if mode in ("placebo", "order"):
        raise ValueError(f"{spec!r}: TCRM reads no verifier text, so it has no @{mode}; its "
                         "controls are @shuffled, @cross, @swapped and @outcomes")
    if mode in controls:
        return "tcrm", "aligned", mode
    if mode not in ("", "aligned", "abs"):
        raise ValueError(f"unknown variant {spec!r}: tcrm takes @abs, @shuffled, @cross, @swapped "
                         "or @outcomes (trained on outcomes shuffled within groups)")
    return "tcrm", mode or "aligned", ""


def shuffled_outcomes(ctx, seed: int):
    """``ctx`` with each group's reward rows permuted among its responses (seeded; a response
    keeps its tokens and takes another's outcomes, all K together): what a value model can
    learn when outcomes carry no information about the tokens."""
    import copy

    import torch

    out = copy.copy(ctx)
    out.rewards = ctx.rewards.clone()
    g = torch.Generator().manual_seed(seed)
    for group in ctx.group.unique():
        rows = (ctx.group == group).nonzero().squeeze(1)
        out.rewards[rows] = ctx.rewards[rows[torch.randperm(len(rows), generator=g)]]
    out.state = {}
    return out


def profile(ctx, options, mode: str, outcomes_seed: int | None = None):
    """``bench localisation``'s TCRM profile: the value model trained on the batch (as the pass
    trains on each step's rollouts) and its credit, as the allocation weights it (beta 1)
    with the sign of each reward's group advantage; pairs without one (the reward constant
    in the group) have no profile (NaN). ``outcomes_seed``: the same model, from the same
    start, trained on the batch's outcomes shuffled within groups (``shuffled_outcomes``);
    its credit is weighted with the real advantages' signs, so only what it learned
    differs."""
    import torch

    from methods.mrtpo import mrtpo_token_weights
    from methods.tcrm import PASS, VALUE, online, token_weights

    trained = ctx if outcomes_seed is None else shuffled_outcomes(ctx, outcomes_seed)
    state = online.ValueState(options.tcrm_model, tuple(ctx.reward_names), 0,
                              options.tcrm_train_layers, options.tcrm_lr)
    if options.tcrm_model is None:
        state.ensure(ctx.model("policy"))  # nothing has trained: the starting policy
    trained.state[PASS] = state
    with torch.no_grad():
        credit = VALUE.run(trained, options)
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
