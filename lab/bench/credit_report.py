"""The ``bench credit`` command (its construction and statistics: ``lab.bench.credit``): the
constructed batch's pass context on the run's model (warm-started where the preset says), every
credit source's profile on it, seeds pooled, and the Markdown + JSON report."""
from __future__ import annotations

import argparse
import json
import math
import random
import time
from collections import Counter
from typing import Sequence

from lab.bench.credit import (BROKEN, DEFAULT_SOURCES, KINDS, REWARDS, Batch, build,
                              parse_sources, records, summarise)
from tasks.base import Example

G = len(KINDS)  # responses per prompt


def profile(spec: str, ctx, options, seed: int):
    """[N, K, T] the source's allocation profile (mean 1 over each response's tokens)."""
    import torch

    from methods.mrtpo import mrtpo_token_weights

    mask = ctx.response_mask
    n, t = mask.shape
    shape = (n, len(ctx.reward_names), t)
    if spec == "uniform":
        return mrtpo_token_weights(torch.ones(shape), mask, 1.0)
    if spec == "random":
        raw = torch.rand(shape, generator=torch.Generator().manual_seed(seed))
        return mrtpo_token_weights(raw, mask, 1.0)
    from lab.bench.localisation import parse_variant, profile_of

    name, mode, _ = parse_variant(spec)
    raw, to_weights = profile_of(name, ctx, options, mode)
    return to_weights(raw, False, seed)


def batch_context(trainer, batch: Batch):
    """The pass context of the constructed responses, as ``harness.train.passes.context``
    builds it from a sampled batch (every pair marked for computing)."""
    import torch

    from harness.rollouts import left_pad
    from harness.rollouts.base import Rollout
    from harness.train.passes import context
    from harness.train.sample import Sampled

    tok, cfg = trainer.tokenizer, trainer.config
    examples = [g.example for g in batch.groups]
    index = [i for i in range(len(examples)) for _ in KINDS]
    p_ids, p_mask = left_pad(trainer.rollout.encode(examples), tok.pad_token_id)
    lengths = torch.tensor([len(i) for i in batch.ids])
    ids = torch.full((len(batch.ids), int(lengths.max())), tok.pad_token_id, dtype=torch.long)
    for row, i in enumerate(batch.ids):
        ids[row, :len(i)] = torch.tensor(i)
    mask = (torch.arange(ids.shape[1])[None, :] < lengths[:, None]).to(torch.long)
    ro = Rollout(p_ids[index], p_mask[index], ids, mask, list(batch.texts), index)
    rewards = torch.tensor(batch.rewards, dtype=torch.float32)
    sampled = Sampled(ro, batch.rewards, [examples[i] for i in index], index, rewards, lengths,
                      torch.tensor(index), 0, {})
    ctx = context(trainer.models, tok, sampled, trainer.task, cfg.rollout.temperature,
                  trainer.ds_config["train_micro_batch_size_per_gpu"])
    ctx.signal = torch.ones(ctx.rewards.shape, dtype=torch.bool)
    return ctx


