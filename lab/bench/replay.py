"""``bench replay``: what MRTPO's replay costs, in time and in memory.

- **Time**: the leave-one-out replay of one group (the replay pass of MRTPO, K + 1 context
  passes and K distance passes) against one no-grad forward of the same batch (the prompt as
  the policy saw it + the responses, with the response tokens' log-probabilities), at several
  K. The floor is K + 1 forwards; ``ratio / (K + 1)`` is what the replay costs above it.
  In this process, alternated (forward, replay) over ``--repeats``, median.
- **Memory**: a tiny model with a large vocabulary (151,936 entries: Qwen2.5's, the paper's
  models) replays responses of growing length, each setting in a fresh process, RSS sampled
  every 2 ms. Reported apart: the peak above the starting level during the two context
  forwards, and during the per-token JS distance. The distance is computed a chunk of tokens at
  a time, so its [N, chunk, V] tensors are the only vocabulary-sized ones and its peak should
  not grow with the response length; one unchunked row (chunk = T) at the shortest length shows
  what chunking saves.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

QWEN_VOCAB = 151936
METHOD = "mrtpo"  # the method whose extra passes are timed (a bench preset)


def replay_example(k: int):
    """A prompt with ``k`` constraints, each one reward's in-prompt verifier text."""
    from tasks.base import Example, VerifierInfo

    texts = [f"Constraint {i + 1}: mention the word 'item{i + 1}' exactly twice."
             for i in range(k)]
    user = ("Write a short product description for a kitchen kettle.\n" + "\n".join(texts))
    return Example(id=f"bench-k{k}", reference=None,
                   messages=({"role": "system", "content": "You are a helpful assistant."},
                             {"role": "user", "content": user}),
                   verifier_info=tuple(VerifierInfo(f"c{i + 1}", t, False)
                                       for i, t in enumerate(texts)))


def response_tokens(n: int, t: int, vocab: int, seed: int = 0):
    """[n, t] seeded token ids below ``vocab`` and an all-ones mask."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (n, t), generator=gen)
    return ids, torch.ones(n, t, dtype=torch.long)


@contextmanager
def peak_rss():
    """Yields a dict whose ``mb`` is, on exit, the peak RSS above the level at entry."""
    import psutil

    proc = psutil.Process()
    base = proc.memory_info().rss
    peak = [base]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            time.sleep(0.002)

    out: dict = {}
    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield out
    finally:
        stop.set()
        thread.join()
        out["mb"] = (max(peak[0], proc.memory_info().rss) - base) / 2**20


def _memory_one(responses: int, tokens: int, k: int, chunk: int) -> dict:
    """In this process: one leave-one-out context pair (all texts vs. without reward 1) on a
    tiny 2-layer model with Qwen2.5's vocabulary; the peaks of its forwards and its distance."""
    import torch

    from harness.models import load_tokenizer, tiny_random_config
    from harness.replay import response_hidden
    from methods.contexts import replay_messages
    from methods.tokens import js_distance
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    tok = load_tokenizer("tiny-random")  # SmolLM2's ids all lie below Qwen's vocabulary
    model = AutoModelForCausalLM.from_config(tiny_random_config(QWEN_VOCAB)).eval()
    ex = replay_example(k)
    ids, mask = response_tokens(responses, tokens, QWEN_VOCAB)
    every = [replay_messages(ex, {f"c{i + 1}" for i in range(k)})] * responses
    fewer = [replay_messages(ex, {f"c{i + 1}" for i in range(1, k)})] * responses
    with peak_rss() as fwd:
        h_p = response_hidden(model, tok, every, ids, mask)
        h_q = response_hidden(model, tok, fewer, ids, mask)
    head = model.get_output_embeddings()
    start = time.perf_counter()
    with peak_rss() as dist, torch.no_grad():
        d = js_distance(h_p, h_q, head, 1.0, chunk)
    return {"tokens": tokens, "chunk": chunk, "forward_peak_mb": fwd["mb"],
            "distance_peak_mb": dist["mb"], "distance_seconds": time.perf_counter() - start,
            "vocab": QWEN_VOCAB, "checksum": float(d.sum())}


def time_replay(model, tok, k: int, responses: int, tokens: int, repeats: int) -> dict:
    """Median seconds of one no-grad forward and of the leave-one-out replay at this K."""
    import torch

    import methods
    from harness.replay import PolicyContext, base_and_head, response_hidden
    from methods.tokens import token_logprobs_from_hidden

    ex = replay_example(k)
    ids, mask = response_tokens(responses, tokens, len(tok))
    rewards = tuple(info.reward for info in ex.verifier_info)
    _, head = base_and_head(model)
    method = methods.get(METHOD)
    opts = methods.options(mrtpo_replay="loo")
    ctx = PolicyContext.of(model, tok, [ex] * responses, ids, mask, rewards)

    def forward():
        with torch.no_grad():
            h = response_hidden(model, tok, [list(ex.messages)] * responses, ids, mask)
            token_logprobs_from_hidden(h, ids, head)

    def replay():
        for p in method.passes:
            p.run(ctx, opts)

    times: dict[str, list[float]] = {"forward": [], "replay": []}
    forward()  # warm-up: the first pass pays the allocator's growth
    for _ in range(repeats):
        for name, fn in (("forward", forward), ("replay", replay)):
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    f, r = statistics.median(times["forward"]), statistics.median(times["replay"])
    return {"k": k, "forward_s": f, "replay_s": r, "ratio": r / f, "floor": k + 1,
            "over_floor": r / f / (k + 1), "runs": times}


