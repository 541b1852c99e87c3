"""``bench vs-trl``: the same GRPO training in this harness and in TRL's ``GRPOTrainer``.

Each side runs ``--steps`` steps in a fresh process of its own, per round (nothing a previous
side allocated or imported lingers), and the sides take turns in a rotated order over
``--rounds`` (A B C D, B C D A, ...), so a slow spell of the machine hits every side. TRL's
process is a clean one: no RANK/WORLD_SIZE/MASTER_* in its environment, so accelerate runs it
as one plain process (no DDP wrapper). Both sides get the same model folder, the same prompts
in the same order (the harness's own prompt sampler), the same G, maximum of new tokens,
temperature, top-p and top-k (0: off), the task's own reward functions, fp32 weights, no KL
term, token-mean loss (TRL ``loss_type="dapo"``), the same clip epsilons, a constant learning
rate, torch AdamW with the same lr and weight decay, the same gradient-norm clip, and one
optimizer step per step over micro-batches of the same size (TRL:
``per_device_train_batch_size`` = micro-batch, ``gradient_accumulation_steps`` = responses /
micro-batch).

Reported per side: the median over rounds of each round's median over steps 2..N of the step
and its phases (generation, rewards, other scoring, forward+backward, optimizer, the rest),
the start-up before step 1, mean completion length, groups with reward signal, responses the
update forwarded and skipped, and the process's peak resident memory; the machine's load before
and after. Besides the harness as it runs, the harness with transformers ``generate`` (its
``hf`` engine) and then also without shared prefill and prompt packing, so that each gain is
visible on its own. TRL is an optional dependency (the ``bench`` extra).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lab.bench.trl_side import process_age

# side -> (config overrides, what it is)
SIDES = {
    "harness": ({"update_dtype": "float32"}, "the harness as it runs (lean engine, prompt "
                                              "packing, sampling in the machine's dtype: "
                                              "--rollout-dtype auto), its update in float32"),
    "harness-sample-fp32": ({"update_dtype": "float32", "rollout_dtype": "float32"},
                            "the same, sampling in float32 whatever the machine"),
    "harness-sample-bf16": ({"update_dtype": "float32", "rollout_dtype": "bfloat16"},
                            "the same, sampling in bf16 whatever the machine (emulated where "
                            "the CPU has no native bf16)"),
    "harness-bf16": ({"update_dtype": "bfloat16"}, "the same with its update, log-probs and "
                                                   "passes under bf16 autocast "
                                                   "(--update-dtype bfloat16)"),
    "harness-hf": ({"engine": "hf"}, "transformers generate with shared prefill, packing on"),
    "harness-hf-plain": ({"engine": "hf", "hf_share_prefill": False, "pack_prompts": False},
                         "transformers generate, no shared prefill, no prompt packing"),
    "trl": ({}, "TRL GRPOTrainer, transformers generate"),
    "trl-gdpo": ({}, "TRL GRPOTrainer with its own GDPO (multi_objective_aggregation="
                     "normalize_then_sum)"),
    "trl-mrtpo": ({}, "TRL GRPOTrainer with this harness's MRTPO as its advantage "
                      "(harness.integrations.trl, conventions trl, token whitening)"),
}
# the sampling-dtype sides are asked for by name (on a CPU without native bf16 they show what
# --rollout-dtype auto saves)
DEFAULT_SIDES = tuple(s for s in SIDES if not s.startswith("harness-sample-"))
PHASES = ("generate", "rewards", "score", "forward_backward", "optimizer", "other")
PHASE_HELP = {
    "generate": "sampling the responses (tokenising and decoding included)",
    "rewards": "the task's reward functions",
    "score": "the rest of preparing the batch: advantages, log-probs the loss needs",
    "forward_backward": "the loss forwards and backwards over the micro-batches",
    "optimizer": "the optimizer step(s) (gradient clip included)",
    "other": "the step less the phases above (weight sync, bookkeeping)",
}
# a process started by torchrun, accelerate or a Ray worker carries these; TRL must not see them
DIST_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
            "MASTER_PORT", "GROUP_RANK", "ROLE_RANK", "NODE_RANK")


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


# ---------------------------------------------------------------- the sides (child processes)


def run_harness(job: dict) -> dict:
    """The harness's Trainer in this process (one rank, no Ray: its start-up is ``bench
    launch``'s subject), ``steps`` steps; per step its own phase clocks."""
    from harness import engine as eng
    from harness.config import RunConfig
    from harness.console import quiet
    from harness.trainer import Trainer

    quiet.configure_process()
    config = RunConfig.from_dict(job["config"])
    eng.init_single_process()
    trainer = Trainer(config)
    startup = process_age()
    steps = []
    n_responses = config.rollout.prompts_per_step * config.rollout.group_size
    for m in trainer.train(None):
        row = {"step": m["time/step"], "generate": m["time/generate"],
               "rewards": m["time/rewards"],
               "score": m.get("time/replay", 0.0) + m.get("time/logprobs", 0.0),
               "forward_backward": m["time/forward"] + m["time/backward"],
               "optimizer": m["time/optimizer"],
               "length": m["response_length"],
               "groups_with_signal": m["groups_with_signal"] * config.rollout.prompts_per_step,
               "updated": m["update_rows"],
               # responses whose advantages were all 0: the update never forwards them
               "skipped": config.training.ppo_epochs * n_responses - m["update_rows"]}
        # collect's own bookkeeping (advantages, batch) is the rest of "score"
        row["other"] = row["step"] - sum(row[p] for p in PHASES if p != "other")
        steps.append(row)
    return {"startup": startup, "steps": steps}