def probe(trainer, examples: Sequence[Example], sources: Sequence[str], seed: int
          ) -> tuple[dict[str, dict], dict]:
    """Build, score and check the groups of ``examples``, compute every source's profile on
    them; ({source: statistics}, facts about the batch)."""
    import torch

    gold = trainer.resolved.train_set.demonstration or (lambda ex: ex.reference)
    batch = build(examples, trainer.task, trainer.tokenizer, gold, seed)
    if not batch.groups:
        raise ValueError(f"every one of the {len(examples)} prompts was dropped: "
                         + "; ".join(sorted({why for _, why in batch.dropped})))
    ctx = batch_context(trainer, batch)
    names = list(ctx.reward_names)
    deciding = torch.zeros(ctx.response_ids.shape[0], len(names), ctx.response_ids.shape[1],
                           dtype=torch.bool)
    for n, d in enumerate(batch.deciding):
        for k, name in enumerate(names):
            deciding[n, k, d[name]] = True
    kinds = [r.kind for g in batch.groups for r in g.responses]
    failed = torch.tensor([[name in BROKEN[kind] for name in names] for kind in kinds])
    prompts = [ex.id for ex in ctx.examples]
    out, seconds = {}, {}
    for spec in sources:
        t0 = time.perf_counter()
        w = profile(spec, ctx, trainer.options, seed)
        seconds[spec] = time.perf_counter() - t0
        out[spec] = summarise(records(w, ctx.response_mask, deciding, ctx.rewards, ctx.group,
                                      names, failed), prompts, seed)
    lengths = ctx.response_mask.sum(dim=1).tolist()
    facts = {"drawn": len(examples), "kept": len(batch.groups), "dropped": batch.dropped,
             "dropped_why": dict(Counter(why for _, why in batch.dropped)),
             "responses": len(kinds), "mean_tokens": sum(lengths) / len(lengths),
             "deciding_per_kind": {kind: {k: _mean([len(d[k]) for d, x in
                                                    zip(batch.deciding, kinds) if x == kind])
                                          for k in names} for kind in KINDS},
             "rewards_per_kind": {kind: {k: _mean([r[j] for r, x in zip(batch.rewards, kinds)
                                                   if x == kind]) for j, k in enumerate(names)}
                                  for kind in KINDS},
             "changed_types": dict(Counter(type(json.loads(e.old)).__name__
                                           for g in batch.groups for e in g.edits
                                           if e.reward == "correctness")),
             "seconds": seconds,
             "groups": [{"prompt": g.example.id, "edits": [e.__dict__ for e in g.edits],
                         "responses": [{"kind": r.kind, "tokens": length, "rewards": v,
                                        "deciding": d}
                                       for r, length, v, d in zip(
                                           g.responses, lengths[G * i:G * i + G],
                                           batch.rewards[G * i:G * i + G],
                                           batch.deciding[G * i:G * i + G])]}
                        for i, g in enumerate(batch.groups)]}
    return out, facts


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else math.nan


def draws(n_examples: int, prompts: int, seeds: int, seed: int) -> list[list[int]]:
    """Per seed, the indices of its prompts: consecutive blocks of one shuffle of the training
    set seeded by ``seed``, so no prompt is in two seeds."""
    if prompts < 1:
        raise ValueError(f"--prompts {prompts}: give 1 or more")
    if prompts * seeds > n_examples:
        raise ValueError(f"--prompts {prompts} x --seeds {seeds} needs {prompts * seeds} "
                         f"distinct training prompts; the training set has {n_examples} "
                         "usable ones")
    order = list(range(n_examples))
    random.Random(f"credit:{seed}").shuffle(order)
    return [order[i * prompts:(i + 1) * prompts] for i in range(seeds)]


def merged_facts(facts: Sequence[dict]) -> dict:
    """The seeds' facts as one batch's: counts summed, per-kind means weighted by the kept
    prompts, seconds summed (each seed's own stay under ``per_seed``)."""
    kept = sum(f["kept"] for f in facts)

    def weighted(key: str) -> dict:
        return {kind: {k: sum(f[key][kind][k] * f["kept"] for f in facts) / kept
                       for k in REWARDS} for kind in KINDS}

    types = sum((Counter(f["changed_types"]) for f in facts), Counter())
    return {"drawn": sum(f["drawn"] for f in facts), "kept": kept,
            "dropped_why": dict(sum((Counter(f["dropped_why"]) for f in facts), Counter())),
            "responses": sum(f["responses"] for f in facts),
            "mean_tokens": sum(f["mean_tokens"] * f["responses"] for f in facts)
            / sum(f["responses"] for f in facts),
            "deciding_per_kind": weighted("deciding_per_kind"),
            "rewards_per_kind": weighted("rewards_per_kind"), "changed_types": dict(types),
            "seconds": {s: sum(f["seconds"][s] for f in facts) for s in facts[0]["seconds"]}}


def uniform_failures(results: dict[str, dict]) -> list[str]:
    """The uniform baseline's statistics that are not exactly what uniform credit gives (mass
    ratio 1, precision at chance): a failure here is a fault of the statistics."""
    return [f"{k} {s['mean']:.6f}" for k, s in results.get("uniform", {}).items()
            if (k.endswith("/mass_ratio") and abs(s["mean"] - 1.0) > 1e-6)
            or (k.endswith("/gain") and abs(s["mean"]) > 1e-6)]


