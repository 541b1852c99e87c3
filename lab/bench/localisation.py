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

The shuffled variant is the control: its span ratios must cover 1.0, or the statistic is
biased; the report says so in its first lines and the command exits with status 3.
"""
from __future__ import annotations

import argparse
import math
import time
from dataclasses import replace

DEFAULT_VARIANTS = "mrtpo,mrtpo@joint,mrtpo@single,mrtpo@shuffled"
METHODS = ("mrtpo", "p2t")
CONTROL = "shuffled"
MODES = ("loo", "joint", "single")
STATS = ("span_ratio", "top10")
RESAMPLES = 2000


def parse_variant(spec: str) -> tuple[str, str, bool]:
    """``mrtpo`` / ``p2t``, each with ``@joint`` / ``@single`` / ``@shuffled`` -> (method,
    contexts, shuffled)."""
    name, _, mode = spec.strip().partition("@")
    if name not in METHODS:
        raise ValueError(f"bench localisation measures the per-reward token profiles of "
                         f"{' and '.join(METHODS)}; {spec!r} is not one (e.g. mrtpo, "
                         "mrtpo@joint, mrtpo@single, mrtpo@shuffled, p2t, p2t@shuffled)")
    if mode == CONTROL:
        return name, "loo", True
    if mode not in ("",) + MODES:
        raise ValueError(f"unknown variant {spec!r}: the mode after @ is one of "
                         f"{', '.join(MODES + (CONTROL,))}")
    return name, mode or "loo", False


def profile_of(name: str, ctx, options, mode: str):
    """[N, K, T] the variant's raw per-reward token profile, every pair computed, and the
    function that turns it into the allocation profile it trains with (mean 1 per response;
    ``shuffled``: permuted over each response's tokens, as MRTPO's ablation)."""
    import torch

    if name == "mrtpo":
        from methods.mrtpo import mrtpo_token_weights, relevance

        with torch.no_grad():
            d = relevance(ctx, replace(options, mrtpo_replay=mode, mrtpo_replay_all=True))
        return d, lambda raw, shuffled, seed: mrtpo_token_weights(
            raw, ctx.response_mask, 1.0, shuffle=shuffled, seed=seed)
    from methods import p2t
    from methods.mrtpo import mrtpo_token_weights

    opts = replace(options, p2t_contexts=mode)
    infl = p2t.verifier_influence(ctx, opts)
    # the redistributed term alone (omega's part, N softmax(I / tau)): its shape, not alpha's
    return infl, lambda raw, shuffled, seed: mrtpo_token_weights(
        p2t.profile(raw, ctx.response_mask, opts), ctx.response_mask, 1.0, shuffle=shuffled,
        seed=seed)


def interval(values, seed: int = 0, level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high) of ``values`` with a bootstrap interval of the mean at ``level`` (BCa;
    the percentile interval where BCa is undefined)."""
    import numpy as np
    from scipy import stats

    x = np.asarray(values, dtype=float)
    mean = float(x.mean())
    if len(x) < 2 or float(x.max() - x.min()) <= 1e-12:
        return mean, (mean if len(x) else math.nan), (mean if len(x) else math.nan)
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


def summarise(records: list[dict], seed: int = 0) -> dict[str, dict]:
    """{``<reward or span>/<stat>``: {n, mean, low, high, values}} over the responses that
    have it."""
    keys = sorted({k for r in records for k in r
                   if k.rsplit("/", 1)[-1] in STATS and not k.startswith("type/")})
    out = {}
    for key in keys:
        vals = [r[key] for r in records if key in r and not math.isnan(r[key])]
        if vals:
            mean, low, high = interval(vals, seed)
            out[key] = {"n": len(vals), "mean": mean, "low": low, "high": high,
                        "values": vals}
    return out