def side_main(argv: list[str]) -> int:
    """``python -m lab.bench.vs_trl --side S --job JOB.json --out OUT.json``."""
    p = argparse.ArgumentParser(prog="lab.bench.vs_trl")
    p.add_argument("--side", required=True, choices=sorted(SIDES))
    p.add_argument("--job", required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    job = json.loads(Path(a.job).read_text())
    if a.side.startswith("trl"):
        leaked = [k for k in DIST_ENV if k in os.environ]
        if leaked:
            raise RuntimeError(f"the TRL side must run as a plain process; found {leaked}")
        from lab.bench.trl_side import run_trl

        result = run_trl(job, a.side)
    else:
        result = run_harness({**job, "config": job["configs"][a.side]})
    from harness.results import atomic_write_json

    atomic_write_json(Path(a.out), result)
    return 0


# ---------------------------------------------------------------- the parent


def run_side(side: str, job_path: Path, out: Path, timeout: float) -> dict:
    """One side in a fresh process; its result, wall seconds and peak resident memory."""
    env = {k: v for k, v in os.environ.items() if k not in DIST_ENV}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "lab.bench.vs_trl", "--side", side,
                             "--job", str(job_path), "--out", str(out)], env=env)
    deadline = time.monotonic() + timeout
    while True:  # os.wait4 gives the child's own peak RSS (ru_maxrss, KiB on Linux)
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"side {side} ran past {timeout:.0f} s")
        time.sleep(0.2)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"side {side} failed (exit {proc.returncode}); its output is above")
    result = json.loads(out.read_text())
    result["wall"] = time.perf_counter() - t0
    result["peak_rss_gb"] = usage.ru_maxrss / 2**20
    return result


def summarise(rounds: list[dict]) -> dict:
    """Per round: the median over steps 2..N of each figure; then the median over rounds."""
    keys = ("step", *PHASES, "length", "groups_with_signal", "updated", "skipped")
    per_round = [{k: statistics.median(s[k] for s in r["steps"][1:]) for k in keys}
                 | {"startup": r["startup"], "peak_rss_gb": r["peak_rss_gb"]} for r in rounds]
    return {k: statistics.median(r[k] for r in per_round) for k in per_round[0]} \
        | {"rounds": [r["step"] for r in per_round]}


