"""``bench signal``: what RL's first step would see, without training.

G samples of P training prompts from the policy the run would start from (the base model, or
its warm start with ``--warm-start``), scored by the task's rewards: the format rate and the
share of prompt groups with a non-zero advantage for some reward. The prompts are the ones the
warm start's own probe uses (none of them trained on by the warm start of these settings).
``--one-shot`` measures the cheaper alternative to a warm start: one worked example (a
demonstration from the training set, not one of the probed prompts) appended to each prompt's
system message.
"""
from __future__ import annotations

import argparse
import dataclasses


def with_example(example, demo) -> object:
    """``example`` whose system message ends with one worked example (``demo``'s user turn and
    its reference answer in the layout)."""
    from harness.warmstart.data import user_turns

    shot = ("\n\n**Worked example**\nRequest:\n" + user_turns(demo.example)
            + "\nAnswer:\n" + demo.target)
    messages = [dict(m) for m in example.messages]
    if messages[0]["role"] == "system":
        messages[0]["content"] += shot
    else:
        messages.insert(0, {"role": "system", "content": shot.strip()})
    return dataclasses.replace(example, messages=tuple(messages))


def bench_signal(args: argparse.Namespace) -> int:
    import time

    from lab.bench import report
    from lab.flags import overrides_from
    from harness.config import resolve
    from harness.console import quiet
    from harness.models import load_model, load_tokenizer
    from harness.rollouts import HFRollout
    from harness.warmstart.cache import policy_source
    from harness.run import of_config
    from harness.warmstart.data import encode
    from harness.warmstart.sft import probe_examples, signal_probe, training_schedule

    quiet.configure_process()
    config = resolve(args.preset, overrides_from(args))
    run = of_config(config)
    source, demos = policy_source(run), run.demonstrations
    # the prompts the warm start's own probe uses: none of them is trained on
    pairs, pair_source = encode(load_tokenizer(config.model.model), demos,
                                config.rollout.max_prompt_tokens)
    schedule = training_schedule(len(pairs), config.warmstart)
    examples = probe_examples(demos, pair_source, schedule, args.prompts)
    if args.one_shot:  # the worked example is a demonstration the probe does not use
        shot = next(d for d in demos if all(d.example.id != e.id for e in examples))
        examples = [with_example(ex, shot) for ex in examples]
    rollout = HFRollout(load_model(source), load_tokenizer(source))
    start = time.perf_counter()
    meter = report.LoadMeter().start()
    probe = signal_probe(run, rollout, examples, config.seed)
    seconds = time.perf_counter() - start
    mode = ("warm start" if config.warmstart.warm_start else "base model") + \
        (" + one worked example in the prompt" if args.one_shot else "")
    rewards = ", ".join(f"{k.split('/')[-1]} {v:.2f}" for k, v in probe.items()
                        if k.startswith("reward/"))
    line = (f"{config.task.task}, {mode}: {probe['probe_prompts']} prompts x "
            f"G={probe['probe_group_size']}: format rate {probe.get('format_rate', 0):.2f}, "
            f"groups with signal {probe['groups_with_signal']:.2f}; {rewards} ({seconds:.0f} s)")
    print(line)
    if args.label:
        m = report.machine() | meter.stop()
        report.write(args.label, {"bench": "signal", "machine": m, "mode": mode,
                                  "config": config.to_dict(), "probe": probe,
                                  "seconds": seconds},
                     f"# {args.label}\n\n`bench signal`: {line}\n\nMachine: "
                     f"{report.machine_line(m)}\n", args.output_dir)
    return 0


def add_parser(which) -> None:
    from lab.flags import add_config_flags

    p = which.add_parser("signal", help="format rate and share of groups with reward signal at "
                                        "RL's first step (base model, warm start, one-shot)")
    p.add_argument("--preset", default="smoke")
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--one-shot", action="store_true",
                   help="append one worked example to every prompt's system message")
    p.add_argument("--label", default="", help="also write LABEL.{json,md} under --output-dir")
    p.add_argument("--output-dir", default=None,
                   help="default: runs/bench/ (results/bench refreshes the committed reports)")
    add_config_flags(p, only=("task", "model", "warm_start", "max_response_tokens",
                              "group_size", "data_dir"))
    p.set_defaults(bench_fn=bench_signal)