def _cell(s: dict | None, signed: bool = False) -> str:
    from lab.bench.localisation_report import cell

    return "–" if s is None else cell(s, signed)


def chance_tests(results: dict[str, dict]) -> dict[str, dict[str, dict]]:
    """Per source and reward, :func:`lab.bench.credit.chance_test` of its pooled responses."""
    from lab.bench.credit import chance_test

    return {src: {k: chance_test(*(stats[f"{k}/{s}"]["values"] for s in ("precision", "k", "T")),
                                 stats[f"{k}/precision"]["clusters"])
                  for k in REWARDS if f"{k}/precision" in stats}
            for src, stats in results.items()}


def _verdict(results: dict, test: dict | None, reward: str) -> str:
    from lab.bench.localisation_report import near_one

    m = results.get(f"{reward}/mass_ratio")
    if m is None or test is None:
        return f"{reward}: no response with a profile"
    where = ("no interval (too few prompts)" if math.isnan(m["low"]) else "more than uniform"
             if m["low"] > 1 else "less than uniform" if m["high"] < 1
             else "not distinguishable from uniform")
    top = ("above chance" if test["high"] < 0.025 else "below chance" if test["low"] < 0.025
           else "not distinguishable from chance")
    return (f"{reward}: mass {where} ({m['mean']:.2f} [{near_one(m['low'])}, "
            f"{near_one(m['high'])}]), top-k {top} ({_hits(test)})")


def _hits(t: dict) -> str:
    p = [f"{x:.3f}" if x >= 0.001 else "< 0.001" for x in (t["low"], t["high"])]
    return f"P(as low) {p[0]}, P(as high) {p[1]}"


