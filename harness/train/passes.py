"""Stage 3: the method's extra passes (outputs gathered into ``RolloutBatch.passes`` by pass
name) and its loss terms' no-gradient preparations, on the policy that sampled the responses."""
from __future__ import annotations

import time
from typing import Any, Mapping

import torch

from harness import engine as eng
from harness.console.progress import stage
from harness.replay import PolicyContext
from harness.train.sample import Sampled
from methods.stats import within_group_signal


def context(models: Mapping[str, Any], tokenizer, sampled: Sampled, task, temperature: float,
            batch_size: int, state: dict | None = None) -> PolicyContext:
    """What a pass or loss term may ask for, over this worker's responses; ``state``: the
    passes' state the run keeps between steps (methods.PassContext.state)."""
    ro = sampled.rollout
    rewards = torch.tensor(sampled.rewards, dtype=torch.float32).reshape(len(sampled.rows), -1)
    group = torch.tensor(sampled.groups)
    return PolicyContext(
        models=models, tokenizer=tokenizer, examples=sampled.rows, texts=ro.texts,
        response_ids=ro.response_ids, response_mask=ro.response_mask, rewards=rewards,
        reward_names=tuple(rw.name for rw in task.rewards), group=group,
        reward_bounds=tuple((rw.lo, rw.hi) for rw in task.rewards), temperature=temperature,
        batch_size=batch_size, spans=task.spans,
        # whole groups are on this worker, so their signal is known here
        signal=within_group_signal(rewards, group),
        state=state if state is not None else {})


def gather_rows(local: torch.Tensor, n_global: int, width: int) -> torch.Tensor:
    """Every worker's [n_local, C, T_local] pass output -> [N_global, C, width], in rank
    order."""
    parts = eng.all_gather_objects(local)
    out = torch.zeros(n_global, local.shape[1], width)
    row = 0
    for part in parts:
        t = min(width, part.shape[2])
        out[row:row + part.shape[0], :, :t] = part[:, :, :t]
        row += part.shape[0]
    return out


def run_passes(method, options, ctx: PolicyContext, sampled: Sampled
               ) -> tuple[dict[str, torch.Tensor], dict]:
    """{pass name: [N, C, width]} and the passes' metrics (their diagnostics, summarised over
    every worker's responses, and their time)."""
    out, metrics = {}, {}
    if not method.passes:
        return out, metrics
    t0 = time.perf_counter()
    for p in method.passes:
        stage(f"pass {p.name}")
        with torch.no_grad():  # a pass never trains: its outputs carry no graph
            local = p.run(ctx, options)
        out[p.name] = gather_rows(local, len(sampled.all_lengths), sampled.width)
        if p.diagnose is not None:
            records = p.diagnose(ctx, options, local)
            gathered = [r for part in eng.all_gather_objects(records) for r in part]
            if p.summarise is not None and gathered:
                metrics.update(p.summarise(gathered))
    metrics["time/replay"] = time.perf_counter() - t0
    return out, metrics


def prepare_terms(method, options, ctx: PolicyContext) -> dict[str, Any]:
    """{loss term name: its prepared per-row data} (e.g. a teacher's hidden states)."""
    with torch.no_grad():
        return {term.name: term.prepare(ctx, options) for term in method.loss_terms}
