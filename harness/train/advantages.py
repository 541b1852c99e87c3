"""Stage 4: the step's RolloutBatch (every worker's rows), the method's token advantages, and
this worker's rows of them."""
from __future__ import annotations

import torch

from harness.train.sample import Sampled
from methods import RolloutBatch, method_advantages
from methods.stats import groups_with_signal


def rollout_batch(task, sampled: Sampled, passes: dict, step: int, total_steps: int
                  ) -> RolloutBatch:
    return RolloutBatch(
        rewards=sampled.all_rewards,
        reward_names=tuple(rw.name for rw in task.rewards),
        reward_bounds=tuple((rw.lo, rw.hi) for rw in task.rewards),
        group=sampled.all_groups, response_mask=sampled.mask, passes=passes, step=step,
        total_steps=total_steps)


def reward_metrics(task, batch: RolloutBatch) -> dict:
    """Each reward's mean, the format rate (share of responses at a ``format`` reward's top)
    and the share of prompt groups with any signal."""
    out = {}
    for k, rw in enumerate(task.rewards):
        col = batch.rewards[:, k]
        col = col[~torch.isnan(col)]
        out[f"reward/{rw.name}"] = float(col.mean()) if col.numel() else float("nan")
        if rw.name == "format":
            out["format_rate"] = float((col == rw.hi).float().mean()) if col.numel() else 0.0
    out["groups_with_signal"] = groups_with_signal(batch.rewards, batch.group)
    return out


def local_advantages(method, options, batch: RolloutBatch, sampled: Sampled
                     ) -> tuple[torch.Tensor, dict]:
    """[n_local, T_local] this worker's token advantages (float32) and the method's
    metrics."""
    out = method_advantages(method, batch, options)
    t_local = sampled.rollout.response_ids.shape[1]
    adv = out.scores[sampled.offset:sampled.offset + len(sampled.rewards)]
    adv = torch.nn.functional.pad(adv, (0, max(0, t_local - adv.shape[1])))[:, :t_local]
    return adv.to(torch.float32), out.metrics