def bench_vs_trl(args: argparse.Namespace) -> int:
    from lab.bench import report
    from harness.config import resolve
    from harness.console import quiet
    from harness.data import PromptSampler, load_train
    from lab.flags import overrides_from
    from harness.warmstart.cache import policy_source

    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    unknown = [s for s in sides if s not in SIDES]
    if unknown:
        raise ValueError(f"unknown sides {unknown}; known: {', '.join(SIDES)}")
    if any(s.startswith("trl") for s in sides):
        _require_trl()
    if args.steps < 2:
        raise ValueError("--steps must be >= 2: step 1 (a fresh process's first) is not timed")
    quiet.configure_process()
    base = resolve(args.preset, {**overrides_from(args), "method": "grpo", "steps": args.steps,
                                 "kl_coef": 0.0})
    from harness.run import of_config

    resolved = of_config(base)
    model_path = policy_source(resolved)  # makes the warm start now if missing, not in a side
    if not Path(model_path).is_dir():
        from harness.models import resolve as resolve_model

        model_path = resolve_model(model_path)
    r, t = base.rollout, base.training
    responses = r.prompts_per_step * r.group_size
    micro = t.micro_batch_size
    if responses % micro:
        raise ValueError(f"{responses} responses per step are not a whole number of "
                         f"micro-batches of {micro}")
    sampler = PromptSampler(len(load_train(resolved)), base.seed)
    prompts = [i for _ in range(args.steps) for i in sampler.next(r.prompts_per_step)]
    configs = {s: resolve(args.preset, {**overrides_from(args), "method": "grpo",
                                        "steps": args.steps, "kl_coef": 0.0, **SIDES[s][0]})
               for s in sides if not s.startswith("trl")}
    results: dict[str, list[dict]] = {s: [] for s in sides}
    meter = report.LoadMeter().start()
    with tempfile.TemporaryDirectory() as tmp:
        job = Path(tmp) / "job.json"
        job.write_text(json.dumps({"configs": {s: c.to_dict() for s, c in configs.items()},
                                   "config": base.to_dict(), "prompts": prompts,
                                   "model_path": str(model_path), "micro_batch": micro}))
        for rnd in range(args.rounds):
            order = sides[rnd % len(sides):] + sides[:rnd % len(sides)]
            for side in order:
                before = os.getloadavg()[0]
                res = run_side(side, job, Path(tmp) / f"{side}-{rnd}.json", args.timeout)
                res["loadavg_before"], res["loadavg_after"] = before, os.getloadavg()[0]
                results[side].append(res)
                steps = " ".join(f"{s['step']:.1f}" for s in res["steps"])
                print(f"round {rnd + 1}/{args.rounds} {side:<17} start-up {res['startup']:5.1f} s"
                      f"  steps {steps} s  peak {res['peak_rss_gb']:.2f} GB", flush=True)
    m = report.machine() | meter.stop()
    med = {s: summarise(rs) for s, rs in results.items()}
    ref = "trl" if "trl" in sides else sides[-1]
    header = ["side", "step s", f"ratio to {ref}", *PHASES, "start-up s", "length",
              "groups w/ signal", "updated", "skipped", "peak GB", "steps per round"]
    rows = [[s, med[s]["step"], med[s]["step"] / med[ref]["step"],
             *(med[s][p] for p in PHASES), med[s]["startup"], med[s]["length"],
             med[s]["groups_with_signal"], med[s]["updated"], med[s]["skipped"],
             med[s]["peak_rss_gb"], " ".join(f"{x:.1f}" for x in med[s]["rounds"])]
            for s in sides]
    from importlib import metadata

    from harness.assets import PROJECT_ROOT

    # the warm start's folder as the checkout names it (no path of this machine in a report)
    shown = (os.path.relpath(model_path, PROJECT_ROOT)
             if Path(model_path).resolve().is_relative_to(PROJECT_ROOT) else str(model_path))
    settings = [["model", f"{base.model.model}"
                 f"{' (warm-started: ' + shown + ')' if base.warmstart.warm_start else ''}"],
                ["task, prompts", f"{base.task.task}: {r.prompts_per_step} prompts x G="
                                  f"{r.group_size} per step, the harness's prompt order"],
                ["generation", f"<= {r.max_response_tokens} new tokens, temperature "
                               f"{r.temperature}, top-p {r.top_p}, top-k {r.top_k} (off)"],
                ["loss", f"GRPO, no KL, token mean (TRL loss_type=dapo), clip "
                         f"{t.clip_eps_low}/{t.clip_eps_high}"],
                ["optimizer", f"torch AdamW, lr {t.lr} constant, weight decay "
                              f"{t.weight_decay}, grad-norm clip {t.grad_clip}, one step per "
                              f"step over micro-batches of {micro} (TRL accumulation "
                              f"{responses // micro})"],
                ["weights", f"{base.model.dtype}, gradient checkpointing "
                            f"{'on' if t.gradient_checkpointing else 'off'}"],
                ["processes", "each side a fresh process per round; TRL without RANK/WORLD_SIZE "
                              "(no DDP); the harness in-process (no Ray)"],
                ["rounds", f"{args.rounds} x {args.steps} steps, order rotated; median over "
                           f"rounds of each round's median of steps 2..{args.steps}"],
                ["versions", f"TRL {metadata.version('trl') if 'trl' in ' '.join(sides) else '-'}, "
                             f"transformers {metadata.version('transformers')}"]]
    sides_md = "\n".join(f"- `{s}`: {SIDES[s][1]}" for s in sides)
    phases_md = "\n".join(f"- {p}: {PHASE_HELP[p]}" for p in PHASES)
    md = (f"# {args.label}\n\n`python -m harness bench vs-trl --rounds {args.rounds} --steps "
          f"{args.steps} --sides {','.join(sides)}`\n\nMachine: {report.machine_line(m)}\n\n"
          + report.markdown_table(["setting", "value"], settings) + "\nSides:\n\n" + sides_md
          + "\n\nPhases (seconds per step):\n\n" + phases_md + "\n\n"
          + report.markdown_table(header, rows))
    data = {"bench": "vs-trl", "label": args.label, "machine": m, "config": base.to_dict(),
            "sides": sides, "results": results, "median": med, "prompts": prompts}
    report.publish(args.label, data, md, args.output_dir)
    return 0


