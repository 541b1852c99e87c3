"""``bench localisation``: where each replay variant puts each reward's credit, measured on one
batch of the policy's own responses, with no training.

The policy (warm-started where the preset says so) samples ``--responses`` responses to the
task's training prompts, in groups of the preset's size; they are scored, and each variant's
token profile is computed on the same responses: MRTPO's replay distances ``d [N, K, T]``
turned into the allocation profile it trains with (``rho = d / mean_t d``; with ``@shuffled``
permuted over each response's tokens, as the ablation's allocation does). Every pair is
replayed (``replay_all``), so responses whose group had no signal count too.

Per reward and variant, over responses, with 95 % bootstrap intervals
(``scipy.stats.bootstrap``, BCa, 2000 resamples, seeded):

- **span ratio**: the profile's share on the span the reward's checker reads divided by that
  span's share of the response's tokens (1 = uniform; the task's ``spans``), and the same for
  narrower spans a task names (``execution:diff``: the query's tokens that differ from the gold
  query's) and, where rewards are per-prompt constraint slots, per constraint type
  (``type:keyword``, ...);
- **top-10 % share**: the share of the profile held by the response's top 10 % tokens (uniform:
  0.10).

Responses are clustered by prompt (a group shares it), so each interval resamples prompts
(the mean over a prompt's responses; BCa, percentile where BCa is undefined), and at fewer
than ``SMALL`` prompts it is a Student-t interval over the prompts' means.

Controls:

- ``@shuffled`` (calibration): the profile permuted over each response's tokens; its span
  ratios must cover 1.0, or the statistic is biased; the report says so in its first lines and
  the command exits with status 3;
- ``@placebo`` (specificity): the replay with each verifier text replaced by one of the same
  token length that says nothing about the response (``lab.bench.placebo``); the report gives
  the paired difference real - placebo over the same responses;
- ``@cross`` (specificity across rewards): each reward's profile read on the other rewards'
  spans (reward k's profile under reward k+1's name, cyclically): a profile that follows its
  own verifier is above its cross reading.
"""
from __future__ import annotations

import argparse
import math
import time
from dataclasses import replace

DEFAULT_VARIANTS = "mrtpo,mrtpo@joint,mrtpo@single,mrtpo@shuffled,mrtpo@placebo,mrtpo@cross"
METHODS = ("mrtpo", "p2t", "tcrm")
CONTROL = "shuffled"
CONTROLS = (CONTROL, "placebo", "cross")
MODES = ("loo", "joint", "single")
STATS = ("span_ratio", "top10")
RESAMPLES, SMALL = 2000, 10  # bootstrap resamples; under SMALL prompts a t-interval instead


def parse_variant(spec: str) -> tuple[str, str, str]:
    """``mrtpo`` / ``p2t``, each with ``@joint`` / ``@single`` or a control (``@shuffled``,
    ``@placebo``, ``@cross``), or ``tcrm`` (``@abs``, ``@shuffled``, ``@cross``) -> (method,
    contexts or profile, control or "")."""
    spec, _, dtype = spec.strip().partition(":")  # :bf16: replayed under bf16 autocast
    if dtype not in ("", "bf16"):
        raise ValueError(f"unknown dtype suffix in {spec}:{dtype}: only :bf16")
    name, _, mode = spec.partition("@")
    if name not in METHODS:
        raise ValueError(f"bench localisation measures the per-reward token profiles of "
                         f"{' and '.join(METHODS)}; {spec!r} is not one (e.g. mrtpo, "
                         "mrtpo@joint, mrtpo@single, mrtpo@shuffled, p2t, p2t@shuffled)")
    if name == "tcrm":  # no verifier text: profiles aligned (default) or abs, no placebo
        from lab.bench.tcrm_profile import parse_mode

        return parse_mode(spec, mode, CONTROLS)
    if mode in CONTROLS:
        return name, "loo", mode
    if mode not in ("",) + MODES:
        raise ValueError(f"unknown variant {spec!r}: the mode after @ is one of "
                         f"{', '.join(MODES + CONTROLS)}")
    return name, mode or "loo", ""


def profile_of(name: str, ctx, options, mode: str):
    """[N, K, T] the variant's raw per-reward token profile, every pair computed, and the
    function that turns it into the allocation profile it trains with (mean 1 per response;
    ``shuffled``: permuted over each response's tokens, as MRTPO's ablation)."""
    import torch

    from methods.mrtpo import mrtpo_token_weights, relevance

    if name == "mrtpo":
        with torch.no_grad():
            d = relevance(ctx, replace(options, mrtpo_replay=mode, mrtpo_replay_all=True))
        return d, lambda raw, shuffled, seed: mrtpo_token_weights(
            raw, ctx.response_mask, 1.0, shuffle=shuffled, seed=seed)
    if name == "tcrm":
        from lab.bench.tcrm_profile import profile

        return profile(ctx, options, mode)
    from methods import p2t

    opts = replace(options, p2t_contexts=mode)
    infl = p2t.verifier_influence(ctx, opts)
    # the redistributed term alone (omega's part, N softmax(I / tau)): its shape, not alpha's
    return infl, lambda raw, shuffled, seed: mrtpo_token_weights(
        p2t.profile(raw, ctx.response_mask, opts), ctx.response_mask, 1.0, shuffle=shuffled,
        seed=seed)


