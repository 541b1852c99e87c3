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
- ``@placebo`` (specificity): the replay with each verifier text replaced by text of the same
  token length made only of tokens no verifier text of the batch has (``lab.bench.placebo``);
  the report gives its token overlap with the verifier texts (0 by construction) and the paired
  difference real - placebo over the same responses;
- ``@order`` (an order control): each verifier text's own tokens in a random order, paired the
  same way: what the words' order adds to the same words;
- ``@cross`` (specificity across rewards): each reward's profile read on the other rewards'
  spans (reward k's profile under reward k+1's name, cyclically): a profile that follows its
  own verifier is above its cross reading;
- ``@swapped`` (a positional control that can fail): each response's profile replaced by the
  profile of a response to another prompt (the same reward; cut to this response's length,
  nothing added past the other's end, mean 1 again: ``positions.swapped``). It keeps the real profiles' spread and
  their positional habits and loses only which response they were computed on: a profile that
  follows where this response's span lies is above it, a profile that follows a position is
  not. (The retired ``@position``, all credit on the most common peak index, reaches the
  largest ratio any profile can whenever that index is in the span, so it could not fail.)

Every plain variant is compared, paired over the same responses, with each control it has
(real - control); the reference models (``lab.bench.reference_models``: a model that copies
context tokens and one that moves one fixed position) run through the same replay and
statistics on the same batch, so each control's report says which mechanisms it rules out.

Where the profiles peak: per variant and reward, the response index most profiles have their
largest weight on and the share of responses peaking there.
"""
from __future__ import annotations

import math
import time
from dataclasses import fields, replace

from lab.bench.positions import modal_tops, swapped  # noqa: F401 (the bench's controls)

DEFAULT_VARIANTS = ("mrtpo,mrtpo@joint,mrtpo@single,mrtpo@shuffled,mrtpo@placebo,mrtpo@order,"
                    "mrtpo@cross,mrtpo@swapped")
REFERENCE_MODELS = ("copy-model", "position-model")  # lab.bench.reference_models
METHODS = ("mrtpo", "p2t", "tcrm", *REFERENCE_MODELS)
CONTROL = "shuffled"
TEXT_CONTROLS = ("placebo", "order")  # replays with other verifier texts (lab.bench.placebo)
# a learned credit source trained on its outcomes shuffled within groups (TCRM's @outcomes)
LEARNED_CONTROLS = ("outcomes",)
PAIRED_CONTROLS = (*TEXT_CONTROLS, "cross", "swapped", *LEARNED_CONTROLS)  # real - control
CONTROLS = (CONTROL, *PAIRED_CONTROLS)
RETIRED = {"position": "@position (all credit on the most common peak index) was retired: "
                       "whenever that index lies in the span it gives the largest ratio any "
                       "profile can, so it cannot fail; use @swapped (another prompt's "
                       "response's profile), a positional control that can"}
MODES = ("loo", "joint", "single")
STATS = ("span_ratio", "top10")
RESAMPLES, SMALL = 2000, 10  # bootstrap resamples; under SMALL prompts a t-interval instead
MIN_PROMPTS = 5  # under this many prompts no interval at all: "too few prompts"


def parse_variant(spec: str) -> tuple[str, str, str]:
    """``mrtpo`` / ``p2t``, each with ``@joint`` / ``@single`` or a control (``@shuffled``,
    ``@placebo``, ``@order``, ``@cross``), or ``tcrm`` (``@abs``, ``@shuffled``, ``@cross``) -> (method,
    contexts or profile, control or "")."""
    spec, _, dtype = spec.strip().partition(":")  # :bf16: replayed under bf16 autocast
    if dtype not in ("", "bf16"):
        raise ValueError(f"unknown dtype suffix in {spec}:{dtype}: only :bf16")
    name, _, mode = spec.partition("@")
    if mode in RETIRED:
        raise ValueError(f"{spec!r}: {RETIRED[mode]}")
    if name not in METHODS:
        raise ValueError(f"bench localisation measures the per-reward token profiles of "
                         f"{' and '.join(METHODS)}; {spec!r} is not one (e.g. mrtpo, "
                         "mrtpo@joint, mrtpo@single, mrtpo@shuffled, p2t, p2t@shuffled; reference "
                         f"models: {', '.join(REFERENCE_MODELS)})")
    if name == "tcrm":  # no verifier text: profiles aligned (default) or abs, no placebo
        from lab.bench.tcrm_profile import parse_mode

        return parse_mode(spec, mode, CONTROLS)
    if mode in LEARNED_CONTROLS:
        raise ValueError(f"{spec!r}: @{mode} retrains a learned credit source (tcrm) on "
                         f"shuffled outcomes; {name} learns nothing from outcomes")
    if mode in CONTROLS:
        return name, "loo", mode
    if name in REFERENCE_MODELS and mode:
        raise ValueError(f"{spec!r}: a reference model takes only a control after @ "
                         f"({', '.join(CONTROLS)})")
    if mode not in ("",) + MODES:
        raise ValueError(f"unknown variant {spec!r}: the mode after @ is one of "
                         f"{', '.join(MODES + CONTROLS)}")
    return name, mode or "loo", ""


def profile_of(name: str, ctx, options, mode: str, outcomes_seed: int | None = None):
    """[N, K, T] the variant's raw per-reward token profile, every pair computed, and the
    function that turns it into the allocation profile it trains with (mean 1 per response;
    ``shuffled``: permuted over each response's tokens, as MRTPO's ablation).
    ``outcomes_seed``: TCRM's value model trained on the outcomes shuffled within groups."""
    import torch

    import methods
    from methods.mrtpo import mrtpo_token_weights, relevance

    # the run's values in an object of every method's options: each profile sets its own
    options = methods.options(**{f.name: getattr(options, f.name) for f in fields(options)})

    if name == "mrtpo":
        with torch.no_grad():
            d = relevance(ctx, replace(options, mrtpo_replay=mode, mrtpo_replay_all=True))
        return d, lambda raw, shuffled, seed: mrtpo_token_weights(
            raw, ctx.response_mask, 1.0, shuffle=shuffled, seed=seed)
    if name == "tcrm":
        from lab.bench.tcrm_profile import profile

        return profile(ctx, options, mode, outcomes_seed)
    if name in REFERENCE_MODELS:  # the same leave-one-out replay, on a reference mechanism
        from lab.bench.reference_models import reference_context

        with torch.no_grad():
            d = relevance(reference_context(ctx, name),
                          replace(options, mrtpo_replay="loo", mrtpo_replay_all=True))
        return d, lambda raw, shuffled, seed: mrtpo_token_weights(
            raw, ctx.response_mask, 1.0, shuffle=shuffled, seed=seed)
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
    mean of the cluster means, resampled over clusters, below ``SMALL`` clusters a Student-t
    interval over the cluster means (a bootstrap of a handful covers too little), and below
    ``MIN_PROMPTS`` none (NaN: too few prompts to rest an interval on)."""
    import numpy as np
    from scipy import stats

    x = np.asarray(values, dtype=float)
    if clusters is not None:
        labels = list(dict.fromkeys(clusters))
        x = np.asarray([float(np.mean([v for v, c in zip(values, clusters) if c == label]))
                        for label in labels])
    mean = float(x.mean()) if len(x) else math.nan
    if clusters is not None and len(x) < MIN_PROMPTS:
        return mean, math.nan, math.nan
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


def summarise(records: list[dict], seed: int = 0, prompts=None) -> dict[str, dict]:
    """{``<reward or span>/<stat>``: {n, prompts, mean, low, high, values, clusters}} over the
    responses that have it; ``prompts``: the prompt of each record (the intervals resample
    prompts; None: responses)."""
    keys = sorted({k for r in records for k in r
                   if k.rsplit("/", 1)[-1] in STATS and not k.startswith("type/")})
    labels = list(prompts) if prompts is not None else list(range(len(records)))
    out = {}
    for key in keys:
        kept = [(r[key], c, n) for n, (r, c) in enumerate(zip(records, labels))
                if key in r and not math.isnan(r[key])]
        if kept:
            vals, clusters = [v for v, _, _ in kept], [c for _, c, _ in kept]
            mean, low, high = interval(vals, seed, clusters=clusters)
            # rows: which responses the values are (a control pairs on them)
            out[key] = {"n": len(vals), "prompts": len(set(clusters)), "mean": mean,
                        "low": low, "high": high, "values": vals, "clusters": clusters,
                        "rows": [n for *_, n in kept]}
    return out


def pool(per_seed: dict[int, dict[str, dict]], seed: int = 0) -> dict[str, dict]:
    """One variant's statistics over several seeds' batches: every response's value, each
    clustered by (seed, prompt), the interval over those clusters; ``seed_means``: each seed's
    mean of its prompt means."""
    out = {}
    for key in sorted({k for stats in per_seed.values() for k in stats}):
        vals, clusters, rows, means = [], [], [], {}
        for s, stats in per_seed.items():
            if key in stats:
                vals += stats[key]["values"]
                clusters += [f"{s}:{c}" for c in stats[key]["clusters"]]
                rows += [f"{s}:{n}" for n in stats[key]["rows"]]
                means[s] = stats[key]["mean"]
        mean, low, high = interval(vals, seed, clusters=clusters)
        out[key] = {"n": len(vals), "prompts": len(set(clusters)), "mean": mean, "low": low,
                    "high": high, "values": vals, "clusters": clusters, "rows": rows,
                    "seed_means": means}
    return out


def pool_seeds(per_seed: dict[int, tuple[dict, dict]], names, seed: int = 0
               ) -> dict[str, dict]:
    """``pool`` for each of ``names`` (variants, credit sources) from the seeds' (statistics
    by name, facts) pairs."""
    return {name: pool({s: stats[name] for s, (stats, _) in per_seed.items()}, seed)
            for name in names}


def paired(real: dict, control: dict, seed: int = 0) -> dict[str, dict]:
    """Per span ratio, real - control on the responses both have a value for (the same
    responses and tokens, so the difference is paired; a response one side has no value for,
    as a cross reading where the other reward is absent, is left out), prompt-clustered as
    ``summarise``."""
    out = {}
    for key, s in real.items():
        t = control.get(key)
        if not key.endswith("/span_ratio") or t is None:
            continue
        theirs = dict(zip(t["rows"], t["values"]))
        both = [(v - theirs[r], c) for v, c, r in zip(s["values"], s["clusters"], s["rows"])
                if r in theirs]
        if not both:
            continue
        diffs, clusters = [d for d, _ in both], [c for _, c in both]
        mean, low, high = interval(diffs, seed, clusters=clusters)
        out[key] = {"n": len(diffs), "prompts": len(set(clusters)), "mean": mean,
                    "low": low, "high": high}
    return out


def replay_config(args):
    """The config a replay bench (``bench localisation``, ``bench credit``) computes with:
    ``--preset`` and the config flags given, seed ``--seed``, MRTPO's replay of every
    (response, reward) pair; the console set up as for a run. Its batch size is the caller's
    (``ready`` then starts the process group)."""
    from harness.config import resolve
    from harness.console import quiet
    from harness.method_config import method_config
    from lab.flags import overrides_from

    quiet.configure_process()
    base = resolve(args.preset, overrides_from(args))
    return replace(base, seed=args.seed,
                   method=method_config("mrtpo", {"mrtpo_replay_all": True}, base.method))


def ready(config) -> None:
    """The single-process group a bench's models run in; a warm start the config asks for and
    the cache lacks fails now, with the command to make it."""
    from harness import engine as eng

    eng.init_single_process("nccl" if config.training.use_gpu else "gloo")
    if config.warmstart.warm_start:
        from harness.run import of_config
        from harness.warmstart.cache import policy_source

        policy_source(of_config(config))


def sampled_context(config, needs_spans: bool = False) -> tuple:
    """(trainer, the pass context of one batch the policy samples at its first step, the
    sampling's seconds): every (response, reward) pair marked for computing, also those whose
    group had no signal (their advantage is 0 in training). The benches' one batch.
    ``needs_spans``: refuse a task without checked spans before sampling."""
    import torch

    from harness.train.passes import context
    from harness.train.sample import sample
    from harness.trainer import Trainer

    trainer = Trainer(config)
    if needs_spans and trainer.task.spans is None:
        raise ValueError(f"task {trainer.task.name!r} declares no checked spans (Task.spans); "
                         "localisation needs them")
    cfg = trainer.config
    t0 = time.perf_counter()
    sampled = sample(trainer.rollout, trainer.task, trainer.train_examples,
                     trainer.sampler.next(cfg.rollout.prompts_per_step), 0, 1, cfg, 0,
                     trainer.cuda)
    generate_s = time.perf_counter() - t0
    ctx = context(trainer.models, trainer.tokenizer, sampled, trainer.task,
                  cfg.rollout.temperature, trainer.ds_config["train_micro_batch_size_per_gpu"])
    ctx.signal = torch.ones(ctx.rewards.shape, dtype=torch.bool)
    return trainer, ctx, generate_s


def probe(config, variants: list[str], seed: int = 0) -> tuple[dict, dict]:
    """Sample one batch, replay it with each variant; ({variant: stats}, batch facts)."""
    import torch

    from harness.train.update import autocast
    from methods.mrtpo.diagnostics import batch_records

    trainer, ctx, generate_s = sampled_context(config, needs_spans=True)
    out, timing = {}, {}
    prompts = [e.id for e in ctx.examples]
    computed: dict[tuple, tuple] = {}  # (method, mode, text control) -> raw profile (reused)
    overlap: dict[str, dict[str, float]] = {}  # text control -> reward -> token overlap
    positions: dict[str, dict] = {}  # variant -> reward -> its profiles' most common top
    for spec in variants:
        name, mode, control = parse_variant(spec)
        dtype = spec.partition(":")[2]
        t0 = time.perf_counter()
        text = control if control in TEXT_CONTROLS else ""
        # a text or learned control computes its own profile; the others read the real one
        key = (name, mode, control if control in TEXT_CONTROLS + LEARNED_CONTROLS else "",
               dtype)
        if key not in computed:
            # a text control replays the same responses with other verifier texts
            used = ctx
            if text:
                from lab.bench.placebo import control_context

                used = control_context(ctx, seed, text)
                overlap[text] = used.overlap
            with autocast("bfloat16" if dtype else "float32", *trainer.models.values()):
                computed[key] = profile_of(name, used, trainer.options, mode,
                                           seed if control in LEARNED_CONTROLS else None)
        raw, to_weights = computed[key]
        # the profile the allocation trains with, shuffled as its ablation; a reward absent
        # from a response's prompt has no profile there (NaN: not counted)
        w = to_weights(raw, control == CONTROL, seed)
        w[torch.isnan(ctx.rewards)] = float("nan")
        tops = modal_tops(w, ctx.response_mask)
        positions[spec] = {ctx.reward_names[k]: {"position": p, "share": share}
                           for k, (p, share) in enumerate(tops)}
        if control == "swapped":  # another prompt's response's profile
            w = swapped(w, ctx.response_mask, prompts, seed)
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
             "generate_s": generate_s, "replay_s": timing, "control_overlap": overlap,
             "top_position": positions}
    return out, facts


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
