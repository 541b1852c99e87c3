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
from harness.config import RunConfig

MARKER = "warm_start.json"
# bump when the warm start's training code changes what it produces
FORMAT_VERSION = 1


def key_fields(config: RunConfig, data_hash: str) -> dict:
    from harness.data import choose_train_set

    w = config.warmstart
    return {
        "version": FORMAT_VERSION,
        "model": config.model.model,
        "dtype": config.model.dtype,
        "train_set": choose_train_set(config).name,
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


def cache_key(config: RunConfig, data_hash: str) -> str:
    blob = json.dumps(key_fields(config, data_hash), sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def folder(config: RunConfig, data_hash: str, cache_dir: Path = CACHE_DIR) -> Path:
    from harness.data import choose_train_set
    from harness.results import slug

    name = f"{slug(config.model.model)}-{choose_train_set(config).name}-{cache_key(config, data_hash)}"
    return cache_dir / "warm-start" / name


def warm_start_folder(config: RunConfig, cache_dir: Path = CACHE_DIR) -> Path:
    """The run's warm-started model folder (computing the key loads the demonstrations)."""
    from harness.warmstart.data import content_hash, demonstrations

    return folder(config, content_hash(demonstrations(config)), cache_dir)


def is_complete(path: Path) -> bool:
    return (path / MARKER).is_file()


def made_by(path: Path) -> str:
    """The fingerprint of the code that trained a complete warm start ("" for one cached
    before warm starts recorded it)."""
    info = json.loads((path / MARKER).read_text())
    return str((info.get("provenance") or {}).get("fingerprint", ""))


def policy_source(config: RunConfig) -> str:
    """What the policy is loaded from: the base model, or its warm-started folder, which must
    already exist (``harness sft`` or ``run --warm-start`` makes it)."""
    if not config.warmstart.warm_start:
        return config.model.model
    path = warm_start_folder(config)
    if not is_complete(path):
        raise FileNotFoundError(
            f"the warm-started model {path} does not exist yet; `python -m harness run "
            "--warm-start ...` trains it first, or make it with `python -m harness sft` and the "
            "same flags")
    return str(path)
