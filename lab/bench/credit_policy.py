"""``bench credit --responses policy``: the ground-truth credit benchmark on the policy's own
tool-calling responses. The policy samples a batch as at a training step (``bench
localisation``'s batch, warm-started where the preset says), the prefix-viability oracle
(``lab.bench.viability``) finds in every response the token that decided its format: for a
failure, the first token after which no continuation can pass (``early``), or, where every
prefix stays viable, the last token, the failure decided by stopping (``end``; a response
cut at the token limit, ``cut``, has no deciding token and is not read); every prefix
of every response is certified against the checker (a disagreement raises; prefixes neither
certified are counted). Each credit source's format profile is then read at that token with
``bench credit``'s statistics (mass ratio, precision at k = 1 against chance), over the failed
responses whose format advantage is nonzero. Correctness has no such oracle here (a graded
reward: no single token fixes its value), so it is not read.
"""
from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from dataclasses import replace
from typing import Sequence

SIDES = ("failed", "early", "end")  # every failure; those decided by a token; by stopping
REWARD = "format"


def decisions(ctx) -> list[dict]:
    """Per response of the pass context: the oracle's ``decided_at`` on its tokens, with
    ``tokens`` (its length) and ``skipped`` (why it is not read, or None)."""
    from lab.bench.viability import decided_at, has_marker
    from methods.mrtpo.diagnostics import token_char_spans
    from tasks.tools.rewards import gold_output

    k = list(ctx.reward_names).index(REWARD)
    special = set(ctx.tokenizer.all_special_ids)
    out = []
    for n, ex in enumerate(ctx.examples):
        t = int(ctx.response_mask[n].sum())
        ids = ctx.response_ids[n, :t].tolist()
        joined, ranges = token_char_spans(ctx.tokenizer, ids)
        pieces = ["" if i in special else joined[a:b] for i, (a, b) in zip(ids, ranges)]
        passed = float(ctx.rewards[n, k]) > 0.5
        why = ("it has no token" if t == 0 else
               "its tokens decoded one by one differ from its text"
               if "".join(pieces).strip() != ctx.texts[n].strip() else
               "its text holds a chat marker as plain text" if has_marker("".join(pieces))
               else None)
        if why:
            out.append({"skipped": why, "tokens": t, "where": None, "index": None,
                        "unknown": 0})
            continue
        got = decided_at(gold_output(ex), pieces, passed)
        if got["where"] == "end" and ids[-1] not in special:
            got["where"] = "cut"  # at the token limit: no token of the model's decided it
        out.append(got | {"tokens": t, "skipped": None})
    return out


def deciding_mask(ctx, found: Sequence[dict]):
    """[N, 3, T] bool: per response, the deciding token under each of ``SIDES``."""
    import torch

    n, t = ctx.response_ids.shape
    mask = torch.zeros(n, len(SIDES), t, dtype=torch.bool)
    for i, d in enumerate(found):
        if d["skipped"] or d["where"] not in ("early", "end"):
            continue
        at = d["index"] if d["where"] == "early" else d["tokens"] - 1
        mask[i, 0, at] = True
        mask[i, SIDES.index(d["where"]), at] = True
    return mask


def probe(config, sources: Sequence[str], seed: int) -> tuple[dict, dict]:
    """One seed's batch: ({source: statistics}, facts)."""
    import torch

    from lab.bench.credit import records, summarise
    from lab.bench.credit_report import profile
    from lab.bench.localisation import sampled_context

    trainer, ctx, generate_s = sampled_context(config)
    if REWARD not in ctx.reward_names:
        raise ValueError(f"--responses policy reads the tool-calling format reward; task "
                         f"{trainer.task.name!r} has {', '.join(ctx.reward_names)}")
    t0 = time.perf_counter()
    found = decisions(ctx)
    oracle_s = time.perf_counter() - t0
    deciding = deciding_mask(ctx, found)
    k = list(ctx.reward_names).index(REWARD)
    rewards = ctx.rewards[:, [k] * len(SIDES)]
    failed = torch.ones(rewards.shape, dtype=torch.bool)
    prompts = [ex.id for ex in ctx.examples]
    means = torch.stack([ctx.rewards[ctx.group == g, k].mean() for g in ctx.group.tolist()])
    # the responses the statistics read: a deciding token and a nonzero format advantage
    read = (deciding[:, 0].any(dim=1) & (ctx.rewards[:, k] != means)).tolist()
    out, seconds, peaks = {}, {}, {}
    for spec in sources:
        t1 = time.perf_counter()
        w = profile(spec, ctx, trainer.options, seed)
        seconds[spec] = time.perf_counter() - t1
        wk = w[:, [k] * len(SIDES)]
        out[spec] = summarise(records(wk, ctx.response_mask, deciding, rewards, ctx.group,
                                      SIDES, failed), prompts, seed)
        peaks[spec] = [int(w[n, k, :d["tokens"]].argmax()) for n, d in enumerate(found)
                       if read[n] and not bool(torch.isnan(w[n, k]).any())]
    where = Counter(d["where"] or "skipped" for d in found)
    early = [d["index"] for d in found if d["where"] == "early"]
    facts = {"responses": len(found), "where": dict(where),
             "skipped_why": dict(Counter(d["skipped"] for d in found if d["skipped"])),
             "unknown_prefixes": sum(d["unknown"] for d in found),
             "prefixes": sum(d["tokens"] for d in found if not d["skipped"]),
             "read": sum(read), "early_index": early,
             "mean_tokens": sum(d["tokens"] for d in found) / len(found),
             "peaks": peaks, "generate_s": generate_s, "oracle_s": oracle_s,
             "seconds": seconds}
    return out, facts