def interval(values, seed: int = 0, level: float = 0.95, clusters=None
             ) -> tuple[float, float, float]:
    """(mean, low, high) of ``values`` with an interval of the mean at ``level``. Without
    ``clusters``: a bootstrap over the values (BCa; percentile where BCa is undefined). With
    ``clusters`` (one label per value: the prompt a response answers): the statistic is the
    mean of the cluster means, resampled over clusters, and below ``SMALL`` clusters a
    Student-t interval over the cluster means (a bootstrap of a handful covers too little)."""
    import numpy as np
    from scipy import stats

    x = np.asarray(values, dtype=float)
    if clusters is not None:
        labels = list(dict.fromkeys(clusters))
        x = np.asarray([float(np.mean([v for v, c in zip(values, clusters) if c == label]))
                        for label in labels])
    mean = float(x.mean()) if len(x) else math.nan
    if len(x) < 2 or float(x.max() - x.min()) <= 1e-12:
        return mean, mean, mean
    if clusters is not None and len(x) < SMALL:
        half = float(stats.t.ppf(0.5 + level / 2, len(x) - 1) * x.std(ddof=1)
                     / math.sqrt(len(x)))
        return mean, mean - half, mean + half
    import warnings

    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ci = stats.bootstrap((x,), np.mean, confidence_level=level, n_resamples=RESAMPLES,
                                 method=method, rng=np.random.default_rng(seed)
                                 ).confidence_interval
        if not (math.isnan(ci.low) or math.isnan(ci.high)):
            return mean, float(ci.low), float(ci.high)
    return mean, math.nan, math.nan


def verdict(low: float, high: float) -> str:
    if math.isnan(low):
        return "no interval"
    if low > 1.0:
        return "localised (interval above 1)"
    if high < 1.0:
        return "avoided (interval below 1)"
    return "not distinguishable from uniform (interval covers 1)"


def summarise(records: list[dict], seed: int = 0, prompts=None) -> dict[str, dict]:
    """{``<reward or span>/<stat>``: {n, prompts, mean, low, high, values, clusters}} over the
    responses that have it; ``prompts``: the prompt of each record (the intervals resample
    prompts; None: responses)."""
    keys = sorted({k for r in records for k in r
                   if k.rsplit("/", 1)[-1] in STATS and not k.startswith("type/")})
    labels = list(prompts) if prompts is not None else list(range(len(records)))
    out = {}
    for key in keys:
        kept = [(r[key], c) for r, c in zip(records, labels)
                if key in r and not math.isnan(r[key])]
        if kept:
            vals, clusters = [v for v, _ in kept], [c for _, c in kept]
            mean, low, high = interval(vals, seed, clusters=clusters)
            out[key] = {"n": len(vals), "prompts": len(set(clusters)), "mean": mean,
                        "low": low, "high": high, "values": vals, "clusters": clusters}
    return out


def paired(real: dict, placebo: dict, seed: int = 0) -> dict[str, dict]:
    """Per span ratio, real - placebo on the responses both have (the same responses and
    tokens, so the difference is paired), prompt-clustered as ``summarise``."""
    out = {}
    for key, s in real.items():
        t = placebo.get(key)
        if not key.endswith("/span_ratio") or t is None:
            continue
        if len(s["values"]) != len(t["values"]) or s["clusters"] != t["clusters"]:
            continue  # not the same responses (a NaN on one side): no pairing
        diffs = [a - b for a, b in zip(s["values"], t["values"])]
        mean, low, high = interval(diffs, seed, clusters=s["clusters"])
        out[key] = {"n": len(diffs), "mean": mean, "low": low, "high": high}
    return out


