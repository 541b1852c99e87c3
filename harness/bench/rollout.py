"""``bench rollout``: generated tokens per second of HF ``generate`` at several batch sizes,
and with ``--engine vllm`` (GPU) of vLLM on the same prompts, rows and sampling settings.

Rows are ``batch / G`` training prompts of the task x G samples (sampling at temperature 1,
the policy the run would start from), at most ``--max-response-tokens`` new tokens; every
batch size runs once untimed first. Tokens counted are response tokens up to and including
each row's end-of-turn token.
"""
from __future__ import annotations

import argparse
import time


def bench_rollout(args: argparse.Namespace) -> int:
    import torch

    from harness.bench import report
    from harness.flags import overrides_from
    from harness.config import resolve
    from harness.console import quiet
    from harness.data import load_train
    from harness.models import load_model, load_tokenizer
    from harness.rollouts import HFRollout
    from harness.warmstart.cache import policy_source

    quiet.configure_process()
    config = resolve(args.preset, overrides_from(args))
    from harness import checks

    problems = checks.device_problems(config)
    if problems:
        raise ValueError("; ".join(problems))
    source = policy_source(config)
    tokenizer = load_tokenizer(source)
    device = "cuda" if config.training.use_gpu else "cpu"
    engines = {"hf": HFRollout(load_model(source, dtype=config.model.dtype).to(device),
                               tokenizer, device)}
    if config.rollout.engine == "vllm":
        from harness.rollouts.vllm import VLLMRollout

        r = config.rollout
        engines["vllm"] = VLLMRollout.build(source, tokenizer, config.seed, config.model.dtype,
                                            r.max_prompt_tokens + r.max_response_tokens,
                                            r.vllm_gpu_memory, r.vllm_sync_bucket_mb,
                                            colocated=False)
    train = load_train(config)
    g, r = config.rollout.group_size, config.rollout
    rows = []
    for size in [int(x) for x in args.batch_sizes.split(",")]:
        if size % g:
            raise ValueError(f"batch size {size} is not a multiple of G={g}")
        if size // g > len(train):
            raise ValueError(f"batch size {size} needs {size // g} prompts; the training set "
                             f"has {len(train)}")
        examples = train[:size // g]
        for name, rollout in engines.items():
            for timed in (False, True):
                start = time.perf_counter()
                out = rollout.generate(examples, g, r.max_response_tokens, r.temperature,
                                       r.top_p, r.top_k, seed=config.seed)
                seconds = time.perf_counter() - start
            tokens = int(out.response_mask.sum())
            rows.append([name, size, tokens, seconds, tokens / seconds,
                         out.response_ids.shape[1]])
            print(f"{name:4s} batch {size:4d}: {tokens:6d} tokens in {seconds:6.1f} s = "
                  f"{tokens / seconds:8.1f} tokens/s (longest {out.response_ids.shape[1]})",
                  flush=True)
    m = report.machine()
    what = (f"`bench rollout`: {' vs '.join(engines)} on {device}, {config.model.dtype}, "
            f"{config.task.task} training prompts x G={g}, model "
            f"{config.model.model}{' (warm-started)' if config.warmstart.warm_start else ''}, "
            f"<= {r.max_response_tokens} new tokens, temperature {r.temperature}, torch threads "
            f"{torch.get_num_threads()}")
    md = (f"# {args.label}\n\n{what}\n\nMachine: {report.machine_line(m)}\n\n"
          + report.markdown_table(["engine", "rows", "tokens", "seconds", "tokens/s",
                                   "longest response"],
                                  rows))
    js, mdp = report.write(args.label, {"bench": "rollout", "machine": m, "rows": rows,
                                        "config": config.to_dict()}, md, args.output_dir)
    print(f"wrote {js} and {mdp}")
    return 0


def add_parser(which) -> None:
    from harness.flags import add_config_flags

    p = which.add_parser("rollout", help="generated tokens/s of HF generate (and vLLM with "
                                         "--engine vllm) vs batch size")
    p.add_argument("--preset", default="smoke-learn")
    p.add_argument("--batch-sizes", default="4,8,16,32", help="rows per generate call")
    p.add_argument("--label", default="rollout", help="report name under results/bench/")
    p.add_argument("--output-dir", default=None)
    add_config_flags(p, only=("task", "model", "warm_start", "max_response_tokens",
                              "group_size", "data_dir", "engine", "use_gpu", "dtype",
                              "vllm_gpu_memory"))
    p.set_defaults(bench_fn=bench_rollout)
