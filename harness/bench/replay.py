"""``bench replay``: peak extra memory and time of MRTPO's per-token JS distance with and
without chunking (each setting in a fresh process, RSS sampled every 2 ms)."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time


def _replay_one(model_name: str, responses: int, tokens: int, chunk: int) -> dict:
    """In this process: the distances of ``responses`` x ``tokens`` random response tokens
    between two contexts; returns the peak RSS above the level before the distance pass."""
    import psutil
    import torch

    from harness.models import load_model
    from harness.replay import js_distance

    torch.manual_seed(0)
    model = load_model(model_name)
    head = model.get_output_embeddings()
    h = model.config.hidden_size
    h_p, h_q = torch.randn(2, responses, tokens, h)
    proc = psutil.Process()
    base = proc.memory_info().rss
    peak = [base]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            time.sleep(0.002)

    thread = threading.Thread(target=sample)
    thread.start()
    start = time.perf_counter()
    with torch.no_grad():
        d = js_distance(h_p, h_q, head, 1.0, chunk)
    seconds = time.perf_counter() - start
    stop.set()
    thread.join()
    return {"chunk": chunk, "extra_peak_mb": (peak[0] - base) / 2**20, "seconds": seconds,
            "vocab": head.out_features, "checksum": float(d.sum())}


def bench_replay(args: argparse.Namespace) -> int:
    rows = []
    for chunk in [int(c) for c in args.chunks.split(",")]:
        out = subprocess.run([sys.executable, "-m", "harness.bench.replay", "_replay_one", args.model,
                              str(args.responses), str(args.tokens), str(chunk)],
                             capture_output=True, text=True, check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"replay JS distance: {args.responses} responses x {args.tokens} tokens, "
          f"vocabulary {rows[0]['vocab']}, model {args.model}")
    print(f"{'chunk':>7} {'extra peak MB':>14} {'seconds':>8}")
    for r in rows:
        label = f"{r['chunk']}" + (" (=T)" if r["chunk"] >= args.tokens else "")
        print(f"{label:>7} {r['extra_peak_mb']:14.0f} {r['seconds']:8.2f}")
    same = all(abs(r["checksum"] - rows[0]["checksum"]) < 1e-3 * max(1, abs(rows[0]["checksum"]))
               for r in rows)
    print(f"same distances in every setting: {same}")
    return 0



if __name__ == "__main__" and len(sys.argv) == 6 and sys.argv[1] == "_replay_one":
    print(json.dumps(_replay_one(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                                 int(sys.argv[5]))))
