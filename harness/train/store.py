"""A seed's outcome on disk: predictions, then the training log, then the result JSON (the
commit marker), each written atomically."""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Sequence

from harness import orphan
from harness.results import atomic_write_json, atomic_write_jsonl, atomic_write_text, make_record
from tasks.base import Example


def trained_nothing(row: dict) -> bool:
    """A step's log row whose update changed nothing: no optimizer step ran (the signal the
    trainer skips the weight sync on); in logs stored before that was logged, no response was
    forwarded for the update, or before that a zero loss and gradient."""
    for key in ("optimizer_steps", "update_rows"):
        if key in row:
            return row[key] == 0
    return row.get("loss") == 0 and row.get("grad_norm") == 0


def summarise_training(history: list[dict]) -> dict:
    """Means and last values of the step metrics, and ``steps_without_signal``: the steps that
    trained nothing (:func:`trained_nothing`), so a run that trained nothing says so."""
    if not history:
        return {"steps": 0}
    keys = [k for k in history[0] if k != "step"]
    last = history[-1]
    out = {"steps": len(history),
           "steps_without_signal": sum(trained_nothing(h) for h in history)}
    for k in keys:
        vals = [h[k] for h in history if k in h and not math.isnan(h[k])]
        if vals:
            out[f"{k}/mean"] = sum(vals) / len(vals)
    out.update({f"{k}/last": last[k] for k in keys if k in last})
    return out


def store_result(run, examples: list[Example], responses: list[str],
                 scored: dict, history: list[dict], wall: float,
                 train_examples: Sequence[Example] = (), param_checksum: str = "",
                 workers: Sequence[dict] = (), provenance: dict | None = None,
                 log_source: Path | None = None, evaluated_with: Sequence[str] = ()) -> Path:
    """Predictions, then the training log, then the result JSON (the commit marker), at the
    seed's ``SeedRun`` paths. One training evaluated on several benchmarks stores one result
    per benchmark: ``log_source`` is the training's log (copied; moved when it is this run's
    own), ``provenance`` the training's code, ``evaluated_with`` the benchmarks, in order."""
    orphan.check()  # a worker whose job was killed stores nothing (a resume may be running)
    config, path = run.config, run.result
    items = {it["id"]: it for it in scored.get("items", [])}
    partial = run.partial_log
    source = Path(log_source) if log_source is not None else partial
    if source != partial and source.is_file():
        atomic_write_text(path.with_suffix(".train.jsonl"), source.read_text())
    elif partial.is_file():
        os.replace(partial, path.with_suffix(".train.jsonl"))
    atomic_write_jsonl(path.with_suffix(".predictions.jsonl"),
                       [{"id": ex.id, "response": text, **{k: v for k, v in
                         items.get(ex.id, {}).items() if k != "id"}}
                        for ex, text in zip(examples, responses)])
    atomic_write_json(path, make_record(
        config, scored["metrics"],
        train={**summarise_training(history), "final_param_sha256": param_checksum},
        wall_seconds=wall,
        train_examples=train_examples, eval_examples=examples,
        problems=scored.get("problems", ()), workers=workers,
        provenance=provenance if provenance is not None else run.provenance(),
        evaluated_with=evaluated_with))
    return path
