"""``bench step``: one training step split into its phases, for several methods on one batch.

Everything runs in this one process on one rank (no Ray: its start-up is not step time). Each
method gets a fresh trainer built from the same settings and seed, so every method samples the
same prompts and the same responses from the same weights; methods are alternated
(A B C A B C ...) over ``--repeats`` so that a slow spell of a shared machine hits all of them.
Reported per method: the median over repeats of each phase and of the whole step, and its ratio
to the baseline method (GDPO by default).
"""
from __future__ import annotations

import argparse
import gc
import statistics
import time
from dataclasses import replace

PHASES = ("generate", "rewards", "replay", "logprobs", "forward", "backward", "optimizer",
          "sync")
DEFAULT_METHODS = "grpo,gdpo,mrtpo,mrtpo@single,mrtpo@joint,cort,opsd"


UPDATE_DTYPES = {"fp32": "float32", "bf16": "bfloat16"}


def method_config(config, spec: str):
    """``name``, ``mrtpo@single`` (MRTPO with another replay mode), either with ``:bf16`` or
    ``:fp32`` (the update's dtype, ``--update-dtype``; default: the run's)."""
    spec, _, dtype = spec.partition(":")
    name, _, replay = spec.partition("@")
    fields = {"method": name}
    if replay:
        fields["mrtpo_replay"] = replay
    from harness.method_config import method_config as method_section

    out = replace(config, method=method_section(fields.pop("method"), fields, config.method))
    if dtype:
        if dtype not in UPDATE_DTYPES:
            raise ValueError(f"unknown update dtype {dtype!r} in {spec}:{dtype}; use "
                             f"{' or '.join(UPDATE_DTYPES)}")
        out = replace(out, training=replace(out.training, update_dtype=UPDATE_DTYPES[dtype]))
    return out


def one_step(config, evaluate: bool = False) -> dict:
    """Build a trainer (not timed), run step 0 (collect + update), return its phase times;
    on a GPU also the step's peak memory; ``evaluate``: then the benchmark's first
    ``eval_limit`` items (greedy, scored) with the stepped policy."""
    import torch

    from harness.trainer import Trainer

    trainer = Trainer(config)
    cuda = trainer.cuda
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    data, metrics = trainer.collect(0)
    metrics.update(trainer.update(data))
    if cuda:
        torch.cuda.synchronize()
    total = time.perf_counter() - start
    out = {p: float(metrics.get(f"time/{p}", 0.0)) for p in PHASES}
    out["step"] = total
    out["update_rows"] = metrics.get("update_rows", 0.0)
    out["groups_with_signal"] = metrics.get("groups_with_signal", float("nan"))
    out["format_rate"] = metrics.get("format_rate", float("nan"))
    if cuda:
        out["peak_gpu_gb"] = torch.cuda.max_memory_allocated() / 2**30
    if evaluate:
        t0 = time.perf_counter()
        examples, responses = trainer.evaluate()
        scored = trainer.task.score(examples, responses)
        out["eval_s"] = time.perf_counter() - t0
        out["eval_items"] = float(len(examples))
        out.update({f"eval/{k}": float(v) for k, v in scored["metrics"].items()
                    if isinstance(v, (int, float))})
    del trainer, data
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    return out


