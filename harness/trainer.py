"""The RL loop that runs on every worker: the stages of ``harness.train`` in order, step after
step, then the evaluation.

``train_worker(config)`` is the whole life of one seed on one rank: build the engines, train,
evaluate, and (rank 0) store the result. Ray Train calls it on each worker (harness/backend.py);
unit tests call it in-process on one rank. Nothing here knows a method by name: a method's
passes, loss terms and the models they read come from its registry entry.
"""
from __future__ import annotations

import copy
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Sequence

import torch

from harness import checks
from harness import engine as eng
from harness import orphan
from harness import startup
from harness.config import RunConfig
from harness.data import PromptSampler, load_eval, load_train
from harness.models import load_model, load_tokenizer, model_context
from harness.run import Run, of_config
from harness.rollouts import copy_weights
from harness.train.advantages import local_advantages, reward_metrics, rollout_batch
from harness.train.logprobs import sequence_logprobs
from harness.train.passes import context, prepare_terms, run_passes
from harness.train.sample import sample
from harness.train import stopping
from harness.seedrun import SeedRun
from harness.train.store import store_result
from harness.train.update import StepData, autocast, check_gap_drift, update
from harness.warmstart.cache import policy_source
from tasks.base import Example, Task


class Trainer:
    def __init__(self, config: RunConfig | Run, clock: startup.Clock | None = None) -> None:
        """``config``: the worker's resolved ``Run`` (``harness.run.from_stored``), or a config
        (in-process tests), resolved here through the same function. ``clock``: the start-up
        marks on the driver's clock (``harness.startup``; default: this process's own), which
        the first step's log carries as time/startup/<mark>."""
        self.clock = clock or startup.Clock()
        self._mark("trainer_begin")
        checked = isinstance(config, Run)  # a worker's run (the driver checked it), or a config
        resolved = config if checked else of_config(config, (config.seed,))
        config = resolved.config
        self.config, self.resolved = config, resolved
        self.rank, self.world = eng.rank(), eng.world_size()
        self.task: Task = resolved.task
        self.method = resolved.method
        self.options = resolved.options
        t = config.training
        from harness.preflight import raise_if

        # a run the driver checked: what only a worker sees; a config built in-process (never
        # checked): the whole settings check, with the process group's actual size
        raise_if(checks.worker_problems(resolved, self.world) if checked else
                 checks.settings_problems(resolved, world=self.world, on_worker=True))
        self.local_n = checks.local_responses(resolved, self.world)
        torch.manual_seed(config.seed)
        source = policy_source(resolved)  # the base model, or its cached warm start
        self.tokenizer = load_tokenizer(source, config.model.allow_download)
        self.cuda = t.use_gpu and torch.cuda.is_available()
        device = eng.device(t.use_gpu)
        needs = self.method.models(self.options) | ({"initial"} if t.kl_coef > 0 else set())

        def plain_copy():  # built before the ZeRO-3 scope, so it is never partitioned
            return load_model(source, seed=config.seed, allow_download=config.model.allow_download,
                              dtype=config.model.dtype).to(device).eval()

        entry = resolved.engine
        context = engine_context(config, resolved.evaluated, self.tokenizer, source) \
            if entry.sized else None
        self.rollout = entry.build(config, source, self.tokenizer, plain_copy, context)
        self._mark("rollout_engine_built")
        # a plain copy of the current policy: the engine's own, or one of ours when a method
        # reads it and the engine keeps none
        self.plain = self.rollout.plain_model
        if self.plain is None and "current" in needs:
            self.plain = plain_copy()
        self.engine, self.ds_config = eng.build_engine(
            config, self.local_n // t.ppo_mini_batches, source)
        self._mark("deepspeed_engine_built")
        self.engine.train()
        self.train_examples = self._usable(load_train(resolved))
        self.sampler = PromptSampler(len(self.train_examples), config.seed)
        self.pass_state: dict = {}  # the passes' own state between steps (checkpointed)
        # the policy's version (updates made) and the one the rollout engine holds: a
        # generation with any other weights than the policy's is refused before it samples
        self.version = self.engine_version = 0
        self.sync_weights()  # rollouts must start from exactly the engine's weights
        # the initial policy (KL reference, a fixed teacher): copied after the sync
        self.initial_model = None
        if "initial" in needs:
            self.initial_model = copy.deepcopy(self.plain).eval() if self.plain is not None \
                else plain_copy()
        self._mark("trainer_ready")

    def _mark(self, name: str) -> None:
        self.clock.mark(name)

    def _usable(self, examples: list[Example]) -> list[Example]:
        ids = self.rollout.encode(examples)
        keep = [ex for ex, i in zip(examples, ids)
                if len(i) <= self.config.rollout.max_prompt_tokens]
        if not keep:
            raise ValueError("every training prompt is longer than --max-prompt-tokens "
                             f"({self.config.rollout.max_prompt_tokens})")
        return keep

    @property
    def models(self) -> dict:
        """What passes and loss terms may read: the policy that sampled (the training engine,
        before its update), the initial policy, a plain copy of the current one."""
        return {"policy": self.engine, "initial": self.initial_model, "current": self.plain}

    def sync_weights(self) -> dict:
        """The trained weights -> the rollout engine (and our own plain copy, if any); the
        sync's metrics (``param_update_norm``: the update's L2 norm, NaN without a plain
        copy)."""
        metrics = self.rollout.sync(self.engine)
        self.engine_version = self.version
        if self.plain is not None and self.plain is not self.rollout.plain_model:
            with eng.gathered_parameters(self.engine.module) as named:
                metrics["param_update_norm"] = copy_weights(self.plain, named)
        return metrics

    # --- one step -------------------------------------------------------------------------
    def collect(self, step: int) -> tuple[StepData, dict]:
        """Sample, score, run the method's passes, compute the advantages, and the log-probs
        the loss needs (old policy, reference) and its loss terms' preparations."""
        cfg, t = self.config, self.config.training
        if self.engine_version != self.version:
            raise RuntimeError(f"internal: step {step + 1} would sample with the policy of "
                               f"{self.engine_version} updates, the policy has had "
                               f"{self.version}: a weight sync was skipped after an update")
        sampled = sample(self.rollout, self.task, self.train_examples,
                         self.sampler.next(cfg.rollout.prompts_per_step), self.rank, self.world,
                         cfg, step, self.cuda)
        micro = self.ds_config["train_micro_batch_size_per_gpu"]
        ctx = context(self.models, self.tokenizer, sampled, self.task,
                      cfg.rollout.temperature, micro, self.pass_state)
        with autocast(t.update_dtype, *self.models.values()):
            passes, pass_metrics = run_passes(self.method, self.options, ctx, sampled)
        batch = rollout_batch(self.task, sampled, passes, step, t.steps)
        adv, method_metrics = local_advantages(self.method, self.options, batch, sampled)
        metrics = {**reward_metrics(self.task, batch), **method_metrics, **pass_metrics,
                   **sampled.metrics}
        ro, rows = sampled.rollout, list(range(len(sampled.rewards)))
        t0 = time.perf_counter()
        old = ref = None
        with torch.no_grad():
            if t.ppo_epochs > 1 or t.ppo_mini_batches > 1:
                old = self._logprobs(self.engine, ro, rows)
            if t.kl_coef > 0:
                ref = self._logprobs(self.initial_model, ro, rows)
        with autocast(t.update_dtype, *self.models.values()):
            terms = prepare_terms(self.method, self.options, ctx)
        metrics["time/logprobs"] = time.perf_counter() - t0  # old, reference, loss terms
        return StepData(ro, adv, old, ref, terms, ctx), metrics

    def _logprobs(self, model, ro, rows: list[int]) -> torch.Tensor:
        """Old and reference log-probs, in the update's dtype (so the first PPO ratio is 1)."""
        mb = self.ds_config["train_micro_batch_size_per_gpu"]
        with autocast(self.config.training.update_dtype, model):
            return torch.cat([sequence_logprobs(model, ro, rows[s:s + mb],
                                                self.config.rollout.temperature,
                                                pack=self.config.training.pack_prompts,
                                                pad_id=self.tokenizer.pad_token_id)
                              for s in range(0, len(rows), mb)])

    def update(self, data: StepData) -> dict:
        """The optimizer steps over this step's rollouts, then the weight sync; without an
        optimizer step the weights are the ones the engine holds, so the sync is skipped and
        the step's log says so (``sync/skipped``)."""
        out = update(self.engine, self.ds_config, self.world, data, self.method, self.options,
                     self.config, self.tokenizer.pad_token_id)
        t0 = time.perf_counter()
        if out["optimizer_steps"] == 0:
            out.update({"sync/skipped": 1.0, "param_update_norm": 0.0})
        else:
            self.version += 1
            out.update(self.sync_weights())  # the next rollout sees the new policy
        out["time/sync"] = time.perf_counter() - t0
        return out

    def train(self, log_path: Path | None, progress=None, checkpointer=None,
              open_trackers=None) -> list[dict]:
        """Run every step; per-step metrics are appended to ``log_path`` as they come.

        ``checkpointer`` (harness.checkpoints.store.RayCheckpointer): resume from its latest
        checkpoint if there is one, and save one every ``save_every`` steps.
        ``open_trackers(start_step)``: the experiment trackers each step's row also goes to
        (harness.tracking.Trackers; rank 0), opened once the step to start from is known."""
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
        trackers = open_trackers(start) if open_trackers is not None else None
        eval_every = self.config.training.eval_every
        rule = stopping.parse(self.config.training.stop_when, self.config.training.stop_window)
        for step in range(start, self.config.training.steps):
            if self.cuda:
                torch.cuda.reset_peak_memory_stats()
            if step == start:
                self._mark("first_step_begins")
            t0 = time.perf_counter()
            data, metrics = self.collect(step)
            t1 = time.perf_counter()
            metrics.update(self.update(data))
            if "rollout/logprob_gap" in metrics:  # held to the run's first measured gap
                first = next((h["rollout/logprob_gap"] for h in history
                              if "rollout/logprob_gap" in h), None)
                check_gap_drift(metrics["rollout/logprob_gap"], first,
                                self.config.rollout.rollout_logprob_tolerance, step + 1)
            metrics["time/update"] = time.perf_counter() - t1
            metrics["time/step"] = time.perf_counter() - t0
            if self.cuda:  # torch's own allocations (the training engine's), the whole device's
                metrics["gpu/peak_allocated_gb"] = torch.cuda.max_memory_allocated() / 2**30
                metrics["gpu/used_after_sync_gb"] = eng.gpu_used_gb()
                metrics["gpu/peak_reserved_gb"] = torch.cuda.max_memory_reserved() / 2**30
            metrics["step"] = step + 1
            if eval_every and (step + 1) % eval_every == 0 \
                    and step + 1 < self.config.training.steps:  # the last: after training
                metrics.update(self.evaluate_during_training())
            if step == start:
                metrics.update(self.clock.metrics())
            history.append(metrics)
            stop = stopping.mark(rule, history)  # sets stop/reached in the row it stops at
            if trackers is not None:
                trackers.log(metrics, step + 1)
            if log_path is not None:
                orphan.check()  # a worker whose job was killed appends nothing
                with log_path.open("a") as fh:
                    fh.write(json.dumps(metrics, sort_keys=True) + "\n")
            if progress is not None:
                progress(metrics)
            if stop:
                break  # no checkpoint at the stop: a resume replays to it and stops there
            done = step + 1
            if checkpointer is not None and every and done % every == 0 \
                    and done < self.config.training.steps:
                checkpointer.save(done, lambda folder: state.save(folder, self, done, history))
        return history

    # --- evaluation ----------------------------------------------------------------------
    def evaluate_during_training(self) -> dict:
        """``eval/<metric>`` of the benchmark subset now (rank 0; {} elsewhere) and its time.
        Greedy decoding draws no random numbers, so the training that follows is the same as
        without it (a test checks the final parameters)."""
        t0 = time.perf_counter()
        evaluated = self.evaluate()
        if evaluated is None:
            return {}
        scored = self.task.score(*evaluated)
        out = {f"eval/{k}": float(v) for k, v in scored["metrics"].items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)}
        out["time/eval"] = time.perf_counter() - t0
        return out

    def evaluate(self, reporter=None, task: Task | None = None, config: RunConfig | None = None
                 ) -> tuple[list[Example], list[str]] | None:
        """Greedy responses to the benchmark (``task`` under ``config``; default: the run's),
        sharded over ranks; rank 0 gets all of them. ``reporter``: counts the items (its
        ``begin_eval`` is the caller's)."""
        task, config = task or self.task, config or self.config
        examples = load_eval(task, config)
        mine = examples[self.rank::self.world]
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



