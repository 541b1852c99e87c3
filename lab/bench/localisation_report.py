"""The ``bench localisation`` command (its statistics and probe: ``lab.bench.localisation``)
and its Markdown report: the statistics per variant, the text controls' specificity
differences with their token overlap, and the verdicts of the first variant."""
from __future__ import annotations

import argparse
import math
from dataclasses import replace

from lab.bench.localisation import (CONTROL, DEFAULT_VARIANTS, LEARNED_CONTROLS, MIN_PROMPTS,
                                    PAIRED_CONTROLS, REFERENCE_MODELS, SMALL, TEXT_CONTROLS,
                                    control_failures, paired, parse_variant, pool_seeds, probe)

WHAT_CONTROL = {
    "placebo": "the reward's own verifier text moves more credit onto its span than text of the "
               "same length with none of the verifier texts' tokens",
    "order": "the verifier text's order matters beyond its words (the same tokens, reordered)",
    "cross": "the reward's profile puts more on its own span than the previous reward's "
             "profile does",
    "swapped": "the profile follows where this response's span lies, beyond the positions "
               "the profiles favour in any response",
    "outcomes": "the learned credit source learned from the outcomes, beyond the same model "
                "trained on them shuffled within groups",
}


def verdict(low: float, high: float) -> str:
    if math.isnan(low):
        return "no interval (too few prompts)"
    if low > 1.0:
        return "localised (interval above 1)"
    if high < 1.0:
        return "avoided (interval below 1)"
    return "not distinguishable from uniform (interval covers 1)"


def near_one(x: float) -> str:
    """A bound to 2 decimals, or 3 where 2 would print 1.00 for a bound that is not 1 (so a
    verdict decided by the unrounded bound never reads as contradicting its interval)."""
    two = f"{x:.2f}"
    return f"{x:.3f}" if two == "1.00" and x != 1.0 else two


def cell(s: dict, signed: bool = False) -> str:
    """``mean [low, high] (n=...)``, or the mean and why it has no interval."""
    f = "{:+.2f}" if signed else "{:.2f}"
    if math.isnan(s["low"]):
        return (f"{f.format(s['mean'])} (too few prompts for an interval: "
                f"{s.get('prompts', '?')}; n={s['n']})")
    return (f"{f.format(s['mean'])} [{f.format(s['low'])}, {f.format(s['high'])}] "
            f"(n={s['n']})")


def specificity(results: dict[str, dict], control: str) -> dict[str, dict]:
    """Per plain (``loo``) variant with a ``@control`` run: real - control, paired."""
    out = {}
    for spec in results:
        name, mode, ctl = parse_variant(spec)
        other = f"{name}@{control}"
        if not ctl and mode in ("loo", "aligned") and other in results:
            out[spec] = paired(results[spec], results[other])
    return out


def beats(d: dict) -> str:
    """Whether a paired difference's interval lies above 0."""
    if math.isnan(d["low"]):
        return "no interval"
    return "beats" if d["low"] > 0 else "fails" if d["high"] >= 0 else "below"


def controls_table(results: dict[str, dict], specs: list[str]) -> list[str]:
    """Per plain variant (its rows: the span ratios) and control: real - control, paired over
    the same responses, and whether its interval is above 0."""
    diffs = {c: specificity(results, c) for c in PAIRED_CONTROLS}
    used = [c for c in PAIRED_CONTROLS if any(diffs[c].get(s) for s in specs)]
    if not used:
        return []
    lines = ["| variant | reward (span) | real | " + " | ".join(f"real - {c}" for c in used)
             + " |", "|---|---|---|" + "---|" * len(used)]
    for spec in specs:
        if not any(diffs[c].get(spec) for c in used):
            continue
        for key in sorted(k for k in results[spec] if k.endswith("/span_ratio")):
            row = [cell(diffs[c][spec][key], signed=True) + f" {beats(diffs[c][spec][key])}"
                   if key in diffs[c].get(spec, {}) else "–" for c in used]
            lines.append(f"| {spec} | {key.rsplit('/', 1)[0]} | {cell(results[spec][key])} | "
                         + " | ".join(row) + " |")
    return lines