def markdown(results: dict[str, dict], facts: dict, what: str, command: str, machine: str,
             seeds: Sequence[int]) -> str:
    from lab.bench.localisation import MIN_PROMPTS, SMALL

    sources, tests = list(results), chance_tests(results)
    lines = [what, "", f"Command: `{command}`", "", f"Machine: {machine}", ""]
    bad = uniform_failures(results)
    if bad:
        lines += ["**CHECK FAILED**: the uniform baseline is not at mass ratio 1 and chance "
                  "precision, so the statistics are wrong: " + "; ".join(bad), ""]
    dropped = facts["drawn"] - facts["kept"]
    why = "; ".join(f"{n} x {w}" for w, n in facts["dropped_why"].items())
    per = facts["deciding_per_kind"]
    lines += [f"{facts['drawn']} training prompts drawn, {facts['kept']} kept, {dropped} dropped"
              + (f" ({why})" if why else "") + f"; {facts['responses']} responses, "
              f"{facts['mean_tokens']:.0f} tokens on average (the end-of-turn token counted). "
              "Changed argument values by JSON type: " + ", ".join(
                  f"{t} {n}" for t, n in sorted(facts["changed_types"].items())) + ".", "",
              "| response | " + " | ".join(f"{k} (mean)" for k in REWARDS) + " | "
              + " | ".join(f"{k} deciding tokens (mean)" for k in REWARDS) + " |",
              "|---|" + "---|" * (2 * len(REWARDS))]
    for kind in KINDS:
        broken = ", ".join(BROKEN[kind]) or "nothing"
        lines.append(f"| {kind} (breaks {broken}) | " + " | ".join(
            f"{facts['rewards_per_kind'][kind][k]:.2f}" for k in REWARDS) + " | " + " | ".join(
            f"{per[kind][k]:.2f}" for k in REWARDS) + " |")
    lines += ["", "Every statistic: the mean of the prompts' means [95 % interval resampling "
                  f"prompts{' (clusters: seed, prompt)' if len(seeds) > 1 else ''}: bootstrap, "
                  f"Student t below {SMALL} prompts, none below {MIN_PROMPTS}] (n responses), "
                  "over the responses whose advantage for the reward is nonzero.", "",
              "Mass ratio: the profile's share on the deciding tokens over their share of the "
              "response's tokens (1 = uniform; T/k if all of it is on them):", "",
              "| source | " + " | ".join(REWARDS) + " |", "|---|" + "---|" * len(REWARDS)]
    lines += [f"| {s} | " + " | ".join(_cell(results[s].get(f"{k}/mass_ratio"))
                                       for k in REWARDS) + " |" for s in sources]
    lines += ["", "Precision at k: the share of the profile's k largest tokens that are "
                  "deciding tokens (k: their number in the response; ties shared in "
                  "expectation), its chance level k/T, the gain precision - chance, paired "
                  "per response, and how likely a precision as low / as high is when each "
                  "response's tokens are ranked at random (20,000 seeded draws; the verdicts' "
                  "test: a bootstrap cannot see a rare hit missing):", "",
              "| source | " + " | ".join(f"{k} precision | {k} chance | {k} gain | {k} at chance"
                                       for k in REWARDS) + " |",
              "|---|" + "---|" * (4 * len(REWARDS))]
    for s in sources:
        cells = []
        for k in REWARDS:
            chance, test = results[s].get(f"{k}/chance"), tests[s].get(k)
            cells += [_cell(results[s].get(f"{k}/precision")),
                      "–" if chance is None else f"{chance['mean']:.3f}",
                      _cell(results[s].get(f"{k}/gain"), signed=True),
                      "–" if test is None else _hits(test)]
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    lines += ["", "Mass ratio where the reward failed (the changed tokens) and where it passed "
                  "(the intact tokens at the same characters). A profile read from the "
                  "next-token distribution at a token (a replay distance) sees only the tokens "
                  "before it, so it cannot tell a changed token from the intact one in its "
                  "place:", "",
              "| source | " + " | ".join(f"{k} failed | {k} passed" for k in REWARDS) + " |",
              "|---|" + "---|" * (2 * len(REWARDS))]
    lines += [f"| {s} | " + " | ".join(_cell(results[s].get(f"{k}:{side}/mass_ratio"))
                                       for k in REWARDS for side in ("failed", "passed"))
              + " |" for s in sources]
    if len(seeds) > 1:
        lines += ["", "Per seed (mass ratio, each seed's mean of its prompt means):", "",
                  "| source | " + " | ".join(f"{k} seed {x}" for k in REWARDS for x in seeds)
                  + " |", "|---|" + "---|" * (len(REWARDS) * len(seeds))]
        for s in sources:
            cells = [results[s].get(f"{k}/mass_ratio", {}).get("seed_means", {}).get(x)
                     for k in REWARDS for x in seeds]
            lines.append(f"| {s} | " + " | ".join("–" if c is None else f"{c:.2f}"
                                                  for c in cells) + " |")
    lines += ["", "Verdicts (mass: its interval against 1; top-k: the chance test at "
                  "2.5 % each side; the uniform baseline sits on both, the random one passes "
                  "them in about 95 % of runs):", ""]
    lines += [f"- {s}: " + "; ".join(_verdict(results[s], tests[s].get(k), k) for k in REWARDS)
              for s in sources]
    lines += ["", "Seconds per source (all seeds): " + ", ".join(
        f"{s} {t:.0f}" for s, t in facts["seconds"].items()) + "."]
    return "\n".join(lines) + "\n"


def command_line(args: argparse.Namespace, config, sources: Sequence[str]) -> str:
    """The command that repeats this run: every bench flag, and the config flags given."""
    from lab.flags import overrides_from

    given = {k: v for k, v in overrides_from(args).items()
             if v not in (None, (), []) and k not in ("task", "model", "preset", "seed")}
    extra = "".join(f" --plugin {p}" for p in given.pop("plugins", ())) + "".join(
        f" --{'' if v else 'no-'}{k.replace('_', '-')}" if isinstance(v, bool)
        else f" --{k.replace('_', '-')} {v}" for k, v in sorted(given.items()))
    return (f"python -m harness bench credit --task {config.task.task} --preset {args.preset} "
            f"--model {config.model.model} --prompts {args.prompts} --seeds {args.seeds} "
            f"--seed {args.seed} --sources {','.join(sources)}{extra}")


