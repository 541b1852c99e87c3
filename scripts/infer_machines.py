"""Marks the stored seeds made before machines were recorded with what their own records show
of the machine: whether its CPU had bf16 kernels (``provenance.machine = {"bf16": ...,
"inferred_from": "..."}``; ``harness.provenance.machine_kind`` labels such a record "inferred").

The lean engine samples through oneDNN's bf16 kernels where the CPU has them and through plain
``F.linear`` elsewhere, several times slower: a trained seed's mean ``time/generate`` a step
tells the two apart (on the smoke presets of SmolLM2-135M, two seeds at a time on 2 cores:
4-18 s with the kernels, 50-70 s without; a value between ``--fast`` and ``--slow`` is refused as
ambiguous). An evaluation-only seed (no training step) takes the kind of the trained seed whose
TensorBoard log started closest to its own, within ``--within`` hours (one session, one
machine), and says which. Nothing else of a result changes; a seed that records its machine is
left as it is. ``--check`` writes nothing and exits 1 when a seed would change.

    python scripts/infer_machines.py [--results-dir results] [--check]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.results import atomic_write_json  # noqa: E402


def started(path: Path) -> float | None:
    """When the seed's TensorBoard log was opened (the number in its file name), or None."""
    seed = path.stem  # seedK
    logs = sorted((path.parent / "tensorboard" / seed).glob("events.out.tfevents.*"))
    return float(logs[0].name.split(".")[3]) if logs else None


def infer(results_dir: Path, fast: float, slow: float,
          within_h: float) -> dict[Path, tuple[dict, dict]]:
    """result path -> (its stored result, its machine record), for every stored seed that
    records none."""
    todo = {}
    for path in sorted(results_dir.rglob("seed*.json")):
        if "bench" in path.relative_to(results_dir).parts[:1]:
            continue
        data = json.loads(path.read_text())
        if isinstance(data.get("provenance"), dict) and "machine" not in data["provenance"]:
            todo[path] = data
    known: dict[Path, dict] = {}
    for path, data in todo.items():
        g = data.get("train", {}).get("time/generate/mean")
        if g is None:
            continue
        if fast < g < slow:
            raise SystemExit(f"{path}: time/generate {g:.1f} s a step lies between {fast:g} and "
                             f"{slow:g} s: the machine cannot be told; nothing written")
        known[path] = {"bf16": g <= fast, "inferred_from":
                       f"mean time/generate {g:.1f} s a step (<= {fast:g} s: bf16 kernels; "
                       f">= {slow:g} s: none)"}
    out = dict(known)
    starts = {p: t for p in known if (t := started(p)) is not None}
    for path in todo:
        if path in known:
            continue
        t = started(path)
        near = sorted((abs(t - s), p) for p, s in starts.items()) if t is not None else []
        if not near or near[0][0] > within_h * 3600:
            raise SystemExit(f"{path}: an evaluation-only seed with no trained seed started "
                             f"within {within_h:g} h of it: the machine cannot be told")
        gap, other = near[0]
        out[path] = {"bf16": known[other]["bf16"], "inferred_from":
                     f"the machine of {other.relative_to(results_dir)}, started "
                     f"{gap / 60:.0f} min apart ({known[other]['inferred_from']})"}
    return {p: (todo[p], m) for p, m in out.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results-dir", default=str(ROOT / "results"))
    ap.add_argument("--fast", type=float, default=25.0, help="most seconds a step with bf16")
    ap.add_argument("--slow", type=float, default=40.0, help="fewest seconds a step without")
    ap.add_argument("--within", type=float, default=3.0, help="hours to the nearest trained seed")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if any would change")
    args = ap.parse_args(argv)
    root = Path(args.results_dir)
    found = infer(root, args.fast, args.slow, args.within)
    for path, (data, m) in found.items():
        print(f"{path.relative_to(root)}: {'bf16' if m['bf16'] else 'no bf16'} "
              f"({m['inferred_from']})")
        if not args.check:
            data["provenance"]["machine"] = m
            atomic_write_json(path, data)
    print(f"{len(found)} seed(s) {'would be marked' if args.check else 'marked'}")
    return 1 if args.check and found else 0


if __name__ == "__main__":
    raise SystemExit(main())