def markdown(results: dict[str, dict], facts: dict, what: str, machine: str) -> str:
    references = [s for s in results if parse_variant(s)[0] in REFERENCE_MODELS]
    specs = [s for s in results if s not in references]
    keys = sorted({k for s in specs for k in results[s]},
                  key=lambda k: (k.rsplit("/", 1)[1] != "span_ratio", k))
    lines = [what, "", f"Machine: {machine}", ""]
    bad = control_failures({s: results[s] for s in specs})
    if bad:
        lines += ["**CONTROL FAILED**: shuffled relevance gives span ratios whose family-wise "
                  "95 % interval excludes 1.0, so the statistic is biased: " + "; ".join(bad),
                  ""]
    elif any(parse_variant(s)[2] == CONTROL for s in specs):
        lines += ["Control: every shuffled span ratio's interval covers 1.0 (family-wise 95 %, "
                  "Bonferroni over the control's ratios).", ""]
    lines += [f"{facts['responses']} responses to {facts['prompts']} prompts, "
              f"{facts['mean_response_tokens']:.0f} tokens on average; reward means "
              + ", ".join(f"{n} {v:.2f}" for n, v in facts["reward_means"].items())
              + f"; sampling {facts['generate_s']:.0f} s, replay "
              + ", ".join(f"{s} {t:.0f} s" for s, t in facts["replay_s"].items()
                          if s in specs) + ".", "",
              "Mean of the prompts' means [95 % interval, resampling prompts (over several "
              f"seeds: each seed's prompts): bootstrap, Student t below {SMALL} prompts, none "
              f"below {MIN_PROMPTS}] (n responses). Span ratio: the "
              "profile's share on the span the reward's checker reads over that span's token "
              "share (1 = uniform); top10: the share on the top 10 % tokens (uniform 0.10). "
              "@placebo: the replay with verifier texts of the same length made of tokens no "
              "verifier text of the batch has; @order: with each verifier text's own tokens "
              "reordered; @cross: the row's span read with the previous reward's profile; "
              "@swapped: each response's profile taken from a response to another prompt "
              "(cut to its length, nothing added past the other's end).", "",
              "| reward / statistic | " + " | ".join(specs) + " |",
              "|---|" + "---|" * len(specs)]
    for key in keys:
        cells = []
        for spec in specs:
            s = results[spec].get(key)
            cells.append("–" if s is None else cell(s))
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    table = controls_table(results, specs)
    if table:
        lines += ["", "Against each control (span ratio, real - control paired over the same "
                      "responses; `beats`: its interval lies above 0, `fails`: it covers 0). "
                      "Above 0 means: " + "; ".join(f"{c}: {WHAT_CONTROL[c]}"
                                                    for c in PAIRED_CONTROLS) + ".", ""]
        for control in TEXT_CONTROLS:
            share = facts.get("control_overlap", {}).get(control)
            if share:
                what = ("Tokens of its own verifier text each order text keeps (encoded "
                        "again, each as often)" if control == "order" else
                        f"Token overlap of the {control} texts with the verifier texts")
                lines.append(f"{what}: " + ", ".join(f"{r} {v:.2f}" for r, v in share.items())
                             + ".")
        lines += [""] + table
    ref_table = controls_table(results, references)
    if ref_table:
        lines += ["", "Reference models on the same batch, verifier texts and spans "
                      "(lab/bench/reference_models.py): `copy-model` peaks where a response "
                      "token occurs in its context (lexical copying), `position-model` moves "
                      "one fixed response position with the context's length. A control a "
                      "reference model beats is no evidence against its mechanism; one the "
                      "real profile beats and the reference model fails is.", ""] + ref_table
    tops = facts.get("top_position", {})
    if tops:
        lines += ["", "Where each profile peaks most often (positional check): the response "
                      "token index most profiles have their largest weight on (0 = the first "
                      "response token; one per seed) and the share of responses peaking there. "
                      "A profile that follows a span peaks in many places, one that follows a "
                      "position at one (@swapped tests which):",
                  ""]
        for spec, by_reward in tops.items():
            if spec in specs and (parse_variant(spec)[2] == "" or spec == specs[0]):
                # a reward with no profile in any batch (no within-group signal) has no peak
                lines.append(f"- {spec}: " + "; ".join(
                    f"{r} at {_positions(t['position'])} on {t['share']:.2f}"
                    for r, t in by_reward.items() if not math.isnan(t["share"])))
    with_seeds = [(k, v) for k, v in results[specs[0]].items()
                  if len(v.get("seed_means", {})) > 1 and k.endswith("/span_ratio")]
    if with_seeds:
        lines += ["", f"Per seed ({specs[0]}, span ratio, each seed's mean of its prompt means):",
                  ""]
        lines += [f"- {k.rsplit('/', 1)[0]}: " + ", ".join(
            f"seed {s} {m:.2f}" for s, m in v["seed_means"].items()) for k, v in with_seeds]
    first = specs[0]
    ratios = [k for k in keys if k.endswith("/span_ratio") and k in results[first]]
    if ratios:
        lines += ["", f"Verdicts ({first}):", ""]
        for key in ratios:
            s = results[first][key]
            lines.append(f"- {key.rsplit('/', 1)[0]}: {verdict(s['low'], s['high'])}, "
                         f"{s['mean']:.2f} [{near_one(s['low'])}, {near_one(s['high'])}]")
    return "\n".join(lines) + "\n"


