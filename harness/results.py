"""The results store: one JSON per (task, method, model, setting, seed), written atomically.

Layout::

    results/<task>/<method>/<model>/<setting>/seed<k>.json              metrics + config + versions
    results/<task>/<method>/<model>/<setting>/seed<k>.predictions.jsonl  the evaluated responses
    results/<task>/<method>/<model>/<setting>/seed<k>.train.jsonl        per-step training metrics

``setting`` is the preset's name, with a short hash when a result-changing field was overridden.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable

from harness.config import RunConfig, setting_name

PROJECT_ROOT = Path(__file__).resolve().parent.parent
VERSIONED_PACKAGES = ("torch", "transformers", "deepspeed", "ray", "accelerate", "tokenizers",
                      "numpy", "scipy", "bfcl-eval", "vllm")


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temporary file in the same folder and rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def atomic_write_jsonl(path: Path, rows: Iterable[Any]) -> None:
    atomic_write_text(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))


def slug(text: str) -> str:
    """A path component. A local model folder becomes its last part plus a short hash of its
    absolute path, so two checkpoints both called ``hf`` never share a results folder."""
    path = Path(text).expanduser()
    if path.is_dir():
        digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:6]
        text = f"{path.resolve().name}-{digest}"
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", text).strip("_") or "model"


def run_dir(config: RunConfig) -> Path:
    """``<results>/<task>/<method>/<model>/<setting>``; the setting names the training set
    when it is not the task's offline default (e.g. ``smoke+rlla``)."""
    from harness.data import choose_train_set, offline_train_set

    setting = setting_name(config)
    chosen = choose_train_set(config).name
    if chosen != offline_train_set(config.task.task):
        setting += f"+{chosen}"
    return (Path(config.results_dir) / config.task.task / config.method.method
            / slug(config.model.model) / setting)


def identity(config: RunConfig) -> dict:
    """The fields of a stored config that must match for its seed to count as this setting."""
    from harness.config import all_fields

    out = {}
    data = config.to_dict()
    for name, (section, f) in all_fields().items():
        if f.metadata.get("identity", True) and name not in ("seed",):
            out[name] = data[section][name] if section else data[name]
    out.pop("train_data", None)  # resolved into the folder name instead
    return out


def check_stored(config: RunConfig, path: Path) -> None:
    """A stored seed made with other settings (an edited preset, say) must not be pooled."""
    stored = RunConfig.from_dict(load_result(path)["config"])
    ours, theirs = identity(config), identity(stored)
    diff = {k: (theirs.get(k), v) for k, v in ours.items() if theirs.get(k) != v}
    if diff:
        raise ValueError(f"{path} was made with other settings ({diff}, stored vs requested); "
                         "rerun it with --force or use another --results-dir")


def result_path(config: RunConfig) -> Path:
    return run_dir(config) / f"seed{config.seed}.json"


def package_versions() -> dict[str, str]:
    out = {}
    for name in VERSIONED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def git_commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=PROJECT_ROOT,
                              text=True, capture_output=True, timeout=10)
        commit = head.stdout.strip() if head.returncode == 0 else ""
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=PROJECT_ROOT, text=True, capture_output=True,
                               timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (commit or "unknown") + ("-dirty" if dirty else "")


def load_result(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc}); delete it to rerun that seed") from exc


def stored_seeds(config: RunConfig) -> dict[int, Path]:
    """Seeds already stored for this (task, method, model, setting)."""
    out = {}
    folder = run_dir(config)
    if folder.is_dir():
        for p in folder.glob("seed*.json"):
            m = re.fullmatch(r"seed(\d+)\.json", p.name)
            if m:
                out[int(m.group(1))] = p
    return out
