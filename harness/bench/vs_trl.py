"""``bench vs-trl``: the same GRPO step in this harness and in TRL's ``GRPOTrainer``.

Same model folder, same prompts (the ones the harness samples at step 0), same G, same
maximum of new tokens, same temperature, the same reward functions (the task's own), one
process, no KL term, gradient checkpointing set alike. Each round builds both trainers (not
timed) and times one step of each, alternating which goes first (A B, B A, ...); reported: the
median step time of each and their ratio. TRL is an optional dependency (the ``bench`` extra).
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import replace


def _require_trl():
    try:
        import datasets  # noqa: F401
        import trl
    except ImportError as exc:
        raise RuntimeError(
            "bench vs-trl needs TRL: .venv/bin/python -m pip install -c "
            "requirements/constraints-cpu.txt -e '.[bench]' (trl 1.16.0, datasets 5.2.0)"
        ) from exc
    return trl


def harness_step(config) -> float:
    from harness.trainer import Trainer

    trainer = Trainer(config)
    start = time.perf_counter()
    data, _ = trainer.collect(0)
    trainer.update(data)
    seconds = time.perf_counter() - start
    del trainer
    return seconds


def trl_step(config, examples, model_path: str) -> float:
    """One GRPOTrainer step on the same prompts; the time between its step callbacks."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from harness.data import get_task
    from harness.models import load_tokenizer

    task = get_task(config)
    r, t = config.rollout, config.training
    by_id = {ex.id: ex for ex in examples}

    def reward(k: int):
        def fn(completions, example_id, **kwargs):
            texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
            rows = task.compute_rewards([by_id[i] for i in example_id], texts)
            return [row[k] for row in rows]
        fn.__name__ = task.rewards[k].name
        return fn

    class Clock(TrainerCallback):
        seconds: list[float] = []

        def on_step_begin(self, args, state, control, **kwargs):
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            Clock.seconds.append(time.perf_counter() - self.start)

    data = Dataset.from_list([{"prompt": [dict(m) for m in ex.messages], "example_id": ex.id}
                              for ex in examples])
    tok = load_tokenizer(model_path)
    n = len(examples) * r.group_size
    with tempfile.TemporaryDirectory() as out:
        args = GRPOConfig(
            output_dir=out, per_device_train_batch_size=n, num_generations=r.group_size,
            max_completion_length=r.max_response_tokens, temperature=r.temperature,
            top_p=r.top_p, top_k=r.top_k or None, beta=0.0, learning_rate=t.lr,
            gradient_checkpointing=t.gradient_checkpointing, max_steps=1, use_cpu=True,
            bf16=False, report_to=[], save_strategy="no", logging_steps=1, disable_tqdm=True,
            shuffle_dataset=False, seed=config.seed)
        trainer = GRPOTrainer(model=model_path, args=args, train_dataset=data,
                              processing_class=tok,
                              reward_funcs=[reward(k) for k in range(len(task.rewards))],
                              callbacks=[Clock()])
        torch.set_num_threads(torch.get_num_threads())
        Clock.seconds = []
        trainer.train()
    return Clock.seconds[-1]


def bench_vs_trl(args: argparse.Namespace) -> int:
    import torch

    from harness import engine as eng
    from harness.bench import report
    from harness.flags import overrides_from
    from harness.config import resolve
    from harness.console import quiet
    from harness.data import PromptSampler, load_train
    from harness.warmstart.cache import policy_source

    _require_trl()
    quiet.configure_process()
    config = resolve(args.preset, {**overrides_from(args), "method": "grpo"})
    eng.init_single_process()
    model_path = policy_source(config)
    if not model_path.startswith("/"):
        from harness.models import resolve as resolve_model

        model_path = resolve_model(model_path)
    train = load_train(config)
    idx = PromptSampler(len(train), config.seed).next(config.rollout.prompts_per_step)
    examples = [train[i] for i in idx]
    ours, theirs = [], []
    for rnd in range(args.repeats):
        order = ("harness", "trl") if rnd % 2 == 0 else ("trl", "harness")
        for side in order:
            if side == "harness":
                ours.append(harness_step(replace(config, seed=config.seed)))
            else:
                theirs.append(trl_step(config, examples, model_path))
            print(f"round {rnd + 1}/{args.repeats} {side:<8} "
                  f"{(ours if side == 'harness' else theirs)[-1]:6.1f} s", flush=True)
    a, b = statistics.median(ours), statistics.median(theirs)
    m = report.machine()
    r, t = config.rollout, config.training
    from importlib import metadata

    what = (f"`bench vs-trl`: one GRPO step, {config.task.task} prompts, model "
            f"{config.model.model}{' (warm-started)' if config.warmstart.warm_start else ''}, "
            f"{r.prompts_per_step} prompts x G={r.group_size}, <= {r.max_response_tokens} new "
            f"tokens, gradient checkpointing {'on' if t.gradient_checkpointing else 'off'}, "
            f"one process, TRL {metadata.version('trl')}; {args.repeats} rounds, order "
            f"alternated; median seconds")
    table = report.markdown_table(["", "harness", "TRL GRPOTrainer", "ratio harness / TRL"],
                                  [["step (median)", a, b, a / b],
                                   ["steps", " ".join(f"{x:.1f}" for x in ours),
                                    " ".join(f"{x:.1f}" for x in theirs), ""]])
    md = f"# {args.label}\n\n{what}\n\nMachine: {report.machine_line(m)}\n\n{table}"
    data = {"bench": "vs-trl", "label": args.label, "machine": m, "config": config.to_dict(),
            "harness_seconds": ours, "trl_seconds": theirs, "ratio": a / b,
            "torch_threads": torch.get_num_threads()}
    report.publish(args.label, data, md, args.output_dir)
    return 0


def add_parser(which) -> None:
    from harness.flags import add_config_flags

    p = which.add_parser("vs-trl", help="the same GRPO step here and in TRL's GRPOTrainer "
                                        "(needs the bench extra)")
    p.add_argument("--preset", default="smoke-learn")
    p.add_argument("--repeats", type=int, default=2, help="rounds (each times one step of each)")
    p.add_argument("--label", default="vs-trl", help="report name under results/bench/")
    p.add_argument("--output-dir", default=None, help="default: results/bench/")
    add_config_flags(p, only=("task", "model", "warm_start", "max_response_tokens",
                              "prompts_per_step", "group_size", "micro_batch_size",
                              "gradient_checkpointing", "zero_stage"))
    p.set_defaults(bench_fn=bench_vs_trl)