def reference_variants(models: str, variants: list[str]) -> list[str]:
    """Each reference model plain and with every paired control the variants use (all of them
    when the variants use none), not already among ``variants``."""
    names = [m.strip() for m in models.split(",") if m.strip()]
    for name in names:
        if name not in REFERENCE_MODELS:
            raise ValueError(f"unknown reference model {name!r}: one of "
                             f"{', '.join(REFERENCE_MODELS)}")
    # a reference model learns nothing, so it has no learned controls
    own = [c for c in PAIRED_CONTROLS if c not in LEARNED_CONTROLS]
    used = [c for c in own if any(parse_variant(v)[2] == c for v in variants)]
    out = [f"{m}{'@' + c if c else ''}" for m in names for c in ("", *(used or own))]
    return [v for v in out if v not in variants]


def _positions(at) -> str:
    """``[1, 1, 1]``; a seed whose batch lacks the reward shows ``-``."""
    if not isinstance(at, list):
        return str(at)
    return "[" + ", ".join("-" if x is None else str(x) for x in at) + "]"


def _keys(dicts) -> list:
    """The keys of several dicts, each once, in first-seen order."""
    return list(dict.fromkeys(k for d in dicts for k in d))


def _at(d, path: tuple):
    """``d[path[0]][path[1]]...``, or None where a key is missing."""
    for key in path:
        d = d.get(key) if isinstance(d, dict) else None
    return d


