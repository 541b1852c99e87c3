"""Where a warm-started model lives: ``.cache/warm-start/<model>-<train set>-<key>/``.

The key is a hash of everything that changes the trained weights: the base model, the training
set and its data, the warm-start settings, dtype and prompt cap, and the content of every
demonstration. A folder counts only once its marker file exists (written last, after an atomic
rename), so a killed warm start is redone, never reused half-written.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from harness.assets import CACHE_DIR

MARKER = "warm_start.json"
# bump when the warm start's training code changes what it produces
FORMAT_VERSION = 1


def key_fields(run, data_hash: str) -> dict:
    config = run.config
    w = config.warmstart
    return {
        "version": FORMAT_VERSION,
        "model": config.model.model,
        "dtype": config.model.dtype,
        "train_set": run.train_set.name,
        "data_dir": config.task.data_dir,
        "data": data_hash,
        "steps": w.warm_start_steps,
        "batch": w.warm_start_batch,
        "lr": w.warm_start_lr,
        "layers": w.warm_start_layers,
        "seed": w.warm_start_seed,
        "max_prompt_tokens": config.rollout.max_prompt_tokens,
        # the warm start's optimizer reads these from the run's training settings
        "weight_decay": config.training.weight_decay,
        "grad_clip": config.training.grad_clip,
    }


def folder(run, data_hash: str, cache_dir: Path = CACHE_DIR) -> Path:
    """The folder of the run's warm start whose demonstrations hash to ``data_hash``
    (``Run.warm_start_folder``: this run's own, in the project's cache)."""
    from harness.results import slug

    key = hashlib.sha256(json.dumps(key_fields(run, data_hash), sort_keys=True).encode())
    name = f"{slug(run.config.model.model)}-{run.train_set.name}-{key.hexdigest()[:12]}"
    return cache_dir / "warm-start" / name


def is_complete(path: Path) -> bool:
    return (path / MARKER).is_file()


def made_by(path: Path) -> str:
    """The fingerprint of the code that trained a complete warm start ("" for one cached
    before warm starts recorded it)."""
    info = json.loads((path / MARKER).read_text())
    return str((info.get("provenance") or {}).get("fingerprint", ""))


def policy_source(run) -> str:
    """What the policy is loaded from: the base model, or its warm-started folder, which must
    already exist (``harness sft`` or ``run --warm-start`` makes it)."""
    if not run.config.warmstart.warm_start:
        return run.config.model.model
    path = run.warm_start_folder
    if not is_complete(path):
        raise FileNotFoundError(
            f"the warm-started model {path} does not exist yet; `python -m harness run "
            "--warm-start ...` trains it first, or make it with `python -m harness sft` and the "
            "same flags")
    return str(path)