def bench_step(args: argparse.Namespace) -> int:
    from harness import engine as eng
    from lab.bench import report
    from lab.flags import overrides_from
    from harness.config import resolve
    from harness.console import quiet

    quiet.configure_process()
    config = resolve(args.preset, overrides_from(args))
    specs = [s.strip() for s in args.methods.split(",") if s.strip()]
    if args.baseline not in specs:
        raise ValueError(f"--baseline {args.baseline!r} is not among --methods {specs}")
    eng.init_single_process("nccl" if config.training.use_gpu else "gloo")
    if config.warmstart.warm_start:
        from harness.run import of_config
        from harness.warmstart.cache import policy_source

        policy_source(of_config(config))  # fails now, with the command to make it, if it is missing
    runs: dict[str, list[dict]] = {s: [] for s in specs}
    meter = report.LoadMeter().start()  # what else used the CPUs meanwhile goes in the report
    for _ in range(args.warmup):  # a process's first step pays its allocator's growth
        one_step(method_config(config, args.baseline))
    for rep in range(args.repeats):
        for spec in specs:
            row = one_step(method_config(config, spec),
                           evaluate=args.evaluate and rep == args.repeats - 1)
            runs[spec].append(row)
            print(f"repeat {rep + 1}/{args.repeats} {spec:<14} step {row['step']:6.1f} s "
                  + " ".join(f"{p} {row[p]:.1f}" for p in PHASES if row[p]), flush=True)
    med = {s: {k: statistics.median(r[k] for r in rows) for k in rows[0]}
           for s, rows in runs.items()}
    base = med[args.baseline]["step"]
    m = report.machine() | meter.stop()
    # columns only some runs have: peak GPU memory, the evaluation (its last repeat)
    extra = [k for k in ("peak_gpu_gb", "eval_items", "eval_s") if k in med[specs[0]]]
    extra += sorted({k for s in specs for k in runs[s][-1] if k.startswith("eval/")})
    header = ["method", "step s", f"ratio to {args.baseline}", *PHASES, "rows fwd/bwd", *extra]
    table = [[s, med[s]["step"], med[s]["step"] / base, *(med[s][p] for p in PHASES),
              int(med[s]["update_rows"]), *(runs[s][-1].get(k, float("nan")) for k in extra)]
             for s in specs]
    r = config.rollout
    what = (f"`bench step`: {config.task.task}, preset {args.preset}, model {config.model.model}"
            f"{' (warm-started)' if config.warmstart.warm_start else ''}, "
            f"{r.prompts_per_step} prompts x G={r.group_size}, <= {r.max_response_tokens} new "
            f"tokens, micro-batch {config.training.micro_batch_size}, gradient checkpointing "
            f"{'on' if config.training.gradient_checkpointing else 'off'}, ZeRO stage "
            f"{config.training.zero_stage}, {'GPU' if config.training.use_gpu else 'CPU'}, "
            f"{config.rollout.engine} engine, {config.model.dtype} weights, update in "
            f"{config.training.update_dtype} unless the method says; median of {args.repeats} "
            f"alternated repeats after {args.warmup} untimed warm-up step(s), seconds"
            + (f"; the last repeat then evaluates {config.task.eval_limit} benchmark items"
               if args.evaluate else ""))
    md = (f"# {args.label}\n\n{what}\n\nMachine: {report.machine_line(m)}\n\n"
          + report.markdown_table(header, table))
    data = {"bench": "step", "label": args.label, "machine": m, "task": config.task.task,
            "preset": args.preset, "config": config.to_dict(), "methods": specs,
            "baseline": args.baseline, "runs": runs, "median": med}
    report.publish(args.label, data, md, args.output_dir)
    return 0


def add_parser(which) -> None:
    from lab.flags import add_config_flags

    p = which.add_parser("step", help="one step's phase split for several methods on one batch "
                                      "(in-process), with ratios to a baseline")
    p.add_argument("--preset", default="smoke-learn")
    p.add_argument("--methods", default=DEFAULT_METHODS,
                   help="comma-separated; NAME@MODE runs MRTPO with replay MODE; NAME:bf16 or "
                        "NAME:fp32 sets the update's dtype")
    p.add_argument("--baseline", default="gdpo")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--warmup", type=int, default=1, help="untimed steps of the baseline first")
    p.add_argument("--label", default="step", help="report name under --output-dir")
    p.add_argument("--output-dir", default=None,
                   help="default: runs/bench/ (results/bench refreshes the committed reports)")
    p.add_argument("--evaluate", action="store_true",
                   help="after each method's last repeat, evaluate --eval-limit benchmark items")
    add_config_flags(p, only=("task", "model", "warm_start", "max_response_tokens",
                              "prompts_per_step", "group_size", "micro_batch_size",
                              "gradient_checkpointing", "zero_stage", "data_dir", "use_gpu",
                              "engine", "dtype", "rollout_dtype", "update_dtype", "eval_limit",
                              "eval_max_response_tokens"))
    p.set_defaults(bench_fn=bench_step)