def _mean_where(facts: list[dict], path: tuple) -> float:
    """The mean over the seeds whose facts have ``path`` (a reward absent from a seed's batch,
    as IFEval's per-constraint rewards can be, or without a value there, NaN, is not counted
    as 0); NaN when no seed has it."""
    vals = [v for v in (_at(f, path) for f in facts)
            if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return sum(vals) / len(vals) if vals else float("nan")


def merged_facts(facts: list[dict]) -> dict:
    """One batch's facts from several seeds' (counts summed, means averaged over the seeds that
    have them, times summed)."""
    if len(facts) == 1:
        return facts[0]
    n = len(facts)
    controls = _keys(f.get("control_overlap", {}) for f in facts)
    variants = _keys(f.get("top_position", {}) for f in facts)
    out = {"responses": sum(f["responses"] for f in facts),
           "prompts": sum(f["prompts"] for f in facts),
           "rewards": _keys(f["rewards"] for f in facts),
           "reward_means": {k: _mean_where(facts, ("reward_means", k))
                            for k in _keys(f["reward_means"] for f in facts)},
           "mean_response_tokens": sum(f["mean_response_tokens"] for f in facts) / n,
           "generate_s": sum(f["generate_s"] for f in facts),
           "replay_s": {k: sum(f["replay_s"].get(k, 0.0) for f in facts)
                        for k in _keys(f["replay_s"] for f in facts)},
           "control_overlap": {c: {r: _mean_where(facts, ("control_overlap", c, r))
                                   for r in _keys(_at(f, ("control_overlap", c)) or {}
                                                  for f in facts)}
                               for c in controls},
           "top_position": {v: {r: {"position": [_at(f, ("top_position", v, r, "position"))
                                                 for f in facts],
                                    "share": _mean_where(facts, ("top_position", v, r,
                                                                 "share"))}
                                for r in _keys(_at(f, ("top_position", v)) or {}
                                               for f in facts)}
                            for v in variants},
           "per_seed": facts}
    return out


def bench_localisation(args: argparse.Namespace) -> int:
    from lab.bench import report
    from lab.bench.localisation import ready, replay_config

    variants = [s.strip() for s in args.methods.split(",") if s.strip()]
    variants += reference_variants(args.reference_models, variants)
    for v in variants:
        parse_variant(v)  # unknown variants fail before any model loads
    config = replay_config(args)
    group = config.rollout.group_size
    if args.responses < group or args.responses % group:
        raise ValueError(f"--responses {args.responses} must be a multiple of the group size "
                         f"{group} (--group-size)")
    config = replace(config, rollout=replace(config.rollout,
                                             prompts_per_step=args.responses // group))
    ready(config)
    meter = report.LoadMeter().start()
    seeds = list(range(args.seed, args.seed + args.seeds))
    per_seed = {s: probe(replace(config, seed=s), variants, s) for s in seeds}
    results = pool_seeds(per_seed, variants, args.seed)
    facts = merged_facts([f for _, f in per_seed.values()])
    m = report.machine() | meter.stop()
    r = config.rollout
    what = (f"# {args.label or 'localisation-' + config.task.task}\n\n`bench localisation`: "
            f"{config.task.task}, preset {args.preset}, model {config.model.model}"
            f"{' (warm-started)' if config.warmstart.warm_start else ''}, "
            f"{args.responses} responses ({r.prompts_per_step} prompts x G={group}, <= "
            f"{r.max_response_tokens} new tokens, temperature {r.temperature:g}) "
            f"{'at seed ' + str(args.seed) if len(seeds) == 1 else 'at each of seeds ' + ', '.join(map(str, seeds))}"
            f", {config.rollout.engine} engine; variants {', '.join(variants)}")
    md = markdown(results, facts, what, report.machine_line(m))
    label = args.label or f"localisation-{config.task.task}"
    data = {"bench": "localisation", "label": label, "machine": m, "task": config.task.task,
            "preset": args.preset, "config": config.to_dict(), "variants": variants,
            "seeds": seeds,
            "facts": facts, "results": results,
            "specificity": {c: specificity(results, c) for c in PAIRED_CONTROLS},
            "control_failures": control_failures(results)}
    report.publish(label, data, md, args.output_dir)
    return 3 if data["control_failures"] else 0


def add_parser(which) -> None:
    from lab.flags import add_config_flags

    p = which.add_parser("localisation", help="where each replay variant puts each reward's "
                                              "credit on one batch (span ratio, top-10 %% "
                                              "share, 95 %% bootstrap intervals); no training")
    p.add_argument("--preset", default="smoke-learn")
    p.add_argument("--methods", default=DEFAULT_VARIANTS,
                   help="comma-separated variants: mrtpo or p2t, each plain or @joint, "
                        "@single, or a control: @shuffled (calibration), @placebo "
                        "(verifier texts of tokens no verifier text has), @order (their own "
                        "tokens reordered), @cross (another reward's profile), @swapped "
                        "(another prompt's response's profile); "
                        "a :bf16 suffix replays under --update-dtype bfloat16")
    p.add_argument("--reference-models", default=",".join(REFERENCE_MODELS),
                   help="reference mechanisms replayed on the same batch with every paired "
                        "control the variants use (lab/bench/reference_models.py: "
                        f"{', '.join(REFERENCE_MODELS)}); '' for none")
    p.add_argument("--responses", type=int, default=64, help="responses to sample (G x prompts)")
    p.add_argument("--seed", type=int, default=0, help="sampling, shuffling and bootstrap seed "
                                                        "(the first, with --seeds)")
    p.add_argument("--seeds", type=int, default=1,
                   help="batches at seeds --seed .. --seed + N - 1, each sampled and replayed "
                        "alike; the intervals resample every seed's prompts")
    p.add_argument("--label", default="", help="report name (default localisation-<task>)")
    p.add_argument("--output-dir", default=None,
                   help="default: runs/bench/ (results/bench refreshes the committed reports)")
    add_config_flags(p, only=("task", "model", "warm_start", "max_response_tokens",
                              "group_size", "micro_batch_size", "data_dir", "use_gpu",
                              "engine", "dtype", "rollout_dtype", "plugins"))
    p.set_defaults(bench_fn=bench_localisation)