def merged(facts: Sequence[dict]) -> dict:
    """The seeds' facts as one batch's."""
    return {"responses": sum(f["responses"] for f in facts),
            "where": dict(sum((Counter(f["where"]) for f in facts), Counter())),
            "skipped_why": dict(sum((Counter(f["skipped_why"]) for f in facts), Counter())),
            "unknown_prefixes": sum(f["unknown_prefixes"] for f in facts),
            "prefixes": sum(f["prefixes"] for f in facts), "read": sum(f["read"] for f in facts),
            "early_index": [i for f in facts for i in f["early_index"]],
            "mean_tokens": sum(f["mean_tokens"] * f["responses"] for f in facts)
            / sum(f["responses"] for f in facts),
            "peaks": {s: [p for f in facts for p in f["peaks"][s]] for s in facts[0]["peaks"]},
            "generate_s": sum(f["generate_s"] for f in facts),
            "oracle_s": sum(f["oracle_s"] for f in facts),
            "seconds": {s: sum(f["seconds"][s] for f in facts) for s in facts[0]["seconds"]}}


def chance_tests(results: dict[str, dict]) -> dict[str, dict[str, dict]]:
    from lab.bench.credit import chance_test

    return {src: {side: chance_test(*(stats[f"{side}/{s}"]["values"]
                                      for s in ("precision", "k", "T")),
                                    stats[f"{side}/precision"]["clusters"])
                  for side in SIDES if f"{side}/precision" in stats}
            for src, stats in results.items()}


def markdown(results: dict, facts: dict, what: str, command: str, machine: str) -> str:
    from lab.bench.credit_report import _cell, _hits
    from lab.bench.localisation import MIN_PROMPTS, SMALL

    tests = chance_tests(results)
    where, early = facts["where"], sorted(facts["early_index"])
    lines = [what, "", f"Command: `{command}`", "", f"Machine: {machine}", "",
             f"{facts['responses']} responses, {facts['mean_tokens']:.0f} tokens on average: "
             f"format passed {where.get('passed', 0)}, failed {where.get('early', 0)} at a token "
             f"(the first dead prefix) and {where.get('end', 0)} at the end (every prefix "
             f"viable: stopped before the layout was complete), {where.get('cut', 0)} cut at "
             "the token limit with every prefix viable (not read); skipped "
             f"{where.get('skipped', 0)}"
             + "".join(f" ({n} x {w})" for w, n in facts["skipped_why"].items())
             + f". Prefixes certified: {facts['prefixes'] - facts['unknown_prefixes']} of "
             f"{facts['prefixes']} of the responses read by the oracle (a dead certificate or "
             "a passing continuation; the rest neither). Read by the statistics: "
             f"{facts['read']} failures with a deciding token and a nonzero format advantage.",
             "", "Where failures are decided (token index, 0 = the first response token): "
             + (f"min {early[0]}, median {statistics.median(early):g}, max {early[-1]}; "
                f"before token 3: {sum(i < 3 for i in early)}" if early else "none at a token")
             + ".", "",
             "Every statistic: the mean of the prompts' means [95 % interval resampling prompts"
             f" (clusters: seed, prompt): bootstrap, Student t below {SMALL} prompts, none below "
             f"{MIN_PROMPTS}] (n responses), over the failed responses whose format advantage "
             "is nonzero. Mass ratio: the format profile's share on the deciding token over its "
             "share 1/T (1 = uniform); precision at 1: whether the profile's largest token is "
             "the deciding one, against chance 1/T, with the chance test's P(as low) and "
             "P(as high) (20,000 seeded random rankings).", "",
             "| source | " + " | ".join(f"{s}: mass ratio | {s}: precision | {s}: at chance"
                                       for s in SIDES) + " |",
             "|---|" + "---|" * (3 * len(SIDES))]
    for src, stats in results.items():
        cells = []
        for side in SIDES:
            test = tests[src].get(side)
            cells += [_cell(stats.get(f"{side}/mass_ratio")),
                      _cell(stats.get(f"{side}/precision")),
                      "–" if test is None else _hits(test)]
        lines.append(f"| {src} | " + " | ".join(cells) + " |")
    lines += ["", "Where each source's format profile peaks on the failures read (the token "
                  "index of its largest weight: the most common three, with their shares):", ""]
    for src, peaks in facts["peaks"].items():
        common = Counter(peaks).most_common(3)
        lines.append(f"- {src}: " + (", ".join(f"token {i} on {n / len(peaks):.2f}"
                                              for i, n in common) if peaks else "none"))
    lines += ["", f"Seconds: sampling {facts['generate_s']:.0f}, oracle "
                  f"{facts['oracle_s']:.0f}, " + ", ".join(
                      f"{s} {t:.0f}" for s, t in facts["seconds"].items()) + "."]
    return "\n".join(lines) + "\n"


