"""``bench launch``: what running on Ray Train costs a real ``harness run``: the start-up before
step 1, and the CPU that every process but the training workers takes while they train.

The run is ``python -m harness run`` in a fresh subprocess (its own Ray instance), with nothing
else to do on the machine. Its process tree is sampled every ``--interval`` seconds: the
training workers are the processes whose command line names Ray Train's worker actor; every
other process of the tree (the driver, Ray's GCS, raylet and agents, Train's controller and
helper actors) is control. Step ends are read from the run's training log as its lines appear.
Reported: start-up (process start to the start of step 1), the median step, and the control
processes' CPU seconds over the training steps as a share of the machine's CPU time then
(``cores x wall``) and of the workers' own CPU time, with the busiest control processes.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.assets import PROJECT_ROOT

CHECKOUT = f"{PROJECT_ROOT}/"  # stripped from what a committed report shows

WORKER_MARK = "RayTrainWorker"


def tree_cpu(root_pid: int) -> dict[int, tuple[str, float]]:
    """pid -> (title, CPU seconds so far) of ``root_pid`` and all its descendants."""
    import psutil

    out = {}
    try:
        root = psutil.Process(root_pid)
        procs = [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        return out
    for p in procs:
        try:
            t = p.cpu_times()
            # paths relative to the checkout: a committed report names no machine's folders
            title = " ".join(p.cmdline()).replace(CHECKOUT, "")[:120] or p.name()
            out[p.pid] = (title, t.user + t.system)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return out


def short(title: str) -> str:
    """A readable name for a process: Ray's actor title or the executable."""
    if title.startswith("ray::"):
        return title.split()[0]
    first = Path(title.split()[0]).name if title else "?"
    return f"{first} {' '.join(title.split()[1:3])}".strip()


# what each start-up mark ends (harness.startup): the phase is the time since the mark before
MARK_HELP = {
    "cli_ready": "Python start, the CLI's imports",
    "run_checked": "the run resolved and checked (tasks, methods, data, model files)",
    "model_prepared": "the embedded model's files made ready",
    "ray_started": "ray.init: a local GCS, raylet and worker pool",
    "warm_start_ready": "the cached warm start found",
    "fit_called": "Ray Train imported, the seed's folders",
    "worker_process_started": "(the worker's process, often pooled by Ray ahead of time)",
    "worker_entry": "Ray Train's controller, placement group, worker actor and process group",
    "worker_imported": "the worker's imports (torch, transformers, DeepSpeed, the harness)",
    "trainer_begin": "the run resolved again from its stored config",
    "rollout_engine_built": "tokenizer, the model loaded, the rollout engine built",
    "deepspeed_engine_built": "DeepSpeed's engine (its own model copy, the optimizer)",
    "trainer_ready": "the training data, the first weight sync",
    "first_step_begins": "checkpoint lookup, the training log, the trackers",
    # the Ray floor's (lab.bench.ray_floor)
    "imports": "Python start, importing the harness's backend",
    "fit_returned": "the empty function's fit winding down",
}


def timeline(marks: dict[str, float]) -> list[list]:
    """[mark, seconds since the command started, the phase it ends, what that phase is] in time
    order; the worker process's own start is shown but ends no phase."""
    rows, last = [], 0.0
    for name, t in sorted(marks.items(), key=lambda kv: kv[1]):
        if name == "worker_process_started":
            rows.append([name, t, "", MARK_HELP[name]])
            continue
        rows.append([name, t, t - last, MARK_HELP.get(name, "")])
        last = t
    return rows