def bench_credit(args: argparse.Namespace) -> int:
    from harness.trainer import Trainer
    from lab.bench import report
    from lab.bench.localisation import pool_seeds, ready, replay_config

    sources = parse_sources(args.sources)  # unknown sources fail before any model loads
    config = replay_config(args)
    ready(config)
    meter = report.LoadMeter().start()
    t0 = time.perf_counter()
    trainer = Trainer(config)
    seeds = list(range(args.seed, args.seed + args.seeds))
    blocks = draws(len(trainer.train_examples), args.prompts, args.seeds, args.seed)
    per_seed = {s: probe(trainer, [trainer.train_examples[i] for i in block], sources, s)
                for s, block in zip(seeds, blocks)}
    results = pool_seeds(per_seed, sources, args.seed)
    facts = merged_facts([f for _, f in per_seed.values()])
    facts["wall_s"] = time.perf_counter() - t0
    m = report.machine() | meter.stop()
    label = args.label or f"credit-{config.task.task}"
    what = (f"# {label}\n\n`bench credit`: {config.task.task} (training set "
            f"{trainer.resolved.train_set.name}), preset {args.preset}, model "
            f"{config.model.model}{' (warm-started)' if config.warmstart.warm_start else ''}; "
            f"{args.prompts} prompts x 4 constructed responses (correct; format broken at the "
            "closing think tag; one argument value wrong; both) "
            f"{'at seed ' + str(args.seed) if len(seeds) == 1 else 'at each of seeds ' + ', '.join(map(str, seeds)) + ' (disjoint prompts)'}"
            f"; sources {', '.join(sources)}; {facts['wall_s']:.0f} s in all")
    machine = report.machine_line(m)
    command = command_line(args, config, sources)
    md = markdown(results, facts, what, command, machine, seeds)
    data = {"bench": "credit", "label": label, "machine": m, "command": command,
            "task": config.task.task, "preset": args.preset, "config": config.to_dict(),
            "sources": sources, "seeds": seeds, "prompts": args.prompts, "facts": facts,
            "per_seed": {s: f for s, (_, f) in per_seed.items()}, "results": results,
            "chance_tests": chance_tests(results),
            "uniform_failures": uniform_failures(results)}
    report.publish(label, data, md, args.output_dir)
    return 3 if data["uniform_failures"] else 0


def add_parser(which):
    """The ``bench credit`` parser (``lab.bench.credit_policy.add_parser`` adds
    ``--responses``)."""
    from lab.flags import add_config_flags, seed_count

    p = which.add_parser("credit", help="ground-truth credit: tool-calling responses built to "
                                        "fail format, correctness or both at known tokens; "
                                        "each credit source's mass on them and precision at "
                                        "k, prompt-resampled 95 %% intervals; no training")
    p.add_argument("--preset", default="smoke-learn")
    p.add_argument("--prompts", type=int, default=16,
                   help="training prompts per seed, each a group of 4 constructed responses")
    p.add_argument("--seeds", type=seed_count, default=1,
                   help="N draws of --prompts prompts, disjoint (consecutive blocks of one "
                        "shuffle seeded by --seed), pooled; intervals resample (seed, prompt)")
    p.add_argument("--seed", type=int, default=0,
                   help="the shuffle's seed and the first seed (the changed argument and the "
                        "random profile are seeded per seed)")
    p.add_argument("--sources", default=DEFAULT_SOURCES,
                   help="comma-separated credit sources: baselines uniform, random; plain "
                        "profiles as bench localisation names them (mrtpo, mrtpo@single, "
                        "mrtpo@joint, p2t, p2t@single, p2t@joint, tcrm, tcrm@abs, copy-model, "
                        "position-model)")
    p.add_argument("--label", default="",
                   help="report name (default credit-<task>, credit-<task>-policy)")
    p.add_argument("--output-dir", default=None,
                   help="default: runs/bench/ (results/bench refreshes the committed reports)")
    add_config_flags(p, only=("task", "model", "warm_start", "micro_batch_size", "data_dir",
                              "use_gpu", "engine", "dtype", "rollout_dtype", "plugins"))
    p.set_defaults(bench_fn=bench_credit)
    return p
