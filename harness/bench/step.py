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


def method_config(config, spec: str):
    """``name`` or ``mrtpo@single`` (MRTPO with another replay mode)."""
    name, _, replay = spec.partition("@")
    fields = {"method": name}
    if replay:
        fields["replay"] = replay
    return replace(config, method=replace(config.method, **fields))


def one_step(config) -> dict:
    """Build a trainer (not timed), run step 0 (collect + update), return its phase times."""
    from harness.trainer import Trainer

    trainer = Trainer(config)
    start = time.perf_counter()
    data, metrics = trainer.collect(0)
    metrics.update(trainer.update(data))
    total = time.perf_counter() - start
    out = {p: float(metrics.get(f"time/{p}", 0.0)) for p in PHASES}
    out["step"] = total
    out["update_rows"] = metrics.get("update_rows", 0.0)
    out["groups_with_signal"] = metrics.get("groups_with_signal", float("nan"))
    out["format_rate"] = metrics.get("format_rate", float("nan"))
    del trainer, data
    gc.collect()
    return out


def bench_step(args: argparse.Namespace) -> int:
    from harness import engine as eng
    from harness.bench import report
    from harness.flags import overrides_from
    from harness.config import resolve
    from harness.console import quiet

    quiet.configure_process()
    config = resolve(args.preset, overrides_from(args))
    specs = [s.strip() for s in args.methods.split(",") if s.strip()]
    if args.baseline not in specs:
        raise ValueError(f"--baseline {args.baseline!r} is not among --methods {specs}")
    eng.init_single_process()
    if config.warmstart.warm_start:
        from harness.warmstart.cache import policy_source

        policy_source(config)  # fails now, with the command to make it, if it is missing
    runs: dict[str, list[dict]] = {s: [] for s in specs}
    meter = report.LoadMeter().start()  # what else used the CPUs meanwhile goes in the report
    for _ in range(args.warmup):  # a process's first step pays its allocator's growth
        one_step(method_config(config, args.baseline))
    for rep in range(args.repeats):
        for spec in specs:
            row = one_step(method_config(config, spec))
            runs[spec].append(row)
            print(f"repeat {rep + 1}/{args.repeats} {spec:<14} step {row['step']:6.1f} s "
                  + " ".join(f"{p} {row[p]:.1f}" for p in PHASES if row[p]), flush=True)
    med = {s: {k: statistics.median(r[k] for r in rows) for k in rows[0]}
           for s, rows in runs.items()}
    base = med[args.baseline]["step"]
    m = report.machine() | meter.stop()
    header = ["method", "step s", f"ratio to {args.baseline}", *PHASES, "rows fwd/bwd"]
    table = [[s, med[s]["step"], med[s]["step"] / base, *(med[s][p] for p in PHASES),
              int(med[s]["update_rows"])] for s in specs]
    r = config.rollout
    what = (f"`bench step`: {config.task.task}, preset {args.preset}, model {config.model.model}"
            f"{' (warm-started)' if config.warmstart.warm_start else ''}, "
            f"{r.prompts_per_step} prompts x G={r.group_size}, <= {r.max_response_tokens} new "
            f"tokens, micro-batch {config.training.micro_batch_size}, gradient checkpointing "
            f"{'on' if config.training.gradient_checkpointing else 'off'}, ZeRO stage "
            f"{config.training.zero_stage}; median of {args.repeats} alternated repeats after "
            f"{args.warmup} untimed warm-up step(s), seconds")
    md = (f"# {args.label}\n\n{what}\n\nMachine: {report.machine_line(m)}\n\n"
          + report.markdown_table(header, table))
    data = {"bench": "step", "label": args.label, "machine": m, "task": config.task.task,
            "preset": args.preset, "config": config.to_dict(), "methods": specs,
            "baseline": args.baseline, "runs": runs, "median": med}
    report.publish(args.label, data, md, args.output_dir)
    return 0


def add_parser(which) -> None:
    from harness.flags import add_config_flags

    p = which.add_parser("step", help="one step's phase split for several methods on one batch "
                                      "(in-process), with ratios to a baseline")
    p.add_argument("--preset", default="smoke-learn")
    p.add_argument("--methods", default=DEFAULT_METHODS,
                   help="comma-separated; NAME@MODE runs MRTPO with replay MODE")
    p.add_argument("--baseline", default="gdpo")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--warmup", type=int, default=1, help="untimed steps of the baseline first")
    p.add_argument("--label", default="step", help="report name under results/bench/")
    p.add_argument("--output-dir", default=None, help="default: results/bench/")
    add_config_flags(p, only=("task", "model", "warm_start", "max_response_tokens",
                              "prompts_per_step", "group_size", "micro_batch_size",
                              "gradient_checkpointing", "zero_stage", "data_dir"))
    p.set_defaults(bench_fn=bench_step)