def bench_replay(args: argparse.Namespace) -> int:
    from lab.bench import report
    from harness.models import load_model, load_tokenizer

    ks = [int(k) for k in args.ks.split(",") if k]
    lengths = [int(t) for t in args.memory_tokens.split(",") if t]
    meter = report.LoadMeter().start()
    timing = []
    if ks:
        model, tok = load_model(args.model).eval(), load_tokenizer(args.model)
        for k in ks:
            row = time_replay(model, tok, k, args.responses, args.tokens, args.repeats)
            timing.append(row)
            print(f"K={k}: forward {row['forward_s']:.2f} s, replay {row['replay_s']:.2f} s, "
                  f"ratio {row['ratio']:.2f} (floor {k + 1})", flush=True)
        del model
    settings = [(t, args.memory_chunk) for t in lengths]
    if lengths and args.memory_chunk < lengths[0]:
        settings.append((lengths[0], lengths[0]))  # unchunked, for contrast
    memory = []
    for t, chunk in settings:
        out = subprocess.run([sys.executable, "-m", "lab.bench.replay", "_memory_one",
                              str(args.memory_responses), str(t), str(args.memory_k), str(chunk)],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"the memory probe at T={t}, chunk {chunk} failed:\n"
                               f"{out.stderr[-2000:]}")
        memory.append(json.loads(out.stdout.strip().splitlines()[-1]))
        m = memory[-1]
        print(f"T={t} chunk {chunk}: forwards +{m['forward_peak_mb']:.0f} MB, "
              f"distance +{m['distance_peak_mb']:.0f} MB", flush=True)
    machine = report.machine() | meter.stop()
    md = [f"# {args.label}\n", f"Machine: {report.machine_line(machine)}\n"]
    if timing:
        md.append(f"## Time: leave-one-out replay vs one no-grad forward\n\nModel {args.model}, "
                  f"one group of {args.responses} responses x {args.tokens} tokens, a prompt with K "
                  f"in-prompt constraint texts; median of {args.repeats} alternated repeats "
                  "after one warm-up forward, seconds.\n")
        md.append(report.markdown_table(
            ["K", "forward s", "replay s", "replay / forward", "floor (K+1)", "over floor"],
            [[r["k"], r["forward_s"], r["replay_s"], r["ratio"], r["floor"], r["over_floor"]]
             for r in timing]))
    if memory:
        md.append(f"\n## Memory: peak above the starting level, vocabulary {QWEN_VOCAB}\n\n"
                  f"Tiny 2-layer model (hidden 64), {args.memory_responses} responses, one "
                  f"leave-one-out context pair at K={args.memory_k}, each row in a fresh "
                  "process.\n")
        md.append(report.markdown_table(
            ["response tokens", "chunk", "forwards MB", "distance MB", "distance s"],
            [[m["tokens"], m["chunk"], m["forward_peak_mb"], m["distance_peak_mb"],
              m["distance_seconds"]] for m in memory]))
    data = {"bench": "replay", "label": args.label, "machine": machine, "model": args.model,
            "responses": args.responses, "tokens": args.tokens, "timing": timing,
            "memory": memory}
    report.publish(args.label, data, "\n".join(md), args.output_dir)
    return 0


def add_parser(which) -> None:
    p = which.add_parser("replay", help="replay time vs one forward at several K; replay memory "
                                        "vs response length at a 152k vocabulary")
    p.add_argument("--model", default="smollm2-135m-instruct", help="model of the time part")
    p.add_argument("--ks", default="2,3,8", help="comma-separated K (rewards) of the time part; "
                                                 "empty: skip it")
    p.add_argument("--responses", type=int, default=4, help="responses of the group (time part)")
    p.add_argument("--tokens", type=int, default=96, help="tokens per response (time part)")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--memory-tokens", default="256,512,1024,2048",
                   help="comma-separated response lengths of the memory part; empty: skip it")
    p.add_argument("--memory-responses", type=int, default=4)
    p.add_argument("--memory-k", type=int, default=3)
    p.add_argument("--memory-chunk", type=int, default=128,
                   help="tokens per distance slice (the replay's default)")
    p.add_argument("--label", default="replay", help="report name under --output-dir")
    p.add_argument("--output-dir", default=None,
                   help="default: runs/bench/ (results/bench refreshes the committed reports)")
    p.set_defaults(bench_fn=bench_replay)


if __name__ == "__main__" and len(sys.argv) == 6 and sys.argv[1] == "_memory_one":
    print(json.dumps(_memory_one(*(int(a) for a in sys.argv[2:]))))
