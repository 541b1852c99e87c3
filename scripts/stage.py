"""One stage of scripts/gpu_check.sh: run a command, its output also in a log file, under a
limit on the stage's own CPU time, and report the verdict in the check's report.

A wall-clock limit alone turns a busy machine into a failed stage (the engine stage ran past
300 s on a loaded 2-core machine). Here the stage's budget is the CPU time its own processes
use (which another job's load barely changes); the wall clock only catches a stage that stops
making progress, and when it runs out the machine's load decides what is said:

- the command exits non-zero: failed (exit its status), whatever the load;
- its processes used more than ``--cpu-seconds`` of CPU: failed (124);
- it used almost no CPU for ``--stall-seconds`` while running: hung (124);
- the wall clock passed ``--wall-seconds`` while other processes took more than a quarter of
  the machine's CPU: the machine was busy, not a verdict on the stage (75, EX_TEMPFAIL);
  on an idle machine: failed (124).

Standard library only (it runs before any environment is installed); Linux (/proc).
Usage: python3 scripts/stage.py NAME LOG REPORT --cpu-seconds C --wall-seconds W -- CMD...
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time

TICK = os.sysconf("SC_CLK_TCK")
BUSY_SHARE = 0.25  # others' share of the machine's CPU past which a slow stage is the load's
BUSY, FAILED = 75, 124


def machine_busy_ticks() -> tuple[int, int]:
    """(busy, total) CPU ticks of the whole machine so far (/proc/stat)."""
    with open("/proc/stat") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def session_ticks(sid: int, seen: dict[int, int]) -> int:
    """CPU ticks of every process of the stage's session, living or gone (``seen`` keeps the
    last count of each process, so one that exited still counts)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                rest = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(rest[3]) == sid:  # field 6, session id
            seen[int(entry)] = int(rest[11]) + int(rest[12])  # utime + stime
    return sum(seen.values())


def run(cmd: list[str], log: str, cpu_limit: float, wall_limit: float, stall: float,
        poll: float = 0.5) -> tuple[int, str, dict]:
    """(exit status, verdict, figures) of one stage."""
    busy0, total0 = machine_busy_ticks()
    start = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)

        def copy():
            for line in iter(proc.stdout.readline, b""):
                sys.stdout.buffer.write(line)
                sys.stdout.flush()
                out.write(line.decode(errors="replace"))
                out.flush()

        reader = threading.Thread(target=copy, daemon=True)
        reader.start()
        seen: dict[int, int] = {}
        last_cpu, last_progress = 0, start
        verdict = ""
        while proc.poll() is None:
            time.sleep(poll)
            cpu = session_ticks(proc.pid, seen)
            now = time.monotonic()
            if cpu - last_cpu >= 0.01 * (now - last_progress) * TICK:
                last_cpu, last_progress = cpu, now
            if cpu / TICK > cpu_limit:
                verdict = f"ran past its {cpu_limit:.0f} CPU-seconds"
            elif now - last_progress > stall:
                verdict = f"hung: no CPU used for {stall:.0f} s"
            elif now - start > wall_limit:
                verdict = "wall"
            if verdict:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                break
        reader.join(5)
    wall = time.monotonic() - start
    cpu = session_ticks(proc.pid, seen) / TICK
    busy1, total1 = machine_busy_ticks()
    cores = os.cpu_count() or 1
    others = max(0.0, (busy1 - busy0) / TICK - cpu)  # CPU-seconds other processes used
    share = others / max(wall * cores, 1e-9)
    figures = {"wall_s": wall, "cpu_s": cpu, "others_share": share}
    if verdict == "wall":
        if share > BUSY_SHARE:
            return BUSY, (f"not decided: the machine was busy (other processes took "
                          f"{share:.0%} of its {cores} cores) and the stage was still working "
                          f"after {wall_limit:.0f} s; rerun it on a quieter machine"), figures
        return FAILED, f"ran past its {wall_limit:.0f} s on an idle machine", figures
    if verdict:
        return FAILED, verdict, figures
    rc = proc.returncode
    return rc, ("passed" if rc == 0 else f"failed (exit {rc})"), figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("name")
    parser.add_argument("log")
    parser.add_argument("report", help="the check's report file: one row per stage is added")
    parser.add_argument("--cpu-seconds", type=float, required=True)
    parser.add_argument("--wall-seconds", type=float, required=True)
    parser.add_argument("--stall-seconds", type=float, default=120)
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv:
        parser.error("give the stage's command after --")
    cut = argv.index("--")
    args, cmd = parser.parse_args(argv[:cut]), argv[cut + 1:]
    rc, verdict, f = run(cmd, args.log, args.cpu_seconds, args.wall_seconds, args.stall_seconds)
    with open(args.report, "a") as fh:
        fh.write(f"| {args.name} | {verdict} | {f['wall_s']:.0f} | {f['cpu_s']:.0f} | "
                 f"{f['others_share']:.0%} |\n")
    print(f"   {args.name}: {verdict} (wall {f['wall_s']:.0f} s, own CPU {f['cpu_s']:.0f} s, "
          f"other processes {f['others_share']:.0%} of the machine)", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
