"""The RL loop that runs on every worker: rollout -> rewards -> advantages -> PPO-clip update.

``train_worker(config)`` is the whole life of one seed on one rank: build the engine, train,
evaluate, and (rank 0) store the result. Ray Train calls it on each worker (harness/backend.py);
unit tests call it in-process on one rank.
"""
from __future__ import annotations

import copy
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch

import methods
from harness import checks
from harness import engine as eng
from harness.config import RunConfig
from harness.data import PromptSampler, get_task, load_eval, load_train
from harness.diagnostics import batch_records, summarise
from harness.loss import aggregate, generalised_jsd, kl_penalty, ppo_clip_loss, token_logprobs
from harness.models import load_model, load_tokenizer
from harness.plugins import load_plugins
from harness.replay import contrast as contrast_fn
from harness.replay import known_rewards, replay_messages, response_hidden
from harness.replay import relevance as relevance_fn
from harness.warmstart.cache import policy_source
from harness.results import atomic_write_json, atomic_write_jsonl, make_record, result_path
from harness.rollouts import HFRollout, Rollout, copy_weights, with_response
from methods import RolloutBatch
from methods.stats import groups_with_signal
from tasks.base import Example, Task


def sequence_logprobs(model, ro: Rollout, rows: list[int], temperature: float,
                      return_logits: bool = False, pack: bool = False, pad_id: int = 0):
    """[len(rows), T] log-probs of the sampled response tokens under ``model`` (and, if asked,
    the [len(rows), T, V] logits that predict them). ``pack``: rows that answer the same prompt
    share one forward of it (harness.packed: same values, fewer FLOPs)."""
    r_ids, r_mask = ro.response_ids[rows], ro.response_mask[rows]
    device = next(model.parameters()).device
    t = r_ids.shape[1]
    if pack:
        from harness.packed import pack as pack_rows
        from harness.packed import packed_forward

        dtype = next(model.parameters()).dtype
        packed = pack_rows(ro.prompt_ids[rows], ro.prompt_mask[rows], r_ids, r_mask,
                           [ro.example_index[i] for i in rows], pad_id,
                           dtype if dtype.is_floating_point else torch.float32)
        logits = packed_forward(model, packed, t)
    else:
        p_ids, p_mask = ro.prompt_ids[rows], ro.prompt_mask[rows]
        keep = p_mask.any(dim=0).nonzero()  # drop left-padding columns no row of this slice needs
        start = int(keep[0]) if len(keep) else 0
        p_ids, p_mask = p_ids[:, start:], p_mask[:, start:]
        ids, attn, pos = with_response(p_ids, p_mask, r_ids, r_mask)
        out = model(input_ids=ids.to(device), attention_mask=attn.to(device),
                    position_ids=pos.to(device), logits_to_keep=t + 1, use_cache=False)
        logits = out.logits[:, :-1]  # logits at position i predict token i+1
    logp = token_logprobs(logits, r_ids.to(device), temperature).cpu()
    return (logp, logits) if return_logits else logp


def grad_norm(module) -> float:
    """L2 norm of the accumulated gradients (before clipping), for engines without ZeRO,
    whose ``get_global_grad_norm`` is None."""
    norms = [p.grad.detach().float().norm() for p in module.parameters() if p.grad is not None]
    return float(torch.stack(norms).norm()) if norms else 0.0


@dataclass
class StepData:
    rollout: Rollout
    advantages: torch.Tensor  # [n_local, T]
    old_logp: torch.Tensor | None
    ref_logp: torch.Tensor | None
    teacher_hidden: torch.Tensor | None = None  # [n_local, T, H] OPSD teacher states


