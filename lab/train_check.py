"""``python -m lab.train_check FOLDER``: did a stored training run exercise its weight sync?

The GPU check's ``train`` stage exists to show that an update reaches the rollout engine: an
optimizer step happened, the engine then held the policy's new weights (read back exactly: a
sync that reads back differently stops the run, so a stored run's sync succeeded), and the
sampler-vs-policy log-prob gap was measured on responses sampled after that sync. A run without
reward signal updates nothing and proves none of it; this says which of the three a stored
run shows, from its per-step log (``seed<k>.train.jsonl``), and exits 1 when one is missing.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def findings(rows: list[dict]) -> list[tuple[bool, str]]:
    """(passed, what) for each of the three, from one seed's step rows in order."""
    updated = [r["step"] for r in rows if r.get("optimizer_steps", 0) > 0]
    synced = [r["step"] for r in rows if r.get("optimizer_steps", 0) > 0
              and not r.get("sync/skipped") and r.get("vllm/readback_tensors", 0) > 0]
    # every update must have reached the engine: one unchecked sync is one unseen stale step
    unsynced = [s for s in updated if s not in synced]
    after = [r["step"] for r in rows if updated and r["step"] > updated[0]
             and r.get("rollout/logprob_gap") is not None]
    gaps = [r["rollout/logprob_gap"] for r in rows if r["step"] in after]
    by_step = {r["step"]: r for r in rows}
    if not synced:
        sync = "no sync read back after an optimizer step (vllm/readback_tensors)"
    elif unsynced:
        sync = (f"updated at steps {unsynced} without a sync read back there "
                "(vllm/readback_tensors): every update must reach the engine")
    else:
        sync = (f"synced and read back after every update: steps {synced} "
                f"({by_step[synced[0]]['vllm/readback_tensors']:.0f} tensors)")
    return [
        (bool(updated), f"optimizer steps at steps {updated}" if updated else
         "no optimizer step: no response had an advantage (a task and preset without reward "
         "signal at these steps tests no sync)"),
        (bool(synced) and not unsynced, sync),
        (bool(after), f"sampler-vs-policy gap measured after an update at steps {after}: "
         f"{', '.join(f'{g:.2e}' for g in gaps)}" if after else
         "no sampler-vs-policy gap (rollout/logprob_gap) measured on a step after the first "
         "update: run more steps"),
    ]


def main(argv: list[str] | None = None) -> int:
    from harness.results import read_train_log

    parser = argparse.ArgumentParser(prog="python -m lab.train_check", description=__doc__)
    parser.add_argument("folder", help="a results folder holding one or more seed<k>.train.jsonl")
    args = parser.parse_args(argv)
    logs = sorted(Path(args.folder).rglob("seed*.train.jsonl"))
    if not logs:
        print(f"train check: no seed<k>.train.jsonl under {args.folder}", file=sys.stderr)
        return 1
    ok = True
    for log in logs:
        print(f"{log}:")
        for passed, what in findings(read_train_log(log)):
            print(f"  {'ok  ' if passed else 'FAIL'} {what}")
            ok &= passed
    print("train check: " + ("the update reached the engine and was checked there" if ok else
                            "this run does not show that an update reached the engine"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