def probe(config, variants: list[str], seed: int = 0) -> tuple[dict, dict]:
    """Sample one batch, replay it with each variant; ({variant: stats}, batch facts)."""
    import torch

    from harness.train.passes import context
    from harness.train.sample import sample
    from harness.train.update import autocast
    from harness.trainer import Trainer
    from methods.mrtpo.diagnostics import batch_records

    trainer = Trainer(config)
    if trainer.task.spans is None:
        raise ValueError(f"task {trainer.task.name!r} declares no checked spans (Task.spans); "
                         "localisation needs them")
    cfg = trainer.config
    t0 = time.perf_counter()
    sampled = sample(trainer.rollout, trainer.task, trainer.train_examples,
                     trainer.sampler.next(cfg.rollout.prompts_per_step), 0, 1, cfg, 0,
                     trainer.cuda)
    generate_s = time.perf_counter() - t0
    micro = trainer.ds_config["train_micro_batch_size_per_gpu"]
    ctx = context(trainer.models, trainer.tokenizer, sampled, trainer.task,
                  cfg.rollout.temperature, micro)
    # every pair, also those whose group had no signal (their advantage is 0 in training)
    ctx.signal = torch.ones(ctx.rewards.shape, dtype=torch.bool)
    out, timing = {}, {}
    prompts = [e.id for e in ctx.examples]
    computed: dict[tuple, tuple] = {}  # (method, mode, placebo) -> raw profile (reused)
    for spec in variants:
        name, mode, control = parse_variant(spec)
        dtype = spec.partition(":")[2]
        t0 = time.perf_counter()
        key = (name, mode, control == "placebo", dtype)
        if key not in computed:
            # the placebo replays the same responses with uninformative verifier texts
            with autocast("bfloat16" if dtype else "float32", *trainer.models.values()):
                computed[key] = profile_of(name, placebo_context(ctx, seed) if key[2] else ctx,
                                           trainer.options, mode)
        raw, to_weights = computed[key]
        # the profile the allocation trains with, shuffled as its ablation; a reward absent
        # from a response's prompt has no profile there (NaN: not counted)
        w = to_weights(raw, control == CONTROL, seed)
        w[torch.isnan(ctx.rewards)] = float("nan")
        if control == "cross":  # reward k's profile read on reward k+1's spans
            w = torch.roll(w, shifts=1, dims=1)
            w[torch.isnan(ctx.rewards)] = float("nan")
        timing[spec] = time.perf_counter() - t0
        records = batch_records(ctx.tokenizer, ctx.examples, ctx.response_ids,
                                ctx.response_mask, w, ctx.reward_names, trainer.task.spans,
                                ctx.rewards.tolist())
        out[spec] = summarise(records, seed, prompts)
    rewards = ctx.rewards
    present = [k for k in range(rewards.shape[1]) if bool((~torch.isnan(rewards[:, k])).any())]
    facts = {"responses": int(ctx.response_ids.shape[0]),
             "prompts": len({e.id for e in ctx.examples}), "rewards": list(ctx.reward_names),
             "reward_means": {ctx.reward_names[k]: float(rewards[:, k].nanmean())
                              for k in present},
             "mean_response_tokens": float(ctx.response_mask.sum(dim=1).float().mean()),
             "generate_s": generate_s, "replay_s": timing}
    return out, facts


def placebo_context(ctx, seed: int):
    """``ctx`` with every example's verifier texts replaced by placebos
    (``lab.bench.placebo``): the same responses, other replay contexts."""
    import copy

    from lab.bench.placebo import placebo_examples

    out = copy.copy(ctx)
    out.examples = placebo_examples(ctx.examples, ctx.tokenizer, seed)
    return out


def control_failures(results: dict[str, dict], seed: int = 0) -> list[str]:
    """The shuffled variants' span ratios whose interval excludes 1.0. The intervals are
    family-wise at 95 % (Bonferroni over the control's ratios): at 95 % each, a control of
    m ratios would fail by chance alone with probability up to 1 - 0.95^m."""
    checks = [(spec, key, s) for spec, stats in results.items()
              if parse_variant(spec)[2] == CONTROL
              for key, s in stats.items() if key.endswith("/span_ratio")]
    level = 1 - 0.05 / max(1, len(checks))
    bad = []
    for spec, key, s in checks:
        _, low, high = interval(s["values"], seed, level, s.get("clusters")) \
            if "values" in s else (s["mean"], s["low"], s["high"])
        if not math.isnan(low) and not low <= 1.0 <= high:
            bad.append(f"{spec} {key}: {s['mean']:.3f} [{low:.3f}, {high:.3f}] at "
                       f"{100 * level:.1f} %")
    return bad