class Trainer:
    def __init__(self, config: RunConfig) -> None:
        load_plugins(config.plugins)
        self.config = config
        self.rank, self.world = eng.rank(), eng.world_size()
        self.task: Task = get_task(config)
        self.method = methods.get(config.method.method)
        self.options = config.method.options()
        t = config.training
        # the same checks as before Ray started, now with the process group's actual size
        # (an in-process Trainer was never validated)
        problems = checks.settings_problems(config, world=self.world, on_worker=True)
        if problems:
            raise ValueError("settings that cannot work:\n  - " + "\n  - ".join(problems))
        self.local_n = checks.local_responses(config, self.world)
        torch.manual_seed(config.seed)
        source = policy_source(config)  # the base model, or its cached warm start
        self.tokenizer = load_tokenizer(source, config.model.allow_download)
        # the plain copy of the policy (HF rollouts; OPSD's current-policy teacher) is built
        # before the ZeRO-3 scope so it is never partitioned
        device = eng.device(t.use_gpu)
        self.cuda = t.use_gpu and torch.cuda.is_available()

        def plain_copy():
            return load_model(source, seed=config.seed, allow_download=config.model.allow_download,
                              dtype=config.model.dtype).to(device).eval()

        vllm = config.rollout.engine == "vllm"
        needs_plain = not vllm or ("teacher" in self.method.needs
                                   and self.options.opsd_teacher != "initial")
        self.plain = plain_copy() if needs_plain else None
        if vllm:
            from harness.rollouts.vllm import VLLMRollout

            r = config.rollout
            self.rollout = VLLMRollout.build(
                source, self.tokenizer, config.seed, config.model.dtype,
                r.max_prompt_tokens + max(r.max_response_tokens, r.eval_max_response_tokens),
                r.vllm_gpu_memory, r.vllm_sync_bucket_mb, sleep_level=r.vllm_sleep_level)
        else:
            self.rollout = HFRollout(self.plain, self.tokenizer, device)
        self.engine, self.ds_config = eng.build_engine(
            config, self.local_n // t.ppo_mini_batches, source)
        self.engine.train()
        self.train_examples = self._usable(load_train(config))
        self.sampler = PromptSampler(len(self.train_examples), config.seed)
        # vLLM: a fixed token sequence the policy and the engine must score alike after syncs
        self._probe = self.rollout.encode(self.train_examples[:1])[0][:256] if vllm else None
        self.last_sync_gap = float("nan")  # the latest vLLM log-prob check's mean gap
        self._synced = 0  # vLLM weight syncs so far
        self.sync_weights()  # rollouts must start from exactly the engine's weights
        # the initial policy (KL reference, OPSD's fixed teacher): copied after the sync
        needs_initial = t.kl_coef > 0 or ("teacher" in self.method.needs
                                          and self.options.opsd_teacher == "initial")
        self.initial_model = None
        if needs_initial:
            self.initial_model = copy.deepcopy(self.plain).eval() if self.plain is not None \
                else plain_copy()

    def _usable(self, examples: list[Example]) -> list[Example]:
        ids = self.rollout.encode(examples)
        keep = [ex for ex, i in zip(examples, ids)
                if len(i) <= self.config.rollout.max_prompt_tokens]
        if not keep:
            raise ValueError("every training prompt is longer than --max-prompt-tokens "
                             f"({self.config.rollout.max_prompt_tokens})")
        return keep

    def sync_weights(self) -> float:
        """Push the policy's gathered weights to the rollout engine (and the plain copy, if
        any); the L2 norm of the plain copy's change (the update's norm), NaN without one."""
        norm = float("nan")
        if self.plain is not None:
            with eng.gathered_parameters(self.engine.module) as named:
                norm = copy_weights(self.plain, named)
        if self.config.rollout.engine != "vllm":
            return norm
        from harness.rollouts import vllm

        self.rollout.begin_sync()
        for group in vllm.buckets(self.engine.module.named_parameters(),
                                  self.rollout.sync_bucket_bytes):
            with eng.gathered_parameters(self.engine.module, group) as named:
                self.rollout.load_weights(named)
        self.rollout.end_sync()
        self._synced += 1
        every = self.config.rollout.vllm_check_every
        if every and (self._synced - 1) % every == 0:
            self.last_sync_gap = vllm.check_gap(
                self.policy_probe_logprobs(), self.rollout.prompt_logprobs(self._probe),
                self.config.rollout.vllm_sync_tolerance, f"after sync {self._synced}")
        return norm

    @torch.no_grad()
    def policy_probe_logprobs(self) -> torch.Tensor:
        """[len(probe) - 1] the training engine's log-probs of the probe's tokens (temperature
        1, as vLLM's prompt log-probs); a forward of every rank together under ZeRO-3."""
        ids = torch.tensor([self._probe], device=eng.device(self.config.training.use_gpu))
        logits = self.engine.module(input_ids=ids).logits[0, :-1].float()
        return torch.log_softmax(logits, dim=-1).gather(1, ids[0, 1:, None])[:, 0].cpu()

    # --- one step -------------------------------------------------------------------------
    def collect(self, step: int) -> tuple[StepData, dict]:
        cfg = self.config
        r = cfg.rollout
        global_idx = self.sampler.next(r.prompts_per_step)
        mine = list(range(self.rank, r.prompts_per_step, self.world))
        examples = [self.train_examples[global_idx[j]] for j in mine]
        t0 = time.perf_counter()
        ro = self.rollout.generate(examples, r.group_size, r.max_response_tokens,
                                   r.temperature, r.top_p, r.top_k,
                                   seed=cfg.seed * 1_000_003 + step * 1009 + self.rank)
        t_gen = time.perf_counter() - t0
        # the device's use while the rollout engine is awake (vLLM's KV cache included)
        gpu_generating = eng.gpu_used_gb() if self.cuda else None
        if hasattr(self.rollout, "sleep"):  # vLLM frees the GPU until the next sync
            self.rollout.sleep()
        rewards = self.task.compute_rewards([examples[i] for i in ro.example_index], ro.texts)
        t_rew = time.perf_counter() - t0 - t_gen
        lengths = ro.response_mask.sum(dim=1).tolist()
        groups = [mine[i] for i in ro.example_index]
        parts = eng.all_gather_objects((rewards, lengths, groups))
        offset = sum(len(p[0]) for p in parts[:self.rank])
        all_rewards = torch.tensor([x for p in parts for x in p[0]], dtype=torch.float32)
        all_lengths = torch.tensor([x for p in parts for x in p[1]])
        width = int(all_lengths.max())
        mask = (torch.arange(width)[None, :] < all_lengths[:, None]).to(torch.long)
        relevance = contrast = None
        metrics_extra: dict = {}
        t_rep = time.perf_counter()
        if "replay" in self.method.needs:
            local = relevance_fn(self.engine, self.tokenizer, self._row_examples(examples, ro),
                                 ro.response_ids, ro.response_mask,
                                 [rw.name for rw in self.task.rewards], self.options.replay,
                                 cfg.rollout.temperature, self.options.replay_chunk,
                                 self.ds_config["train_micro_batch_size_per_gpu"])
            relevance = self._gather_rows(local, len(all_lengths), width)
            if self.task.spans is not None:
                records = batch_records(self.tokenizer, self._row_examples(examples, ro),
                                        ro.response_ids, ro.response_mask, local,
                                        [rw.name for rw in self.task.rewards], self.task.spans,
                                        rewards)
                metrics_extra.update(summarise(
                    [r for part in eng.all_gather_objects(records) for r in part]))
        if "counterfactual" in self.method.needs:
            local = contrast_fn(self.engine, self.tokenizer, self._row_examples(examples, ro),
                                ro.response_ids, ro.response_mask, cfg.rollout.temperature,
                                self.options.replay_chunk,
                                self.ds_config["train_micro_batch_size_per_gpu"])
            contrast = self._gather_rows(local[:, None, :], len(all_lengths), width)[:, 0]
        if relevance is not None or contrast is not None:
            metrics_extra["time/replay"] = time.perf_counter() - t_rep
        batch = RolloutBatch(
            rewards=all_rewards.reshape(len(all_lengths), len(self.task.rewards)),
            reward_names=tuple(rw.name for rw in self.task.rewards),
            reward_bounds=tuple((rw.lo, rw.hi) for rw in self.task.rewards),
            group=torch.tensor([x for p in parts for x in p[2]]),
            response_mask=mask, relevance=relevance, contrast=contrast, step=step,
            total_steps=cfg.training.steps,
        )
        out = self.method.compute(batch, self.options)
        t_local = ro.response_ids.shape[1]
        adv = out.scores[offset:offset + len(rewards)]
        adv = torch.nn.functional.pad(adv, (0, max(0, t_local - adv.shape[1])))[:, :t_local]
        metrics = self._reward_metrics(batch)
        metrics.update(out.metrics)
        metrics.update(metrics_extra)
        if gpu_generating is not None:
            metrics["gpu/used_generating_gb"] = gpu_generating
        metrics.update({"time/generate": t_gen, "time/rewards": t_rew,
                        "response_length": float(all_lengths.float().mean())})
        old = ref = None
        t_lp = time.perf_counter()
        with torch.no_grad():
            rows = list(range(len(rewards)))
            if cfg.training.ppo_epochs > 1 or cfg.training.ppo_mini_batches > 1:
                old = self._logprobs(self.engine, ro, rows)
            if self.config.training.kl_coef > 0:
                ref = self._logprobs(self.initial_model, ro, rows)
        teacher = None
        if "teacher" in self.method.needs:
            teacher = response_hidden(self.teacher_model, self.tokenizer,
                                      [replay_messages(e, known_rewards(e))
                                       for e in self._row_examples(examples, ro)],
                                      ro.response_ids, ro.response_mask)
        metrics["time/logprobs"] = time.perf_counter() - t_lp  # old, reference, teacher passes
        return StepData(ro, adv.to(torch.float32), old, ref, teacher), metrics

    @property
    def teacher_model(self):
        """OPSD's teacher: the fixed initial policy, or the rollout copy (the current policy,
        which the update does not touch until its last optimizer step)."""
        return self.initial_model if self.options.opsd_teacher == "initial" else self.plain

    @staticmethod
    def _row_examples(examples: list[Example], ro: Rollout) -> list[Example]:
        return [examples[i] for i in ro.example_index]

    @staticmethod
    def _gather_rows(local: torch.Tensor, n_global: int, width: int) -> torch.Tensor:
        """Every rank's [n_local, C, T_local] replay result -> [N_global, C, width], in rank
        order. Replays run on each rank with the policy that sampled its responses (the engine,
        before its update)."""
        parts = eng.all_gather_objects(local)
        out = torch.zeros(n_global, local.shape[1], width)
        row = 0
        for part in parts:
            t = min(width, part.shape[2])
            out[row:row + part.shape[0], :, :t] = part[:, :, :t]
            row += part.shape[0]
        return out

    def _logprobs(self, model, ro: Rollout, rows: list[int]) -> torch.Tensor:
        mb = self.ds_config["train_micro_batch_size_per_gpu"]
        return torch.cat([sequence_logprobs(model, ro, rows[s:s + mb],
                                            self.config.rollout.temperature,
                                            pack=self.config.training.pack_prompts,
                                            pad_id=self.tokenizer.pad_token_id)
                          for s in range(0, len(rows), mb)])

    def _reward_metrics(self, batch: RolloutBatch) -> dict:
        out = {}
        for k, rw in enumerate(self.task.rewards):
            col = batch.rewards[:, k]
            col = col[~torch.isnan(col)]
            out[f"reward/{rw.name}"] = float(col.mean()) if col.numel() else float("nan")
            if rw.name == "format":
                out["format_rate"] = float((col == rw.hi).float().mean()) if col.numel() else 0.0
        out["groups_with_signal"] = groups_with_signal(batch.rewards, batch.group)
        return out

    def update(self, data: StepData) -> dict:
        """PPO epochs x mini-batches of optimizer steps over this step's rollouts.

        DeepSpeed averages micro-batch losses over gradient-accumulation steps and ranks. For
        ``token-mean`` each micro-batch's token sum is divided by the valid-token count of the
        whole mini-batch (all ranks) and multiplied back by steps x ranks, so the gradient is
        the exact token mean however the mini-batch is split. The sequence modes divide by the
        configured micro-batch size, which makes them exact too. Logged losses are
        per-micro-batch token means.

        When the loss is the policy gradient alone (no KL, no distillation), a response whose
        advantage is 0 on every token adds exactly nothing to the gradient, so it gets no
        forward or backward: the responses with signal are packed into as few micro-batches as
        every rank needs, and the optimizer steps after the last one. A mini-batch without any
        signal on any rank takes no optimizer step (``skipped_updates``): with a zero gradient
        AdamW would only replay its momentum."""
        t = self.config.training
        mb = self.ds_config["train_micro_batch_size_per_gpu"]
        scale = self.ds_config["gradient_accumulation_steps"] * self.world
        n = data.advantages.shape[0]
        mini = n // t.ppo_mini_batches
        mask_all = data.rollout.response_mask
        agg = dict(max_len=self.config.rollout.max_response_tokens)
        pg_only = data.ref_logp is None and data.teacher_hidden is None
        stats: dict[str, list[float]] = {}
        skipped = stepped = forwarded = 0
        plain_norm = None
        clock = {"forward": 0.0, "backward": 0.0, "optimizer": 0.0}
        for _ in range(t.ppo_epochs):
            for m0 in range(0, n, mini):
                if t.loss_agg == "token-mean":
                    local = int(mask_all[m0:m0 + mini].sum())
                    agg["total_tokens"] = max(1, sum(eng.all_gather_objects(local))) / scale
                rows_all = list(range(m0, m0 + mini))
                if pg_only:
                    live = (data.advantages[m0:m0 + mini] * mask_all[m0:m0 + mini]).abs() \
                        .sum(dim=1) > 0
                    active = [r for r, a in zip(rows_all, live.tolist()) if a]
                    # every rank runs the same number of micro-batches (ZeRO-3 gathers
                    # parameters collectively in each forward); a rank with fewer responses
                    # with signal fills up with zero-advantage ones, which add nothing
                    need = max(eng.all_gather_objects(-(-len(active) // mb)))
                    rest = [r for r in rows_all if r not in set(active)]
                    order = (active + rest)[:need * mb]
                else:
                    order = rows_all
                chunks = [order[s:s + mb] for s in range(0, len(order), mb)]
                if not chunks:
                    skipped += 1
                    continue
                stepped += 1
                for c, rows in enumerate(chunks):
                    forwarded += len(rows)
                    t0 = time.perf_counter()
                    logp, logits = sequence_logprobs(
                        self.engine, data.rollout, rows, self.config.rollout.temperature, True,
                        pack=t.pack_prompts, pad_id=self.tokenizer.pad_token_id)
                    old = data.old_logp[rows] if data.old_logp is not None else logp.detach()
                    mask = mask_all[rows]
                    loss, info = ppo_clip_loss(logp, old, data.advantages[rows], mask,
                                               t.clip_eps_low, t.clip_eps_high, t.loss_agg,
                                               **agg)
                    if t.loss_agg != "token-mean":  # a mean over mb rows, however many ran
                        loss = loss * len(rows) / mb
                    if data.ref_logp is not None:
                        kl = kl_penalty(logp, data.ref_logp[rows], t.kl_type)
                        loss = loss + t.kl_coef * aggregate(kl, mask, t.loss_agg, **agg)
                        info["kl"] = float(aggregate(kl.detach(), mask, "token-mean"))
                    if data.teacher_hidden is not None:
                        o = self.options
                        gjsd = generalised_jsd(logits, data.teacher_hidden[rows],
                                               self.teacher_model.get_output_embeddings(),
                                               self.config.rollout.temperature, o.opsd_beta,
                                               o.replay_chunk).cpu()
                        loss = loss + o.opsd_coef * aggregate(gjsd, mask, t.loss_agg, **agg)
                        info["opsd"] = float(aggregate(gjsd.detach(), mask, "token-mean"))
                    # the optimizer steps after this mini-batch's last micro-batch, however
                    # many ran (DeepSpeed's own count assumes all of them)
                    self.engine.set_gradient_accumulation_boundary(c == len(chunks) - 1)
                    t1 = time.perf_counter()
                    self.engine.backward(loss)
                    t2 = time.perf_counter()
                    if c == len(chunks) - 1 and self.ds_config["zero_optimization"]["stage"] == 0:
                        plain_norm = grad_norm(self.engine.module)  # DeepSpeed reports none
                    self.engine.step()
                    t3 = time.perf_counter()
                    clock["forward"] += t1 - t0
                    clock["backward"] += t2 - t1
                    clock["optimizer"] += t3 - t2
                    info["loss"] = (info["pg_loss"] + t.kl_coef * info.get("kl", 0.0)
                                    + self.options.opsd_coef * info.get("opsd", 0.0))
                    for key, v in info.items():
                        stats.setdefault(key, []).append(v)
        out = {k: sum(v) / len(v) for k, v in stats.items()}
        if not stats:  # nothing ran: every advantage was 0, and so is the policy-gradient loss
            out.update(loss=0.0, pg_loss=0.0)
        out["skipped_updates"] = float(skipped)
        out["update_rows"] = float(forwarded)
        norm = (self.engine.get_global_grad_norm() if plain_norm is None else plain_norm) \
            if stepped else None
        if norm is not None:
            out["grad_norm"] = float(norm)
        t0 = time.perf_counter()
        out["param_update_norm"] = self.sync_weights()  # the next rollout sees the new policy
        out.update({f"time/{k}": v for k, v in clock.items()})
        out["time/sync"] = time.perf_counter() - t0
        return out

    def train(self, log_path: Path | None, progress=None, checkpointer=None) -> list[dict]:
        """Run every step; per-step metrics are appended to ``log_path`` as they come.

        ``checkpointer`` (harness.checkpoints.store.RayCheckpointer): resume from its latest
        checkpoint if there is one, and save one every ``save_every`` steps."""
        from harness.checkpoints import state

        history: list[dict] = []
        start = 0
        every = self.config.training.save_every
        if checkpointer is not None:
            with checkpointer.latest() as folder:
                if folder is not None:
                    start, history = state.load(folder, self)
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            # a fresh seed starts its log afresh; a resumed one keeps exactly the steps of its
            # checkpoint (rows a killed run wrote after it are dropped)
            log_path.write_text("".join(json.dumps(m, sort_keys=True) + "\n" for m in history))
        for step in range(start, self.config.training.steps):
            if self.cuda:
                torch.cuda.reset_peak_memory_stats()
            t0 = time.perf_counter()
            data, metrics = self.collect(step)
            t1 = time.perf_counter()
            metrics.update(self.update(data))
            metrics["time/update"] = time.perf_counter() - t1
            metrics["time/step"] = time.perf_counter() - t0
            if self.cuda:  # torch's own allocations (the training engine's), the whole device's
                metrics["gpu/peak_allocated_gb"] = torch.cuda.max_memory_allocated() / 2**30
                metrics["gpu/used_after_sync_gb"] = eng.gpu_used_gb()
                metrics["gpu/peak_reserved_gb"] = torch.cuda.max_memory_reserved() / 2**30
            if self.config.rollout.engine == "vllm":
                metrics["vllm/sync_logprob_gap"] = self.last_sync_gap
            metrics["step"] = step + 1
            history.append(metrics)
            if log_path is not None:
                with log_path.open("a") as fh:
                    fh.write(json.dumps(metrics, sort_keys=True) + "\n")
            if progress is not None:
                progress(metrics)
            done = step + 1
            if checkpointer is not None and every and done % every == 0 \
                    and done < self.config.training.steps:
                checkpointer.save(done, lambda folder: state.save(folder, self, done, history))
        return history

    # --- evaluation ----------------------------------------------------------------------
    def evaluate(self, reporter=None) -> tuple[list[Example], list[str]] | None:
        """Greedy responses to the benchmark, sharded over ranks; rank 0 gets all of them."""
        examples = load_eval(self.task, self.config)
        mine = examples[self.rank::self.world]
        if reporter is not None:
            reporter.begin_eval(len(mine))
        progress = reporter.eval if reporter is not None else None
        r = self.config.rollout
        texts = self.rollout.generate_eval(mine, r.eval_max_response_tokens, r.eval_batch_size,
                                           progress)
        parts = eng.all_gather_objects(texts)
        if self.rank != 0:
            return None
        ordered = [""] * len(examples)
        for k, part in enumerate(parts):
            for j, text in enumerate(part):
                ordered[k + j * self.world] = text
        return examples, ordered


def summarise_training(history: list[dict]) -> dict:
    if not history:
        return {"steps": 0}
    keys = [k for k in history[0] if k != "step"]
    last = history[-1]
    out = {"steps": len(history)}
    for k in keys:
        vals = [h[k] for h in history if k in h and not math.isnan(h[k])]
        if vals:
            out[f"{k}/mean"] = sum(vals) / len(vals)
    out.update({f"{k}/last": last[k] for k in keys if k in last})
    return out


def partial_log_path(config: RunConfig) -> Path:
    return result_path(config).with_suffix(".train.jsonl.partial")


def store_result(config: RunConfig, examples: list[Example], responses: list[str],
                 scored: dict, history: list[dict], wall: float,
                 train_examples: Sequence[Example] = (), param_checksum: str = "") -> Path:
    """Predictions, then the training log, then the result JSON (the commit marker)."""
    path = result_path(config)
    items = {it["id"]: it for it in scored.get("items", [])}
    partial = partial_log_path(config)
    if partial.is_file():
        os.replace(partial, path.with_suffix(".train.jsonl"))
    atomic_write_jsonl(path.with_suffix(".predictions.jsonl"),
                       [{"id": ex.id, "response": text, **{k: v for k, v in
                         items.get(ex.id, {}).items() if k != "id"}}
                        for ex, text in zip(examples, responses)])
    atomic_write_json(path, make_record(
        config, scored["metrics"],
        train={**summarise_training(history), "final_param_sha256": param_checksum},
        wall_seconds=wall,
        train_examples=train_examples, eval_examples=examples,
        problems=scored.get("problems", ())))
    return path


def train_worker(config: RunConfig, reporter_factory=None, checkpointer=None) -> Path | None:
    """Train and evaluate one seed on this rank; rank 0 stores and returns the result path.
    ``reporter_factory(label, steps)``: rank 0's progress reporter (harness.console);
    ``checkpointer``: see ``Trainer.train``."""
    start = time.perf_counter()
    trainer = Trainer(config)
    # the log grows in a .partial file that store_result renames: a killed run never leaves a
    # new log beside an old result
    log = partial_log_path(config) if trainer.rank == 0 else None
    reporter = None
    if reporter_factory is not None and trainer.rank == 0:
        reporter = reporter_factory(f"{config.method.method} seed {config.seed}",
                                    config.training.steps)
        reporter.begin_train()
    history = trainer.train(log, reporter.step if reporter else None, checkpointer)
    from harness.checkpoints.state import parameter_checksum

    checksum = parameter_checksum(trainer.engine.module)  # collective under ZeRO-3
    evaluated = trainer.evaluate(reporter)
    if reporter is not None:
        reporter.close()
    if evaluated is None:
        return None
    examples, responses = evaluated
    scored = trainer.task.score(examples, responses)
    return store_result(config, examples, responses, scored, history,
                        time.perf_counter() - start, trainer.train_examples, checksum)
