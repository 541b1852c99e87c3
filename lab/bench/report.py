"""Bench reports: the machine they ran on, a JSON file and a Markdown summary under
``--output-dir`` (default ``runs/bench/``, not tracked; ``--output-dir results/bench``
refreshes the committed reports), written atomically."""
from __future__ import annotations

import os
import platform
import time
from pathlib import Path

# where a bench writes without --output-dir: beside the runs (relative, like run's --results-dir
# default), never over the committed reports in results/bench/
BENCH_DIR = Path("runs") / "bench"


# the CPU flags a CPU bench's speed depends on (vector width, bf16 and AMX kernels)
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "bf16", "asimd")


def machine() -> dict:
    """Cores, threads, torch, the device and the CPU (its name, its kind as stored runs record
    it, and which of ``CPU_FLAGS`` it has): what a bench number depends on."""
    import torch

    from harness import provenance
    from harness.autovalues import cpu_flags
    from harness.results import git_commit

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    here, flags = provenance.machine(), cpu_flags() or frozenset()
    return {"cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__, "device": device, "platform": platform.platform(),
            "python": platform.python_version(), "git_commit": git_commit(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S"), "cpu": here["cpu"],
            "cpu_kind": provenance.machine_kind(here),
            "cpu_flags": [f for f in CPU_FLAGS if f in flags]}


def machine_line(m: dict) -> str:
    line = (f"{m['cores']} cores, {m['torch_threads']} torch threads, torch {m['torch']}, "
            f"{m['device']}, commit {m['git_commit']}, {m['date']}")
    if "cpu_flags" in m:  # reports made before the CPU was recorded have none
        line += (f"; CPU {m['cpu']}, {m['cpu_kind']}, flags "
                 + (", ".join(m["cpu_flags"]) or "none of " + ", ".join(CPU_FLAGS)))
    if "other_cpu_share" in m:
        line += (f"; other processes used {100 * m['other_cpu_share']:.1f} % of the CPUs during "
                 f"the run (load average {m['loadavg_before']:.2f} before, "
                 f"{m['loadavg_after']:.2f} after)")
    return line


def _busy_and_total() -> tuple[float, float]:
    """Seconds of CPU time all processes used since boot (busy) and the CPUs' total."""
    fields = [float(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    hz = os.sysconf("SC_CLK_TCK")
    return (sum(fields[:8]) - idle) / hz, sum(fields[:8]) / hz


class LoadMeter:
    """The CPU share that processes other than this one and its waited-for children took
    between ``start`` and ``stop``: a bench run on a busy machine says so in its report."""

    def start(self) -> "LoadMeter":
        self.loadavg_before = os.getloadavg()[0]
        self.busy0, self.total0 = _busy_and_total()
        self.own0 = self._own()
        return self

    @staticmethod
    def _own() -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def stop(self, own_extra: float = 0.0) -> dict:
        """``own_extra``: CPU seconds of this bench's own processes that ``os.times`` does not
        see (descendants not waited for, such as a Ray cluster the bench started)."""
        busy, total = _busy_and_total()
        other = max(0.0, (busy - self.busy0) - (self._own() - self.own0) - own_extra)
        return {"other_cpu_share": other / max(total - self.total0, 1e-9),
                "loadavg_before": self.loadavg_before, "loadavg_after": os.getloadavg()[0]}


def write(name: str, data: dict, markdown: str, folder: Path | None = None) -> tuple[Path, Path]:
    """``<folder>/<name>.json`` and ``<name>.md``; returns both paths."""
    from harness.results import atomic_write_json, atomic_write_text

    folder = Path(folder or BENCH_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    js, md = folder / f"{name}.json", folder / f"{name}.md"
    atomic_write_json(js, data)
    atomic_write_text(md, markdown)
    return js, md


def publish(name: str, data: dict, markdown: str, folder: Path | None = None) -> None:
    """Write the report (``write``) and print its Markdown and where it went."""
    js, md = write(name, data, markdown, folder)
    print()
    print(markdown)
    print(f"wrote {js} and {md}")


def markdown_table(header: list[str], rows: list[list]) -> str:
    def cell(v) -> str:
        return f"{v:.2f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"