def markdown(results: dict[str, dict], facts: dict, what: str, machine: str) -> str:
    specs = list(results)
    keys = sorted({k for s in results.values() for k in s},
                  key=lambda k: (k.rsplit("/", 1)[1] != "span_ratio", k))
    lines = [what, "", f"Machine: {machine}", ""]
    bad = control_failures(results)
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
              + ", ".join(f"{s} {t:.0f} s" for s, t in facts["replay_s"].items()) + ".", "",
              "Mean over responses [95 % interval, resampling prompts: bootstrap, or Student t "
              f"below {SMALL} prompts] (n responses). Span ratio: the "
              "profile's share on the span the reward's checker reads over that span's token "
              "share (1 = uniform); top10: the share on the top 10 % tokens (uniform 0.10). "
              "@placebo: the replay with uninformative verifier texts of the same length; "
              "@cross: the row's span read with the previous reward's profile.", "",
              "| reward / statistic | " + " | ".join(specs) + " |",
              "|---|" + "---|" * len(specs)]
    for key in keys:
        cells = []
        for spec in specs:
            s = results[spec].get(key)
            cells.append("–" if s is None else
                         f"{s['mean']:.2f} [{s['low']:.2f}, {s['high']:.2f}] (n={s['n']})")
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    for spec in specs:  # real - placebo, paired over the same responses
        name, mode, control = parse_variant(spec)
        placebo = f"{name}@placebo"
        if control or mode != "loo" or placebo not in results:
            continue
        diff = paired(results[spec], results[placebo])
        if diff:
            lines += ["", f"Specificity ({spec} - {placebo}, span ratio, paired over the same "
                          "responses; above 0: the reward's own verifier text moves more "
                          "credit onto its span than a placebo):", ""]
            lines += [f"- {k.rsplit('/', 1)[0]}: {d['mean']:+.2f} [{d['low']:+.2f}, "
                      f"{d['high']:+.2f}] (n={d['n']})" for k, d in diff.items()]
    first = specs[0]
    ratios = [k for k in keys if k.endswith("/span_ratio") and k in results[first]]
    if ratios:
        lines += ["", f"Verdicts ({first}):", ""]
        for key in ratios:
            s = results[first][key]
            lines.append(f"- {key.rsplit('/', 1)[0]}: {verdict(s['low'], s['high'])}, "
                         f"{s['mean']:.2f} [{s['low']:.2f}, {s['high']:.2f}]")
    return "\n".join(lines) + "\n"


def bench_localisation(args: argparse.Namespace) -> int:
    from harness import engine as eng
    from lab.bench import report
    from harness.config import resolve
    from harness.console import quiet
    from lab.flags import overrides_from

    quiet.configure_process()
    variants = [s.strip() for s in args.methods.split(",") if s.strip()]
    for v in variants:
        parse_variant(v)  # unknown variants fail before any model loads
    base = resolve(args.preset, overrides_from(args))
    group = base.rollout.group_size
    if args.responses < group or args.responses % group:
        raise ValueError(f"--responses {args.responses} must be a multiple of the group size "
                         f"{group} (--group-size)")
    config = replace(base, seed=args.seed,
                     method=replace(base.method, method="mrtpo", mrtpo_replay_all=True),
                     rollout=replace(base.rollout, prompts_per_step=args.responses // group))
    eng.init_single_process("nccl" if config.training.use_gpu else "gloo")
    if config.warmstart.warm_start:
        from harness.warmstart.cache import policy_source

        policy_source(config)  # fails now, with the command to make it, if it is missing
    meter = report.LoadMeter().start()
    results, facts = probe(config, variants, args.seed)
    m = report.machine() | meter.stop()
    r = config.rollout
    what = (f"# {args.label or 'localisation-' + config.task.task}\n\n`bench localisation`: "
            f"{config.task.task}, preset {args.preset}, model {config.model.model}"
            f"{' (warm-started)' if config.warmstart.warm_start else ''}, "
            f"{args.responses} responses ({r.prompts_per_step} prompts x G={group}, <= "
            f"{r.max_response_tokens} new tokens, temperature {r.temperature:g}), seed "
            f"{args.seed}, {config.rollout.engine} engine; variants {', '.join(variants)}")
    md = markdown(results, facts, what, report.machine_line(m))
    label = args.label or f"localisation-{config.task.task}"
    specificity = {spec: paired(results[spec], results[f"{parse_variant(spec)[0]}@placebo"])
                   for spec in variants if parse_variant(spec)[1:] == ("loo", "")
                   and f"{parse_variant(spec)[0]}@placebo" in results}
    data = {"bench": "localisation", "label": label, "machine": m, "task": config.task.task,
            "preset": args.preset, "config": config.to_dict(), "variants": variants,
            "facts": facts, "results": results, "specificity": specificity,
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
                        "(uninformative verifier texts), @cross (another reward's profile); "
                        "a :bf16 suffix replays under --update-dtype bfloat16")
    p.add_argument("--responses", type=int, default=64, help="responses to sample (G x prompts)")
    p.add_argument("--seed", type=int, default=0, help="sampling, shuffling and bootstrap seed")
    p.add_argument("--label", default="", help="report name (default localisation-<task>)")
    p.add_argument("--output-dir", default=None,
                   help="default: runs/bench/ (results/bench refreshes the committed reports)")
    add_config_flags(p, only=("task", "model", "warm_start", "max_response_tokens",
                              "group_size", "micro_batch_size", "data_dir", "use_gpu",
                              "engine", "dtype", "rollout_dtype", "plugins"))
    p.set_defaults(bench_fn=bench_localisation)
