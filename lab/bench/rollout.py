"""``bench rollout``: generated tokens per second of each rollout engine candidate at several
batch sizes, and how far each one's sampling log-probs are from the fp32 policy's.

Candidates: ``hf`` (transformers ``generate``, fp32: the engine before ``lean``), ``hf-bf16``
(the same with bf16 weights), ``lean-fp32`` and ``lean`` (the lean engine in fp32 and bf16),
``vllm`` (the installed build: CUDA with --use-gpu, or vLLM's CPU build in .venv-vllm). Rows are ``batch / G`` training prompts of the task x G samples (temperature
1, the policy the run would start from), at most ``--max-response-tokens`` new tokens; every
candidate and batch size runs once untimed first. Tokens counted are response tokens up to and
including each row's end-of-turn token. The log-prob gap is the mean |difference| between the
log-prob an engine drew each token with and the fp32 policy's (a forward of the policy on the
sampled responses), for engines that report theirs. Each candidate's start-up (building it)
and one weight sync from the fp32 policy (median of the repeats; vLLM's includes its read-back
and probe) are timed too: a training step pays one sync per generate, so the per-step column
is the mean generate time plus the sync.
"""
from __future__ import annotations

import argparse
import copy
import math
import time
from types import SimpleNamespace

CANDIDATES = ("hf", "hf-bf16", "lean-fp32", "lean", "vllm")


def build(name: str, model, tokenizer, config, source, device: str):
    """One candidate engine over its own copy of ``model`` (fp32)."""
    import torch

    from harness.rollouts import HFRollout
    from harness.rollouts.lean import LeanRollout

    if name == "hf":
        return HFRollout(copy.deepcopy(model).to(device), tokenizer, device)
    if name == "hf-bf16":
        return HFRollout(copy.deepcopy(model).to(device, torch.bfloat16), tokenizer, device)
    if name in ("lean", "lean-fp32"):
        dtype = "float32" if name == "lean-fp32" else "bfloat16"
        return LeanRollout(copy.deepcopy(model), tokenizer, dtype,
                           rows_hint=config.rollout.group_size)
    if name == "vllm":
        from harness.rollouts.vllm import VLLMRollout

        r = config.rollout
        return VLLMRollout.build(source, tokenizer, config.seed, config.model.dtype,
                                 r.max_prompt_tokens + r.max_response_tokens,
                                 r.vllm_gpu_memory, r.vllm_sync_bucket_mb, colocated=False,
                                 kv_cache_gb=r.vllm_kv_cache_gb)
    raise ValueError(f"unknown candidate {name!r}; use some of {', '.join(CANDIDATES)}")


def logprob_gap(model, out, temperature: float) -> float:
    """Mean |engine - policy| log-prob over the sampled tokens (NaN without engine log-probs)."""
    import torch

    from harness.train.logprobs import sequence_logprobs

    if out.logprobs is None:
        return float("nan")
    with torch.no_grad():
        policy = sequence_logprobs(model, out, list(range(len(out.texts))), temperature)
    mask = out.response_mask.bool()
    return float((policy - out.logprobs)[mask].abs().double().mean())


def render(data: dict) -> str:
    """The report's Markdown from its JSON."""
    from lab.bench import report

    rows = data["rows"]
    first = rows[0][0]
    table = [[*row[:7], "n/a" if math.isnan(row[7]) else f"{row[7]:.4f}", *row[8:]]
             for row in rows]
    return (f"# {data['label']}\n\n{data['what']}\n\nMachine: "
            f"{report.machine_line(data['machine'])}\n\n"
            + report.markdown_table(["engine", "rows", "tokens", "seconds", "tokens/s",
                                     f"x {first}", "longest response",
                                     "mean abs log-prob gap to the fp32 policy", "start-up s",
                                     "sync s", "generate + sync s"], table))


