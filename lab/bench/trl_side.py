"""``bench vs-trl``'s TRL sides: TRL's ``GRPOTrainer`` on the same prompts, settings and
reward functions as the harness's side (``lab.bench.vs_trl``), with TRL's GRPO, TRL's own GDPO,
or a registered method as its advantage through ``harness.integrations.trl``."""
from __future__ import annotations

import tempfile
import time

# the phases the parent reports (lab.bench.vs_trl.PHASES) but the rest, "other"
MEASURED = ("generate", "rewards", "score", "forward_backward", "optimizer")


def process_age() -> float:
    """Seconds since this process started (a side's start-up before its first step)."""
    import psutil

    return time.time() - psutil.Process().create_time()


def run_trl(job: dict, side: str = "trl") -> dict:
    """TRL's GRPOTrainer on the same prompts, timed by wrapping its own methods; ``side``:
    ``trl`` (its GRPO), ``trl-gdpo`` (its own GDPO) or ``trl-mrtpo`` (this harness's MRTPO as
    its advantage, through ``harness.integrations.trl``)."""
    import torch
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from harness.config import RunConfig
    from harness.integrations.trl import dataset, reward_functions
    from harness.console import quiet
    from harness.data import load_train
    from harness.run import of_config
    from harness.models import load_tokenizer

    quiet.configure_process()
    config = RunConfig.from_dict(job["config"])
    run = of_config(config)
    task, train = run.task, load_train(run)
    examples = [train[i] for i in job["prompts"]]  # every step's prompts, in order
    by_id = {ex.id: ex for ex in examples}
    r, t = config.rollout, config.training
    responses = r.prompts_per_step * r.group_size

    clock: dict[str, float] = {}
    steps: list[dict] = []
    logged: list[dict] = []  # TRL's own per-step log (lengths, reward std)

    def timed(obj, name: str, key: str):
        inner = getattr(obj, name)

        def wrapper(*a, **kw):
            t0 = time.perf_counter()
            try:
                return inner(*a, **kw)
            finally:
                clock[key] = clock.get(key, 0.0) + time.perf_counter() - t0
        setattr(obj, name, wrapper)

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            clock.clear()
            clock["start"] = time.perf_counter()

        def on_pre_optimizer_step(self, args, state, control, **kwargs):
            clock["opt0"] = time.perf_counter()

        def on_optimizer_step(self, args, state, control, **kwargs):
            clock["optimizer"] = time.perf_counter() - clock["opt0"]

        def on_step_end(self, args, state, control, **kwargs):
            step = time.perf_counter() - clock["start"]
            row = {"step": step, "generate": clock.get("generate", 0.0),
                   "rewards": clock.get("rewards", 0.0),
                   "score": clock.get("prepare", 0.0) - clock.get("generate", 0.0)
                   - clock.get("rewards", 0.0),
                   "forward_backward": clock.get("training_step", 0.0) - clock.get("prepare", 0.0),
                   "optimizer": clock.get("optimizer", 0.0)}
            row["other"] = step - sum(row[p] for p in MEASURED)
            steps.append(row)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "completions/mean_length" in logs:
                logged.append(dict(logs))

    data = dataset(examples)  # the prompts in order, each with its example_id
    tok = load_tokenizer(job["model_path"])
    micro = job["micro_batch"]
    with tempfile.TemporaryDirectory() as out:
        args = GRPOConfig(
            output_dir=out, per_device_train_batch_size=micro,
            gradient_accumulation_steps=responses // micro, num_generations=r.group_size,
            max_completion_length=r.max_response_tokens, temperature=r.temperature,
            top_p=r.top_p, top_k=r.top_k, beta=0.0, loss_type="dapo",
            epsilon=t.clip_eps_low, epsilon_high=t.clip_eps_high,
            learning_rate=t.lr, lr_scheduler_type="constant", warmup_steps=0,
            optim="adamw_torch", weight_decay=t.weight_decay, max_grad_norm=t.grad_clip,
            gradient_checkpointing=t.gradient_checkpointing,
            model_init_kwargs={"dtype": torch.float32},
            max_steps=len(job["prompts"]) // r.prompts_per_step, use_cpu=True, bf16=False,
            report_to=[], save_strategy="no", logging_steps=1, disable_tqdm=True,
            shuffle_dataset=False, seed=config.seed,
            multi_objective_aggregation="normalize_then_sum" if side == "trl-gdpo"
            else "sum_then_normalize")
        kwargs = dict(model=job["model_path"], args=args, train_dataset=data,
                      processing_class=tok,
                      reward_funcs=reward_functions(task, by_id),
                      callbacks=[Clock()])
        if side == "trl-mrtpo":
            import methods
            from harness.integrations.trl import MethodGRPOTrainer

            trainer = MethodGRPOTrainer(
                **kwargs, method="mrtpo", examples=by_id,
                method_options=methods.options(conventions="trl", whiten="token"),
                reward_bounds=[(rw.lo, rw.hi) for rw in task.rewards])
        else:
            trainer = GRPOTrainer(**kwargs)
        timed(trainer, "_generate", "generate")
        timed(trainer, "_calculate_rewards", "rewards")
        timed(trainer, "_prepare_inputs", "prepare")
        timed(trainer, "training_step", "training_step")
        startup = process_age()
        trainer.train()
    for row, log in zip(steps, logged):
        row["length"] = float(log["completions/mean_length"])
        row["groups_with_signal"] = r.prompts_per_step * (1.0 - float(log["frac_reward_zero_std"]))
        row["updated"], row["skipped"] = float(responses), 0.0  # TRL forwards every response
    if len(logged) != len(steps):
        raise RuntimeError(f"TRL logged {len(logged)} steps but ran {len(steps)}")
    return {"startup": startup, "steps": steps}