def probe(config, variants: list[str], seed: int = 0) -> tuple[dict, dict]:
    """Sample one batch, replay it with each variant; ({variant: stats}, batch facts)."""
    import torch

    from harness.train.passes import context
    from harness.train.sample import sample
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
    computed: dict[tuple, tuple] = {}  # (method, mode) -> raw profile: the control reuses it
    for spec in variants:
        name, mode, shuffled = parse_variant(spec)
        t0 = time.perf_counter()
        if (name, mode) not in computed:
            computed[(name, mode)] = profile_of(name, ctx, trainer.options, mode)
        raw, to_weights = computed[(name, mode)]
        # the profile the allocation trains with, shuffled as its ablation; a reward absent
        # from a response's prompt has no profile there (NaN: not counted)
        w = to_weights(raw, shuffled, seed)
        w[torch.isnan(ctx.rewards)] = float("nan")
        timing[spec] = time.perf_counter() - t0
        records = batch_records(ctx.tokenizer, ctx.examples, ctx.response_ids,
                                ctx.response_mask, w, ctx.reward_names, trainer.task.spans,
                                ctx.rewards.tolist())
        out[spec] = summarise(records, seed)
    rewards = ctx.rewards
    present = [k for k in range(rewards.shape[1]) if bool((~torch.isnan(rewards[:, k])).any())]
    facts = {"responses": int(ctx.response_ids.shape[0]),
             "prompts": len({e.id for e in ctx.examples}), "rewards": list(ctx.reward_names),
             "reward_means": {ctx.reward_names[k]: float(rewards[:, k].nanmean())
                              for k in present},
             "mean_response_tokens": float(ctx.response_mask.sum(dim=1).float().mean()),
             "generate_s": generate_s, "replay_s": timing}
    return out, facts


def control_failures(results: dict[str, dict], seed: int = 0) -> list[str]:
    """The shuffled variants' span ratios whose interval excludes 1.0. The intervals are
    family-wise at 95 % (Bonferroni over the control's ratios): at 95 % each, a control of
    m ratios would fail by chance alone with probability up to 1 - 0.95^m."""
    checks = [(spec, key, s) for spec, stats in results.items() if parse_variant(spec)[2]
              for key, s in stats.items() if key.endswith("/span_ratio")]
    level = 1 - 0.05 / max(1, len(checks))
    bad = []
    for spec, key, s in checks:
        _, low, high = interval(s["values"], seed, level) if "values" in s else \
            (s["mean"], s["low"], s["high"])
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
    elif any(parse_variant(s)[2] for s in specs):
        lines += ["Control: every shuffled span ratio's interval covers 1.0 (family-wise 95 %, "
                  "Bonferroni over the control's ratios).", ""]
    lines += [f"{facts['responses']} responses to {facts['prompts']} prompts, "
              f"{facts['mean_response_tokens']:.0f} tokens on average; reward means "
              + ", ".join(f"{n} {v:.2f}" for n, v in facts["reward_means"].items())
              + f"; sampling {facts['generate_s']:.0f} s, replay "
              + ", ".join(f"{s} {t:.0f} s" for s, t in facts["replay_s"].items()) + ".", "",
              "Mean over responses [95 % bootstrap interval] (n responses). Span ratio: the "
              "profile's share on the span the reward's checker reads over that span's token "
              "share (1 = uniform); top10: the share on the top 10 % tokens (uniform 0.10).", "",
              "| reward / statistic | " + " | ".join(specs) + " |",
              "|---|" + "---|" * len(specs)]
    for key in keys:
        cells = []
        for spec in specs:
            s = results[spec].get(key)
            cells.append("–" if s is None else
                         f"{s['mean']:.2f} [{s['low']:.2f}, {s['high']:.2f}] (n={s['n']})")
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
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
    data = {"bench": "localisation", "label": label, "machine": m, "task": config.task.task,
            "preset": args.preset, "config": config.to_dict(), "variants": variants,
            "facts": facts, "results": results, "control_failures": control_failures(results)}
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
                        "@single, @shuffled (the control): mrtpo,p2t,p2t@shuffled")
    p.add_argument("--responses", type=int, default=64,
                   help="responses to sample (a multiple of the group size)")
    p.add_argument("--seed", type=int, default=0, help="sampling, shuffling and bootstrap seed")
    p.add_argument("--label", default="", help="report name (default localisation-<task>)")
    p.add_argument("--output-dir", default=None, help="default: results/bench/")
    add_config_flags(p, only=("task", "model", "warm_start", "max_response_tokens",
                              "group_size", "micro_batch_size", "data_dir", "use_gpu",
                              "engine", "dtype", "rollout_dtype", "plugins"))
    p.set_defaults(bench_fn=bench_localisation)