def bench_rollout(args: argparse.Namespace) -> int:
    from harness import checks
    from lab.bench import report
    from harness.config import resolve
    from harness.console import quiet
    from harness.data import load_train
    from lab.flags import overrides_from
    from harness.models import load_model, load_tokenizer
    from harness.run import of_config
    from harness.warmstart.cache import policy_source

    quiet.configure_process()
    config = resolve(args.preset, overrides_from(args))
    names = [x for x in args.candidates.split(",") if x]
    unknown = [x for x in names if x not in CANDIDATES]
    if unknown:
        raise ValueError(f"unknown candidate(s) {', '.join(unknown)}; use some of "
                         f"{', '.join(CANDIDATES)}")
    if "vllm" in names:
        problems = checks.device_problems(of_config(
            resolve(args.preset, {**overrides_from(args), "engine": "vllm"})))
        if problems:
            raise ValueError("; ".join(problems))
    run = of_config(config)
    source = policy_source(run)
    tokenizer = load_tokenizer(source)
    device = "cuda" if config.training.use_gpu else "cpu"
    model = load_model(source, dtype="float32").eval()
    engines, startup = {}, {}
    for name in names:
        t0 = time.perf_counter()
        engines[name] = build(name, model, tokenizer, config, source, device)
        startup[name] = time.perf_counter() - t0
    model = model.to(device)  # the fp32 policy the log-prob gaps are measured against
    train = load_train(run)
    g, r = config.rollout.group_size, config.rollout
    rows = []
    meter = report.LoadMeter().start()
    for size in [int(x) for x in args.batch_sizes.split(",")]:
        if size % g:
            raise ValueError(f"batch size {size} is not a multiple of G={g}")
        if size // g > len(train):
            raise ValueError(f"batch size {size} needs {size // g} prompts; the training set "
                             f"has {len(train)}")
        examples = train[:size // g]
        first = None
        for name, rollout in engines.items():
            tokens, seconds, gaps = 0, 0.0, []
            for timed in range(1 + args.repeats):
                start = time.perf_counter()
                out = rollout.generate(examples, g, r.max_response_tokens, r.temperature,
                                       r.top_p, r.top_k, seed=config.seed + timed)
                if timed:
                    seconds += time.perf_counter() - start
                    tokens += int(out.response_mask.sum())
                    gaps.append(logprob_gap(model, out, r.temperature))
            rate = tokens / seconds
            gap = sum(gaps) / len(gaps)
            first = first or rate
            syncs = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                rollout.sync(SimpleNamespace(module=model))
                syncs.append(time.perf_counter() - t0)
            sync = sorted(syncs)[len(syncs) // 2]
            rows.append([name, size, tokens, seconds, rate, rate / first,
                         out.response_ids.shape[1], gap, startup[name], sync,
                         seconds / args.repeats + sync])
            print(f"{name:9s} batch {size:4d}: {tokens:6d} tokens in {seconds:6.1f} s = "
                  f"{rate:8.1f} tokens/s ({rate / first:.2f}x {names[0]}), longest "
                  f"{out.response_ids.shape[1]}, log-prob gap {gap:.4f}, start-up "
                  f"{startup[name]:.1f} s, sync {sync:.2f} s", flush=True)
    m = {**report.machine(), **meter.stop()}
    what = (f"`bench rollout --candidates {args.candidates} --batch-sizes {args.batch_sizes}`: "
            f"on {device}, {config.task.task} training prompts x G={g}, model "
            f"{config.model.model}{' (warm-started)' if config.warmstart.warm_start else ''}, "
            f"<= {r.max_response_tokens} new tokens, temperature {r.temperature}, top-p "
            f"{r.top_p}, top-k {r.top_k}; tokens and seconds summed over {args.repeats} timed runs "
            f"(seeds {config.seed + 1}..{config.seed + args.repeats}, the same for every "
            "candidate) after one untimed")
    data = {"bench": "rollout", "label": args.label, "what": what, "machine": m, "rows": rows,
            "config": config.to_dict()}
    js, mdp = report.write(args.label, data, render(data), args.output_dir)
    print(f"wrote {js} and {mdp}")
    return 0


def add_parser(which) -> None:
    from lab.flags import add_config_flags

    p = which.add_parser("rollout", help="generated tokens/s of rollout engine candidates vs "
                                         "batch size, and their log-prob gap to the policy")
    p.add_argument("--preset", default="smoke-learn")
    p.add_argument("--candidates", default="hf,lean",
                   help=f"comma-separated, the first is the reference: {', '.join(CANDIDATES)}")
    p.add_argument("--batch-sizes", default="8,16,32", help="rows per generate call")
    p.add_argument("--repeats", type=int, default=2, help="timed runs per candidate and size "
                                                         "(summed)")
    p.add_argument("--label", default="rollout", help="report name under --output-dir")
    p.add_argument("--output-dir", default=None,
                   help="default: runs/bench/ (results/bench refreshes the committed reports)")
    add_config_flags(p, only=("task", "model", "warm_start", "max_response_tokens",
                              "group_size", "data_dir", "use_gpu", "dtype", "vllm_gpu_memory",
                              "temperature", "top_p", "top_k"))
    p.set_defaults(bench_fn=bench_rollout)