def engine_context(config: RunConfig, evaluated: Sequence[tuple[RunConfig, Task, str]],
                   tokenizer, source: str) -> int:
    """The longest prompt plus new tokens a run asks of its rollout engine: a training prompt
    (at most --max-prompt-tokens; longer ones are skipped) with its response, and the longest
    evaluation prompt (none is skipped) with its response, over every benchmark the training
    is evaluated on (``evaluated``: each one's config and task, ``Run.evaluated``). Past the
    model's own context the run fails here, before training, naming the item and the flags."""
    from harness.models import resolve
    from harness.rollouts.base import encode_prompts

    r = config.rollout
    train = r.max_prompt_tokens + r.max_response_tokens
    examples = [ex for c, task, _ in evaluated for ex in load_eval(task, c)]
    lengths = [len(i) for i in encode_prompts(tokenizer, examples)] if examples else []
    longest = max(range(len(lengths)), key=lengths.__getitem__) if lengths else None
    evaluation = lengths[longest] + r.eval_max_response_tokens if lengths else 0
    limit = model_context(resolve(source, config.model.allow_download))
    if limit is not None and evaluation > limit:
        raise ValueError(
            f"evaluation item {examples[longest].id!r} has a prompt of {lengths[longest]} "
            f"tokens; with --eval-max-response-tokens {r.eval_max_response_tokens} it needs "
            f"{evaluation}, past the model's context of {limit}: lower "
            "--eval-max-response-tokens or use a model with a longer context")
    if limit is not None and train > limit:
        raise ValueError(f"--max-prompt-tokens {r.max_prompt_tokens} + --max-response-tokens "
                         f"{r.max_response_tokens} = {train} is past the model's context of "
                         f"{limit}: lower one of them")
    return max(train, evaluation)


