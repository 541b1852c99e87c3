"""The TRL adapter's refusals (harness/integrations/trl.py): TRL's own advantage options that
a method's advantages would silently replace, and reward functions named as no reward whose
verifier information a method replays. Each returns one line naming the option and the fix, or
''; the trainer raises it."""
from __future__ import annotations

from typing import Optional, Sequence

import torch


def trl_options_refused(args, method: str) -> str:
    """One line naming the first of TRL's own advantage options (``GRPOConfig``) set to a
    value the method's advantages would silently replace, with the way to the same end; ''
    when none is."""
    if args is None:
        return ""
    scale = {True: "group", False: "none"}.get(args.scale_rewards, args.scale_rewards)
    if scale != "group":
        return (f"GRPOConfig(scale_rewards={args.scale_rewards!r}) scales TRL's own advantages, "
                f"which method {method!r} replaces with its own normalisation "
                "(docs/methods.md); leave it at 'group', or train a method that scales as you "
                "want (a plugin: docs/extending.md)")
    if args.multi_objective_aggregation != "sum_then_normalize":
        return (f"GRPOConfig(multi_objective_aggregation={args.multi_objective_aggregation!r}) "
                f"is TRL's own aggregation of the rewards, which method {method!r} replaces; "
                "leave it at its default and choose the aggregation by the method "
                "(`python -m harness list` names them)")
    weights = args.reward_weights
    if weights is not None and any(float(w) != 1.0 for w in weights):
        return (f"GRPOConfig(reward_weights={list(weights)}) weights TRL's own aggregation, which "
                f"method {method!r} replaces; leave it unset, or train a method that weights "
                "the rewards (`python -m harness list`; a plugin: docs/extending.md)")
    return ""


def unmatched_rewards(method, options, names: Sequence[str], examples,
                      rewards: Optional[torch.Tensor] = None) -> str:
    """One line when the method's passes build contexts from verifier information and a reward
    function is named as no reward the examples carry it for (its replay would change nothing
    and its credit would silently be uniform); '' otherwise. Without ``rewards`` (at
    construction): when no name is any example's; with ``rewards`` ([n, K], NaN where absent;
    row i scores ``examples[i]``): when a reward scored a row whose example has no verifier
    information under its name."""
    from methods.contexts import known_rewards

    if not method.verifier_info_readers(options):
        return ""
    known = [known_rewards(e) for e in examples]
    every = frozenset().union(*known)
    if rewards is None:
        unknown = [n for n in names if n not in every]
        if known and len(unknown) < len(names):
            return ""
    else:
        scored = ~torch.isnan(rewards.float())
        unknown = [n for k, n in enumerate(names)
                   if any(bool(scored[i, k]) and n not in known[i] for i in range(len(known)))]
        if not unknown:
            return ""
    return (f"reward functions {unknown} are named as no reward the examples carry verifier "
            f"information for ({', '.join(sorted(every)) or 'none'}): the method's replay "
            "would change nothing for them; name each reward function as its reward "
            "(reward_functions(task, examples) does)")


def initial_copy_refused(name: str, method, options, zero_stage: int) -> str:
    """One line when the method reads the policy as it was before training (a whole copy the
    adapter keeps) and DeepSpeed ZeRO-3 leaves each process a shard of it; '' otherwise."""
    if "initial" not in method.models(options) or zero_stage != 3:
        return ""
    return (f"method {name!r} reads the policy as it was before training, a copy this "
            "integration keeps whole, and under DeepSpeed ZeRO-3 each process holds only a "
            "shard of it: use ZeRO stage 2 or less with this method")