def add_parser(which) -> None:
    from lab.flags import add_config_flags

    p = which.add_parser("vs-trl", help="the same GRPO training here and in TRL's GRPOTrainer, "
                                        "each side in fresh processes (needs the bench extra)")
    p.add_argument("--preset", default="smoke-learn")
    p.add_argument("--rounds", type=int, default=3, help="rounds; each runs every side once")
    p.add_argument("--steps", type=int, default=4, help="steps per side and round (>= 2; "
                                                         "step 1 is not timed)")
    p.add_argument("--sides", default=",".join(DEFAULT_SIDES), help="comma-separated, of: "
                                                             + ", ".join(SIDES))
    p.add_argument("--timeout", type=float, default=1800, help="seconds per side and round")
    p.add_argument("--label", default="vs-trl", help="report name under --output-dir")
    p.add_argument("--output-dir", default=None,
                   help="default: runs/bench/ (results/bench refreshes the committed reports)")
    add_config_flags(p, only=("task", "model", "warm_start", "max_response_tokens",
                              "prompts_per_step", "group_size", "micro_batch_size",
                              "gradient_checkpointing", "zero_stage"))
    p.set_defaults(bench_fn=bench_vs_trl)


if __name__ == "__main__":
    sys.exit(side_main(sys.argv[1:]))