def ray_floor() -> dict[str, float]:
    """``lab.bench.ray_floor``'s marks, from a fresh process."""
    import json

    out = Path(tempfile.mkdtemp(prefix="ray-floor-")) / "floor.json"
    subprocess.run([sys.executable, "-m", "lab.bench.ray_floor", str(out)], check=True,
                   stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def bench_launch(args: argparse.Namespace) -> int:
    import os

    from lab.bench import report

    out_dir = Path(tempfile.mkdtemp(prefix="bench-launch-"))
    cmd = [sys.executable, "-m", "harness", "run", "--preset", args.preset, "--task", args.task,
           "--method", args.method, "--steps", str(args.steps), "--seeds", "1",
           "--results-dir", str(out_dir), "--force", "--eval-limit", "2", *args.extra]
    print("running:", " ".join(cmd), flush=True)
    meter = report.LoadMeter().start()
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    samples: list[tuple[float, dict]] = []  # (seconds since start, tree_cpu)
    step_seen: list[float] = []  # when each training-log line appeared
    log = None
    while proc.poll() is None:
        now = time.perf_counter() - start
        samples.append((now, tree_cpu(proc.pid)))
        if log is None:
            found = list(out_dir.rglob("*.train.jsonl*"))
            log = found[0] if found else None
        if log is not None and log.exists():
            lines = len(log.read_text().splitlines())
            while len(step_seen) < lines:
                step_seen.append(now)
        time.sleep(args.interval)
    err = proc.stderr.read()
    if proc.returncode != 0:
        raise RuntimeError(f"the run failed ({proc.returncode}):\n{err[-3000:]}")
    import json

    result_logs = list(out_dir.rglob("*.train.jsonl"))
    history = [json.loads(x) for x in result_logs[0].read_text().splitlines()]
    if len(step_seen) < len(history):
        raise RuntimeError("the run's steps ended between samples too fast to time; lower "
                           "--interval")
    steps = [h["time/step"] for h in history]
    first_start = step_seen[0] - steps[0]
    train_end = step_seen[len(history) - 1]

    def at(t: float) -> dict:
        return min(samples, key=lambda s: abs(s[0] - t))[1]

    a, b = at(first_start), at(train_end)
    control: dict[str, float] = {}
    workers = 0.0
    for pid, (title, cpu) in b.items():
        used = cpu - a.get(pid, (title, 0.0))[1]
        if WORKER_MARK in title:
            workers += used
        else:
            control[short(title)] = control.get(short(title), 0.0) + used
    wall = train_end - first_start
    cores = len(os.sched_getaffinity(0))
    total_control = sum(control.values())
    # every process's CPU as last seen (workers end before the driver's last sample); the
    # driver itself is a waited-for child, which os.times counts already
    last_seen: dict[int, float] = {}
    for _, tree in samples:
        last_seen.update({pid: cpu for pid, (_, cpu) in tree.items()})
    tree_total = sum(cpu for pid, cpu in last_seen.items() if pid != proc.pid)
    m = {**report.machine(), **meter.stop(own_extra=tree_total)}
    marks = {k.split("/", 2)[2]: v for k, v in history[0].items()
             if k.startswith("time/startup/")}
    # the run's own clock where it has one (the sampling's otherwise)
    first_start = marks.get("first_step_begins", first_start)
    floor = ray_floor() if args.ray_floor else {}
    phases = {p: statistics.median(h.get(f"time/{p}", 0.0) for h in history[1:] or history)
              for p in ("generate", "rewards", "forward", "backward", "optimizer", "sync")}
    busiest = sorted(control.items(), key=lambda kv: -kv[1])[:8]
    summary = {
        "startup_s": first_start, "median_step_s": statistics.median(steps[1:] or steps),
        "steps": steps, "training_wall_s": wall, "cores": cores,
        "control_cpu_s": total_control, "worker_cpu_s": workers,
        "control_share_of_machine": total_control / (cores * wall),
        "control_per_worker_cpu": total_control / max(workers, 1e-9),
        "control_by_process": dict(busiest), "total_wall_s": time.perf_counter() - start,
        "startup_marks_s": marks, "median_phases_s": phases, "ray_floor_marks_s": floor}
    print(json.dumps(summary, indent=1))
    what = (f"`bench launch --task {args.task} --method {args.method} --steps {args.steps}"
            f"{' ' + ' '.join(args.extra) if args.extra else ''}`: `harness run --preset "
            f"{args.preset}` in a fresh process, its process tree sampled every "
            f"{args.interval} s")
    table = report.markdown_table(
        ["start-up s", "median step s", "control CPU s (training)", "worker CPU s",
         "control share of the machine", "control / worker CPU"],
        [[first_start, summary["median_step_s"], total_control, workers,
          f"{100 * summary['control_share_of_machine']:.1f} %",
          f"{100 * summary['control_per_worker_cpu']:.1f} %"]])
    by = report.markdown_table(["control process", "CPU s during training"],
                               [[k, v] for k, v in busiest])
    split = report.markdown_table(["phase (median step)", "s"], [[k, v] for k, v in phases.items()])
    worker = report.markdown_table(
        ["start-up mark (harness.startup)", "s since the command started", "phase s",
         "the phase"],
        timeline(marks))
    md = (f"# {args.label}\n\n{what}\n\nMachine: {report.machine_line(m)}\n\n{table}\n"
          f"{split}\n{worker}\n{by}")
    if floor:
        md += ("\nRay's own floor (`python -m lab.bench.ray_floor`, a fresh process after the run): "
               "`ray.init` as the harness starts it, then a Ray Train fit of one worker whose "
               "function does nothing\n\n" + report.markdown_table(
                   ["mark", "s since the process started", "phase s", "the phase"],
                   timeline(floor)))
    # the command as run, its temporary results folder and interpreter named, not their paths
    shown = ["<a temporary folder>" if c.startswith(tempfile.gettempdir())
             else c.replace(CHECKOUT, "") for c in cmd]
    report.publish(args.label, {"bench": "launch", "machine": m, "command": shown, **summary},
                   md, args.output_dir)
    return 0


def add_parser(which) -> None:
    p = which.add_parser("launch", help="a real run's start-up time and the CPU share of Ray's "
                                        "control processes while it trains")
    p.add_argument("--preset", default="smoke-learn")
    p.add_argument("--task", default="bfcl")
    p.add_argument("--method", default="grpo")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--interval", type=float, default=0.25, help="sampling period, seconds")
    p.add_argument("--ray-floor", action="store_true",
                   help="also measure Ray's own start-up (ray.init, a Ray Train fit of an empty "
                        "function) in a fresh process after the run")
    p.add_argument("--label", default="launch", help="report name under --output-dir")
    p.add_argument("--output-dir", default=None,
                   help="default: runs/bench/ (results/bench refreshes the committed reports)")
    p.add_argument("extra", nargs="*", help="more `harness run` flags (after --)")
    p.set_defaults(bench_fn=bench_launch)
