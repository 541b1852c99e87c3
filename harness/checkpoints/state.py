"""What a checkpoint holds besides the engine, and how one is written and read on a worker.

Layout of one checkpoint folder (every rank's files merged by Ray Train)::

    engine/                  DeepSpeed's own (model states; ZeRO partitions, optimizer per rank)
    trainer-rank<r>.pt       rank r's RNG states (Python, NumPy, torch, CUDA) and its passes'
                             own state (methods.PassContext.state)
    trainer.json             rank 0: step, sampler position, the per-step log so far
"""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import torch

ENGINE_TAG = "engine"


def rng_state() -> dict:
    out = {"python": random.getstate(), "numpy": np.random.get_state(),
           "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        out["cuda"] = torch.cuda.get_rng_state_all()
    return out


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save(folder: Path, trainer, step: int, history: list[dict]) -> None:
    """Write this rank's part of the checkpoint after ``step`` steps (collective: every rank
    calls it, DeepSpeed synchronises them)."""
    folder.mkdir(parents=True, exist_ok=True)
    trainer.engine.save_checkpoint(str(folder / "engine"), tag=ENGINE_TAG, save_latest=False)
    torch.save({"rng": rng_state(), "step": step, "passes": trainer.pass_state},
               folder / f"trainer-rank{trainer.rank}.pt")
    if trainer.rank == 0:
        sampler = trainer.sampler
        (folder / "trainer.json").write_text(json.dumps({
            "step": step, "history": history,
            "sampler": {"queue": sampler.queue, "rng": _jsonable(sampler.rng.getstate())},
            "world": trainer.world}))


def load(folder: Path, trainer) -> tuple[int, list[dict]]:
    """Restore this rank from a checkpoint folder; (steps done, the log up to there)."""
    meta = json.loads((folder / "trainer.json").read_text())
    if meta["world"] != trainer.world:
        raise ValueError(f"checkpoint {folder} was written by {meta['world']} workers, this run "
                         f"has {trainer.world}: resume with --workers {meta['world']}")
    load_path, _ = trainer.engine.load_checkpoint(str(folder / "engine"), tag=ENGINE_TAG,
                                                  load_module_strict=True)
    if load_path is None:
        raise FileNotFoundError(f"checkpoint {folder} has no DeepSpeed engine state")
    own = torch.load(folder / f"trainer-rank{trainer.rank}.pt", weights_only=False)
    if own["step"] != meta["step"]:
        raise ValueError(f"checkpoint {folder}: rank {trainer.rank} saved step {own['step']}, "
                         f"rank 0 step {meta['step']}")
    set_rng_state(own["rng"])
    trainer.pass_state.clear()
    trainer.pass_state.update(own.get("passes", {}))
    trainer.sampler.queue = list(meta["sampler"]["queue"])
    trainer.sampler.rng.setstate(_tupled(meta["sampler"]["rng"]))
    trainer.sync_weights()  # the rollout copy samples with the restored weights
    return meta["step"], meta["history"]


def _jsonable(state):
    return [_jsonable(x) for x in state] if isinstance(state, tuple) else state


def _tupled(state):
    return tuple(_tupled(x) for x in state) if isinstance(state, list) else state


def parameter_checksum(module) -> str:
    """SHA-256 of every parameter's bytes in name order (a ZeRO-3 module is gathered first):
    two runs end with the same weights exactly when their checksums are equal."""
    import hashlib

    from harness.engine import gathered_parameters

    h = hashlib.sha256()
    with gathered_parameters(module) as named:
        for name, tensor in sorted(named, key=lambda item: item[0]):
            h.update(name.encode())
            h.update(tensor.detach().float().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()