def train_worker(config: RunConfig | Run, reporter_factory=None, checkpointer=None,
                 run: SeedRun | None = None, clock: startup.Clock | None = None
                 ) -> Path | None:
    """Train and evaluate one seed on this rank; rank 0 stores and returns the result path.
    ``config``: the worker's resolved ``Run`` (or a config: in-process tests);
    ``reporter_factory(label, steps)``: rank 0's progress reporter (harness.console);
    ``checkpointer``: see ``Trainer.train``; ``run``: the seed's paths (made from ``config``
    when not given: in-process tests); ``clock``: see ``Trainer``."""
    start = time.perf_counter()
    trainer = Trainer(config, clock)
    config, resolved = trainer.config, trainer.resolved
    # the first benchmark's files, with the whole config (its result stores --also-evaluate)
    run = run or replace(resolved.seed_runs()[0], config=config)
    # the log grows in a .partial file that store_result renames: a killed run never leaves a
    # new log beside an old result
    log = run.partial_log if trainer.rank == 0 else None
    reporter = None
    if reporter_factory is not None and trainer.rank == 0:
        reporter = reporter_factory(f"{config.method.method} seed {config.seed}",
                                    config.training.steps)
        reporter.begin_train()
    trackers: list = []  # opened by the training loop (rank 0), closed after the evaluation

    def open_trackers(start_step: int):
        from harness.tracking import Trackers

        relative = run.folder.relative_to(Path(config.results_dir))
        trackers.append(Trackers(config, run.folder, relative.as_posix(), run.provenance(),
                                 start_step))
        return trackers[0]

    from harness import tracking

    history = trainer.train(log, reporter.step if reporter else None, checkpointer,
                            open_trackers if trainer.rank == 0 and
                            tracking.parse(config.training.report_to) else None)
    from harness.checkpoints.state import parameter_checksum

    checksum = parameter_checksum(trainer.engine.module)  # collective under ZeRO-3
    workers = eng.all_gather_objects(eng.placement())  # which node each rank ran on
    # each benchmark the training is evaluated on (--task, then --also-evaluate's), with the
    # config and files a run of that benchmark alone would have
    runs = [run, *(files[0] for files in resolved.files[1:])]
    tasks = [trainer.task, *(t for _, t, _ in resolved.evaluated[1:])]
    if reporter is not None:
        reporter.begin_eval(sum(len(load_eval(t, r.config)[trainer.rank::trainer.world])
                                for t, r in zip(tasks, runs)))
    evaluated = [trainer.evaluate(reporter, t, r.config) for t, r in zip(tasks, runs)]
    if reporter is not None:
        reporter.close()
    if evaluated[0] is None:
        return None
    scored = [t.score(*e) for t, e in zip(tasks, evaluated)]
    for t in trackers:  # the final evaluation, at the last step
        for r, s in zip(runs, scored):
            prefix = "eval/" if r is run else f"eval/{r.config.task.task}/"
            t.log({f"{prefix}{k}": v for k, v in s["metrics"].items()},
                  history[-1]["step"] if history else config.training.steps)
        t.close()
    wall = time.perf_counter() - start
    names = [r.config.task.task for r in runs] if len(runs) > 1 else []
    # the run's own result last: it marks the seed as done (harness.launch checks them all)
    for r, e, s in reversed(list(zip(runs, evaluated, scored))):
        path = store_result(r, *e, s, history, wall, trainer.train_examples, checksum, workers,
                            provenance=run.provenance(), log_source=run.partial_log,
                            evaluated_with=names)
    return path
