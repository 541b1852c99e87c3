"""The supervised warm start, on the same DeepSpeed engine as RL.

``sft_worker(config)`` runs on every rank (a Ray Train worker, or the single test process):
token-mean cross-entropy on the demonstrations' response tokens only, ``warm_start_steps``
optimizer steps of ``warm_start_batch`` demonstrations (split over ranks and micro-batches so the
gradient is the exact token mean of the whole batch), then rank 0 saves a plain HF folder with
the tokenizer and chat template, atomically. Optionally it then measures what RL's first step
will see: the format rate and the share of prompt groups whose rewards differ.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

from harness import engine as eng
from harness import orphan
from harness.config import apply_overrides
from harness.data import PromptSampler
from harness.loss import token_logprobs
from harness.models import load_model, load_tokenizer
from harness.rollouts import HFRollout, with_response
from harness.warmstart import cache
from harness.warmstart.data import batch, content_hash, encode


def sft_loss(model, p_ids, p_mask, t_ids, t_mask, total_tokens: float
             ) -> tuple[torch.Tensor, int]:
    """Sum of the target tokens' negative log-likelihood divided by ``total_tokens`` (the
    optimizer batch's target-token count, so micro-batches add up to the batch's token mean).
    Demonstrations have different prompts, so nothing is shared: one row each (packing them
    into one row was slower here, since attention grows with the square of the row).

    Shapes: prompts [B, P], targets [B, T]. Returns (loss, target tokens in this micro-batch)."""
    device = next(model.parameters()).device
    t = t_ids.shape[1]
    ids, attn, pos = with_response(p_ids, p_mask, t_ids, t_mask)
    out = model(input_ids=ids.to(device), attention_mask=attn.to(device),
                position_ids=pos.to(device), logits_to_keep=t + 1, use_cache=False)
    logp = token_logprobs(out.logits[:, :-1], t_ids.to(device))
    mask = t_mask.to(device).bool()
    nll = -torch.where(mask, logp, torch.zeros_like(logp)).sum()
    return nll / total_tokens, int(mask.sum())


def signal_probe(run, rollout: HFRollout, examples, seed: int) -> dict:
    """What RL's first step will see on the training set: format rate and the share of groups
    with a non-zero advantage for some reward (G samples of each example, sampled with
    ``seed``)."""
    from methods.stats import groups_with_signal

    task, r = run.task, run.config.rollout
    ro = rollout.generate(examples, r.group_size, r.max_response_tokens, r.temperature, r.top_p,
                          r.top_k, seed=seed)
    rewards = torch.tensor(task.compute_rewards([examples[i] for i in ro.example_index],
                                                ro.texts), dtype=torch.float32)
    names = [rw.name for rw in task.rewards]
    out = {"probe_prompts": len(examples), "probe_group_size": r.group_size,
           "groups_with_signal": groups_with_signal(rewards, torch.tensor(ro.example_index))}
    for k, rw in enumerate(task.rewards):
        col = rewards[:, k][~torch.isnan(rewards[:, k])]
        out[f"reward/{rw.name}"] = float(col.mean()) if col.numel() else float("nan")
        if rw.name == "format":
            out["format_rate"] = float((col == rw.hi).float().mean()) if col.numel() else 0.0
    out["reward_names"] = names
    return out


def top_layers(count: int):
    """A ``trainable`` rule for build_engine: only the top ``count`` transformer blocks and the
    final norm learn (0: everything). Backward then stops at the lowest trained block, which
    halves a warm-start step on this CPU (10 of SmolLM2's 30 blocks: 12 s instead of 25 s for
    4 x 560 tokens); the embeddings, tied to the LM head, stay as they are."""
    if count <= 0:
        return None

    def rule(model) -> None:
        body = model.base_model
        layers, norm = getattr(body, "layers", None), getattr(body, "norm", None)
        if layers is None or norm is None:
            raise ValueError(f"--warm-start-layers {count} needs a model whose base_model has "
                             "`layers` and `norm` (Llama, Qwen2, ...); pass "
                             "--warm-start-layers 0 to train every parameter")
        if count > len(layers):
            raise ValueError(f"--warm-start-layers {count}: the model has {len(layers)} blocks")
        for p in model.parameters():
            p.requires_grad_(False)
        for module in (*layers[-count:], norm):
            for p in module.parameters():
                p.requires_grad_(True)
    return rule


def training_schedule(n_pairs: int, w) -> list[list[int]]:
    """The pair indices of every warm-start step (seeded epochs over the pairs)."""
    sampler = PromptSampler(n_pairs, w.warm_start_seed)
    return [sampler.next(w.warm_start_batch) for _ in range(w.warm_start_steps)]


def probe_examples(demos, pair_source: list[int], schedule: list[list[int]], count: int) -> list:
    """The first ``count`` demonstrations' prompts that no step of ``schedule`` trains on (the
    first ones overall when a small set is used up entirely)."""
    used = {pair_source[i] for chosen in schedule for i in chosen}
    unseen = [d.example for i, d in enumerate(demos) if i not in used][:count]
    return unseen or [d.example for d in demos[:count]]


def sft_worker(run, probe_prompts: int = 0, reporter_factory=None,
               probe_steps: tuple[int, ...] = ()) -> Path | None:
    """Train the warm start on this rank; rank 0 saves the folder and returns its path.

    ``probe_prompts``: after the last step (and after each step in ``probe_steps``; 0 = the
    base model) sample G responses to that many training prompts the warm start did not train
    on, and store the format rate and the share of groups with signal in the folder's record.
    ``reporter_factory(label, steps)``: rank 0's progress reporter (harness.console)."""
    start = time.perf_counter()
    config = run.config
    w = config.warmstart
    rank, world = eng.rank(), eng.world_size()
    from harness.checks import worker_problems
    from harness.preflight import raise_if

    raise_if(worker_problems(run, world))
    demos = run.demonstrations
    data_hash = content_hash(demos)
    target = run.warm_start_folder
    base = config.model.model
    tokenizer = load_tokenizer(base, config.model.allow_download)
    pairs, pair_source = encode(tokenizer, demos, config.rollout.max_prompt_tokens)
    torch.manual_seed(w.warm_start_seed)
    device = eng.device(config.training.use_gpu)
    # the plain copy (for saving and the probe) is built before the ZeRO-3 scope
    plain = load_model(base, seed=w.warm_start_seed, allow_download=config.model.allow_download,
                       dtype=config.model.dtype).to(device)
    local = w.warm_start_batch // world
    engine, ds = eng.build_engine(apply_overrides(config, {"lr": w.warm_start_lr,
                                                           "seed": w.warm_start_seed}), local,
                                  trainable=top_layers(w.warm_start_layers))
    engine.train()
    mb, scale = ds["train_micro_batch_size_per_gpu"], ds["gradient_accumulation_steps"] * world
    # the whole schedule up front, so every probe uses the same prompts, none of them trained on
    schedule = training_schedule(len(pairs), w)
    unseen = probe_examples(demos, pair_source, schedule, probe_prompts)
    history, probes = [], []
    rollout = HFRollout(plain, tokenizer, device)

    def probe(step: int) -> None:
        with eng.gathered_parameters(engine.module) as named:
            if rank == 0:
                rollout.load_weights(named)
        if rank != 0:
            return
        if reporter is not None:
            reporter.send(("start", f"warm start probe after step {step}",
                           f"{probe_prompts} prompts x G={config.rollout.group_size}"))
        probes.append({"step": step, **signal_probe(run, rollout, unseen, w.warm_start_seed)})
        if reporter is not None and step < w.warm_start_steps:
            reporter.send(("start", "warm start", f"step {step}/{w.warm_start_steps}"))

    reporter = None
    if reporter_factory is not None and rank == 0:
        reporter = reporter_factory("warm start", w.warm_start_steps)
        reporter.send(("start", "warm start", f"step 0/{w.warm_start_steps} "
                                              f"({len(pairs)} demonstrations)"))
    if probe_prompts and 0 in probe_steps:
        probe(0)
    for step in range(w.warm_start_steps):
        t0 = time.perf_counter()
        chosen = schedule[step]
        mine = [pairs[i] for i in chosen[rank::world]]
        tokens = sum(eng.all_gather_objects(sum(len(t) for _, t in mine)))
        loss_sum = 0.0
        for s in range(0, local, mb):
            loss, _ = sft_loss(engine, *batch(mine[s:s + mb], tokenizer.pad_token_id),
                               total_tokens=tokens / scale)
            engine.backward(loss)
            engine.step()
            loss_sum += float(loss.detach()) / scale
        record = {"step": step + 1, "loss": sum(eng.all_gather_objects(loss_sum)),
                  "tokens": tokens, "time": time.perf_counter() - t0}
        history.append(record)
        if reporter is not None:
            reporter.sft_step(record)
        if probe_prompts and step + 1 in probe_steps and step + 1 < w.warm_start_steps:
            probe(step + 1)
    seconds = time.perf_counter() - start
    if probe_prompts:
        probe(w.warm_start_steps)  # also syncs the final weights into the plain copy
    else:
        with eng.gathered_parameters(engine.module) as named:
            if rank == 0:
                rollout.load_weights(named)
    result = None
    if rank == 0:
        from harness import provenance

        # the code that trained it: a cache reused by other code is told apart (reproduce
        # --recheck trains its own)
        info = {"key": cache.key_fields(run, data_hash), "history": history,
                "demonstrations": len(pairs), "seconds": seconds,
                "provenance": provenance.current(plugins=config.plugins)}
        if probes:
            info["probes"] = probes
        result = save(plain, tokenizer, target, info)
    if reporter is not None:
        reporter.close()
    return result


def save(model, tokenizer, target: Path, info: dict) -> Path:
    """Write the folder beside its final place, then rename it there; the marker last."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        orphan.check()  # a worker whose job was killed does not replace the folder
        if target.exists():  # an incomplete earlier attempt (no marker): replace it
            shutil.rmtree(target)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    (target / cache.MARKER).write_text(json.dumps(info, indent=1, sort_keys=True) + "\n")
    return target