def bench_policy(args: argparse.Namespace, sources: Sequence[str]) -> int:
    """``bench credit --responses policy`` (the module's docstring)."""
    from lab.bench import report
    from lab.bench.credit_report import command_line
    from lab.bench.localisation import pool_seeds, ready, replay_config

    config = replay_config(args)
    group = config.rollout.group_size
    config = replace(config, rollout=replace(config.rollout, prompts_per_step=args.prompts))
    ready(config)
    meter = report.LoadMeter().start()
    t0 = time.perf_counter()
    seeds = list(range(args.seed, args.seed + args.seeds))
    per_seed = {s: probe(replace(config, seed=s), sources, s) for s in seeds}
    results = pool_seeds(per_seed, sources, args.seed)
    facts = merged([f for _, f in per_seed.values()])
    facts["wall_s"] = time.perf_counter() - t0
    m = report.machine() | meter.stop()
    label = args.label or f"credit-{config.task.task}-policy"
    what = (f"# {label}\n\n`bench credit --responses policy`: {config.task.task}, preset "
            f"{args.preset}, model {config.model.model}"
            f"{' (warm-started)' if config.warmstart.warm_start else ''}; {args.prompts} prompts "
            f"x G={group} sampled responses (<= {config.rollout.max_response_tokens} new tokens, "
            f"temperature {config.rollout.temperature}) at "
            f"{'seed ' + str(args.seed) if len(seeds) == 1 else 'each of seeds ' + ', '.join(map(str, seeds))}"
            f"; sources {', '.join(sources)}; {facts['wall_s']:.0f} s in all")
    command = command_line(args, config, sources) + " --responses policy"
    md = markdown(results, facts, what, command, report.machine_line(m))
    report.publish(label, {"bench": "credit-policy", "label": label, "machine": m,
                           "command": command, "task": config.task.task, "preset": args.preset,
                           "config": config.to_dict(), "sources": sources, "seeds": seeds,
                           "facts": facts, "per_seed": {s: f for s, (_, f) in per_seed.items()},
                           "results": results, "chance_tests": chance_tests(results)},
                   md, args.output_dir)
    return 0


def bench(args: argparse.Namespace) -> int:
    """``bench credit``: the constructed responses (``lab.bench.credit_report``), or with
    ``--responses policy`` the policy's own (this module)."""
    from lab.bench.credit import parse_sources
    from lab.bench.credit_report import bench_credit

    if args.responses != "policy":
        return bench_credit(args)
    return bench_policy(args, parse_sources(args.sources))  # unknown sources fail first


def add_parser(which) -> None:
    from lab.bench.credit_report import add_parser as credit_parser

    p = credit_parser(which)
    p.add_argument("--responses", choices=("constructed", "policy"), default="constructed",
                   help="constructed: the groups built to fail at known tokens; policy: the "
                        "policy's own sampled responses (--prompts x G per seed), each failed "
                        "format read at the token a prefix-viability oracle finds decided it "
                        "(lab/bench/credit_policy.py)")
    p.set_defaults(bench_fn=bench)
