"""What code made a result: the commit, whether the tree was dirty, and a fingerprint of the
sources that determine a run's outcome. Recorded when a seed starts and kept through its
resumes; reports pool seeds only when their fingerprints agree.

The fingerprint is a hash of the result-determining sources (every file under ``harness/``,
``methods/``, ``tasks/`` and ``common/`` but the console and the entry point; the lab,
``lab/``: the command line, benches and reports, is outside them: none of it changes what a
run computes), and of the plugin files a run loads. It is exact and costs milliseconds; it is also
conservative: any edit of those files, even one that changes no number, makes seeds made
before and after it not poolable (``--allow-mixed-code`` pools them with a footnote,
``reproduce --rerun-stale`` remakes the old ones). A behavioural canary (a fixed tiny
computation per method, hashed) would let such edits through, but its floating-point results
differ between CPUs and thread counts, which would split seeds made by the same code on two
machines.

Results stored before fingerprints existed carry only the commit read when they were stored;
their fingerprint is ``commit:<that commit>``, so they pool only with seeds stored at the same
commit.

Beside the code, a seed records the kind of machine it started (and each resume ran) on
(``machine``): the CPU's instruction set as torch dispatches on it, whether the CPU has
native bf16 instructions (``--rollout-dtype auto`` and ``--update-dtype auto`` compute in bf16
where it does) and whether oneDNN has bf16 kernels (natively or emulated), AMX, and the GPUs.
The same code and seed sample differently on two kinds (and at two torch thread counts, which
the record keeps and the kind's label names), so a report says which kind made which rows and footnotes a cell or a comparison that spans two;
it does not refuse them (another machine is a replication, not other code). The machine is not
in the fingerprint: nothing here changes what a run computes.
"""
from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import Sequence

from harness.assets import PROJECT_ROOT

SOURCE_ROOTS = ("harness", "methods", "tasks", "common")
# what reads results or talks to the user, never what a run computes
# (the lab -- lab/: CLI, benches, reports -- is outside SOURCE_ROOTS altogether)
NOT_RESULT_SOURCES = ("harness/console", "harness/__main__.py", "harness/provenance.py")
SOURCE_SUFFIXES = (".py", ".json", ".jsonl", ".sql", ".toml", ".txt")
# the same sources as a git pathspec (git diff, git ls-files)
SOURCE_PATHSPEC = ("--", *SOURCE_ROOTS, *(f":(exclude){x}" for x in NOT_RESULT_SOURCES))


def source_files(root: Path = PROJECT_ROOT) -> list[Path]:
    """The result-determining source files, in a fixed order."""
    out = []
    for top in SOURCE_ROOTS:
        for path in (root / top).rglob("*"):
            rel = path.relative_to(root).as_posix()
            if (path.is_file() and path.suffix in SOURCE_SUFFIXES and "__pycache__" not in rel
                    and not any(rel == x or rel.startswith(x + "/") for x in NOT_RESULT_SOURCES)):
                out.append(path)
    return sorted(out, key=lambda p: p.relative_to(root).as_posix())


def fingerprint(root: Path = PROJECT_ROOT, plugins: Sequence[str] = ()) -> str:
    """16 hex digits of a hash over every result-determining source's path and bytes, and
    over the files of the ``plugins`` a run loads (by name and bytes: an edited plugin is
    other code)."""
    from harness.plugins import files

    h = hashlib.sha256()
    for path in source_files(root):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    for path in files(plugins):
        h.update(b"plugin:" + path.name.encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _git(*args: str, root: Path = PROJECT_ROOT) -> tuple[int, str]:
    try:
        done = subprocess.run(["git", *args], cwd=root, text=True, capture_output=True,
                              timeout=20)
    except (OSError, subprocess.SubprocessError):
        return 1, ""
    return done.returncode, done.stdout.strip()


def commit_state(root: Path = PROJECT_ROOT) -> tuple[str, bool]:
    """(HEAD's commit, whether the result-determining sources differ from it: edited, or new
    and not committed); "unknown" outside a git checkout. Edits elsewhere (the README, stored
    results, the reports) do not make a run's code dirty."""
    rc, commit = _git("rev-parse", "--verify", "-q", "HEAD", root=root)
    _, edited = _git("diff", "--name-only", "HEAD", *SOURCE_PATHSPEC, root=root)
    _, new = _git("ls-files", "--others", "--exclude-standard", *SOURCE_PATHSPEC, root=root)
    dirty = any(name.endswith(SOURCE_SUFFIXES) and "__pycache__" not in name
                for name in (edited + "\n" + new).splitlines())
    return (commit if rc == 0 and commit else "unknown"), dirty


def current(root: Path = PROJECT_ROOT, plugins: Sequence[str] = (),
            threads: int | None = None) -> dict:
    """This tree's provenance, with the ``plugins`` a run loads, on this machine: ``{"commit",
    "dirty", "fingerprint", "machine"}`` (commit "unknown" outside a git checkout);
    ``threads``: the torch threads the run computes with (``machine``)."""
    commit, dirty = commit_state(root)
    return {"commit": commit, "dirty": dirty, "fingerprint": fingerprint(root, plugins),
            "machine": machine(threads)}


def _cpu_name() -> str:
    try:  # Linux; elsewhere platform's (often empty) answer
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "unknown"


def _gpus() -> list[str]:
    """The GPUs' names as ``nvidia-smi`` lists them ([] without one): asked of the driver's
    tool, not of torch, so that recording them creates no CUDA context in this process."""
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                              text=True, capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return []
    return [x.strip() for x in done.stdout.splitlines() if x.strip()] if done.returncode == 0 \
        else []


def machine(threads: int | None = None) -> dict:
    """What kind of machine this process computes on: ``{"arch", "cpu", "isa", "bf16", "amx",
    "gpus", "onednn_bf16", "threads"}`` (``isa``: torch's CPU capability, e.g. AVX2 or AVX512;
    ``bf16``: the CPU has native bf16 instructions (``harness.autovalues.bf16_here``: the CPU's
    flags, or oneDNN's check where they cannot be read); ``onednn_bf16``: oneDNN runs bf16
    kernels here, natively or emulated; ``threads``: the torch threads the run computes with,
    ``threads`` where the caller knows them (a run's workers), else this process's: a CPU
    reduction splits its work by threads, so one thread instead of two sums in another order
    and samples another first rollout; None where it cannot be told)."""
    import platform

    from harness.autovalues import bf16_here, onednn_bf16

    out = {"arch": platform.machine() or "unknown", "cpu": _cpu_name(), "isa": "unknown",
           "bf16": bf16_here(), "amx": None, "gpus": _gpus(), "onednn_bf16": onednn_bf16(),
           "threads": threads}
    try:
        import torch

        out["isa"] = str(torch.backends.cpu.get_cpu_capability())
        out["amx"] = bool(torch.cpu._is_amx_tile_supported())
        if threads is None:
            out["threads"] = torch.get_num_threads()
    except (ImportError, AttributeError, RuntimeError):
        pass
    return out


def machine_kind(m: dict | None) -> str | None:
    """The part of a ``machine`` record that decides which kernels run, as one label (the CPU's
    name is left out: two CPUs with the same instructions run the same kernels); None when no
    machine was recorded. A record inferred after the fact (``inferred_from``) knows only
    whether bf16 kernels ran, and says that it is inferred."""
    if not isinstance(m, dict):
        return None
    if m.get("inferred_from"):
        return (f"CPU {'with' if m.get('bf16') else 'without'} bf16 kernels, inferred from "
                "step times")
    parts = [f"{m.get('arch', 'unknown')} {m.get('isa', 'unknown')}"]
    if m.get("bf16") is not None:
        parts.append("bf16" if m["bf16"] else "no bf16")
    if m.get("amx"):
        parts.append("AMX")
    if m.get("threads"):  # recorded since 2026-12-07; a record without it says nothing
        parts.append(f"{m['threads']} thread{'s' * (m['threads'] != 1)}")
    label = ", ".join(parts)
    gpus = list(m.get("gpus") or ())
    for name in dict.fromkeys(gpus):
        label += f" + {gpus.count(name)} x {name}"
    return label


def machine_of_result(data: dict) -> str | None:
    """The kind of machine a stored seed was made on (``machine_kind``), ``a then b`` when a
    resume ran on another kind; None when its provenance records none."""
    prov = of_result(data)
    kinds = [machine_kind(prov.get("machine"))]
    if kinds[0] is not None:
        kinds[0] += _sampled_note(data, prov.get("machine"))
    kinds += [machine_kind(r.get("machine")) for r in prov.get("resumed", ())
              if isinstance(r, dict) and "machine" in r]
    if kinds[0] is None:
        return None
    return " then ".join(dict.fromkeys(k or "not recorded" for k in kinds))


def _sampled_note(data: dict, m: dict) -> str:
    """', sampled in <dtype>' for a seed whose lean engine sampled in another dtype than its
    machine's own choice (``--rollout-dtype auto``: bf16 where the CPU has it natively), ''
    otherwise: the sampling dtype is decided like the machine's kind and is not part of the
    setting, so a cell that pools both says so through the machine's label. A record written
    before ``bf16`` meant native instructions (it has no ``onednn_bf16``) gets no note."""
    rollout = (data.get("config") or {}).get("rollout") or {}
    dtype = rollout.get("rollout_dtype")
    if rollout.get("engine", "lean") != "lean" or dtype not in ("bfloat16", "float32") \
            or not isinstance(m, dict) or "onednn_bf16" not in m or m.get("bf16") is None \
            or m.get("gpus"):
        return ""
    return "" if (dtype == "bfloat16") == bool(m["bf16"]) else f", sampled in {dtype}"


def effective(record: dict) -> dict:
    """A started run's provenance with its resumes folded in: the fingerprint stays its start's
    when every resume ran the same code, else it names every version (``a+b``), which pools
    with nothing else. The start's machine is kept (each resume's is in ``resumed``)."""
    prints = [record["fingerprint"]] + [r["fingerprint"] for r in record.get("resumed", ())]
    out = {k: record[k] for k in ("commit", "dirty", "fingerprint", "machine") if k in record}
    if len(set(prints)) > 1:
        out["fingerprint"] = "+".join(dict.fromkeys(prints))
    if record.get("resumed"):
        out["resumed"] = list(record["resumed"])
    return out


def of_result(data: dict) -> dict:
    """A stored result's provenance; for one stored before fingerprints existed, its commit
    (as read when it was stored) stands in."""
    if isinstance(data.get("provenance"), dict):
        return data["provenance"]
    stored = data.get("git_commit", "unknown")
    return {"commit": stored.removesuffix("-dirty"), "dirty": stored.endswith("-dirty"),
            "fingerprint": f"commit:{stored}"}


def diff_stat(a: str, b: str, root: Path = PROJECT_ROOT) -> str:
    """``git diff --stat a b`` over the result-determining sources, or "" when the repository
    lacks either commit."""
    if "unknown" in (a, b) or a == b:
        return ""
    for c in (a, b):
        if _git("cat-file", "-e", f"{c}^{{commit}}", root=root)[0] != 0:
            return ""
    rc, out = _git("diff", "--stat", a, b, *SOURCE_PATHSPEC, root=root)
    return out if rc == 0 else ""


def mixed_code(paths: Sequence[Path], results: Sequence[dict]) -> str:
    """'' when these stored seeds share one fingerprint; otherwise what differs: each file's
    commit and fingerprint, and the diff between the first two commits where the repository
    has both."""
    provs = [of_result(r) for r in results]
    if len({p["fingerprint"] for p in provs}) <= 1:
        return ""
    lines = [f"  {path}: commit {p['commit'][:10]}{' (dirty)' if p['dirty'] else ''}, "
             f"fingerprint {p['fingerprint'][:40]}" for path, p in zip(paths, provs)]
    commits = list(dict.fromkeys(p["commit"] for p in provs))
    stat = diff_stat(commits[0], commits[1]) if len(commits) > 1 else ""
    if stat:
        shown = stat.splitlines()
        if len(shown) > 9:  # the first files and the summary line
            shown = shown[:8] + [f"... ({len(shown) - 9} more files)"] + shown[-1:]
        lines.append(f"  git diff --stat {commits[0][:10]} {commits[1][:10]}:")
        lines += [f"    {x.strip()}" for x in shown]
    return "\n".join(lines)


def commits_note(results: Sequence[dict]) -> str:
    """A footnote for a cell that pools seeds of several code versions."""
    provs = [of_result(r) for r in results]
    commits = list(dict.fromkeys(p["commit"][:8] + ("-dirty" if p["dirty"] else "")
                                 for p in provs))
    n = len({p["fingerprint"] for p in provs})
    return f"pools seeds of {n} code versions (commits {', '.join(commits)})"
