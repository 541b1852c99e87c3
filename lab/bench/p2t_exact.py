"""``bench p2t-exact``: P2T's first-order influences against exact token replacement, on a batch
of the policy's own responses.

For each reward k with leave-one-out contexts (all verifier texts against all but k's), each
response token t and each null token: ``R_k(y) = log p(y | with) - log p(y | without)``;
the **exact** influence is ``R_k(y) - R_k(y with y_t replaced by the null token)``, by plain
forwards of every replaced response; P2T's estimate ``I_k(t)`` is
``methods.p2t.verifier_influence``. Both share the **target term** (the log-ratio of y_t
against the null's at t, which P2T computes exactly), so the report also compares what is left:
P2T's input-gradient term ``I - target`` against the exact change of the later tokens'
log-ratios ``exact - target`` (the input role). Reported per null and reward: Pearson's r of
the whole influence and of the input role, and the median size ratio of the input role
(exact / first order). The nulls: the tokenizer's pad and unk tokens (on SmolLM2 pad is
``<|im_end|>``, the chat template's end of turn, and unk ``<|endoftext|>``, a token the
template never writes), and ``mean``, the mean embedding, which is no token: its exact
replacement feeds the mean embedding as the input at t (through a hook on the embedding
module) and, as P2T's target term does, scores the null at t by the mean log-probability
``q . log p`` (q uniform).
"""
from __future__ import annotations

import argparse
import math
from contextlib import contextmanager, nullcontext
from dataclasses import replace

NULLS = ("pad", "unk", "mean")
CHUNK = 16  # replaced responses per forward


@contextmanager
def _as_embedding(model, sentinel: int, e_null):
    """While open, the input id ``sentinel`` (one past the vocabulary) enters the model as
    the embedding ``e_null [H]`` (no token has it); every other id as usual."""
    import torch

    embed = model.get_input_embeddings()
    seen = {}

    def before(module, args):
        ids = args[0]
        seen["where"] = ids == sentinel
        return (ids.masked_fill(seen["where"], 0),) + tuple(args[1:])

    def after(module, args, out):
        where = seen.pop("where")[..., None]
        return torch.where(where, e_null.to(out.device, out.dtype), out)

    hooks = (embed.register_forward_pre_hook(before), embed.register_forward_hook(after))
    try:
        yield
    finally:
        for h in hooks:
            h.remove()


def _loglik(model, tokenizer, context, ids, mask, temperature: float, q=None, sentinel=-1):
    """[B] the summed log-likelihood of each row of ``ids [B, T]`` after ``context``, and
    [B, T, V] the log-probabilities (row-wise, for the target terms). With ``q``, an id
    equal to ``sentinel`` (a null that is no token) scores ``q . log p`` there."""
    import torch

    from harness.replay import base_and_head, response_hidden

    head = base_and_head(model)[1]
    with torch.no_grad():
        # one family: every row reads the same context, whose forward they share
        h = response_hidden(model, tokenizer, [context] * ids.shape[0], ids, mask,
                            families=[0] * ids.shape[0])
        logp = torch.log_softmax(head(h).float() / temperature, dim=-1).cpu()
    ids = ids.cpu()
    if q is None:  # every id is a token
        scored = logp.gather(-1, ids[..., None])[..., 0]
    else:
        at = ids == sentinel
        scored = torch.where(at, logp @ _padded(q, logp),
                             logp.gather(-1, ids.masked_fill(at, 0)[..., None])[..., 0])
    return (scored * mask.cpu()).sum(1), logp


def exact_influence(ctx, row: int, contexts: tuple, null) -> tuple:
    """(exact [T], target [T]) for one response and one (with, without) pair of contexts.
    ``null``: a token id, or ``(q [V], e_null [H])`` for a null that is no token (the mean
    embedding): the input at t becomes ``e_null`` and the null's score there ``q . log p``."""
    import torch

    n = int(ctx.response_mask[row].sum())
    ids, mask = ctx.response_ids[row, :n], ctx.response_mask[row, :n]
    model, tok, temp = ctx.model("policy"), ctx.tokenizer, ctx.temperature
    q = None
    if isinstance(null, tuple):
        q, e_null = null
        sentinel = ctx.embeddings().num_embeddings
        entered = _as_embedding(model, sentinel, e_null)
    else:
        sentinel, entered = int(null), nullcontext()
    replaced = ids.repeat(n, 1)
    replaced[torch.arange(n), torch.arange(n)] = sentinel
    exact, target = torch.zeros(n), torch.zeros(n)
    sign = (1.0, -1.0)
    with entered:
        for c, context in enumerate(contexts):
            ll, logp = _loglik(model, tok, context, ids[None], mask[None], temp)
            lq = logp[0] @ _padded(q, logp) if q is not None else logp[0, :, sentinel]
            target += sign[c] * (logp[0, torch.arange(n), ids] - lq)
            for s in range(0, n, CHUNK):
                part, _ = _loglik(model, tok, context, replaced[s:s + CHUNK],
                                  mask.repeat(len(replaced[s:s + CHUNK]), 1), temp, q,
                                  sentinel)
                exact[s:s + len(part)] += sign[c] * (ll[0] - part)
    return exact, target


def _padded(q, logp):
    """``q [V]`` zero-padded to the head's width (a head may be padded past the embedding's
    rows; those logits are no token's)."""
    import torch

    return torch.nn.functional.pad(q.to(logp.dtype), (0, logp.shape[-1] - q.shape[0]))


def agreement(ctx, options, rows: list[int], null_kind: str) -> dict[str, dict]:
    """Per reward: r(I, exact), r(I - target, exact - target), the median size ratio of the
    input role, and the number of tokens."""
    import torch

    from methods.contexts import known_rewards, replay_messages
    from methods.p2t import verifier_influence
    from methods.p2t.null import null_distribution, null_embedding

    opts = replace(options, p2t_contexts="loo", p2t_null=null_kind)
    q = null_distribution(null_kind, ctx.embeddings().num_embeddings, ctx.tokenizer)
    null = (q, null_embedding(ctx.embeddings(), q)) if null_kind == "mean" else int(q.argmax())
    infl = verifier_influence(ctx, opts)
    out = {}
    for k, name in enumerate(ctx.reward_names):
        first, exact, tgt = [], [], []
        for r in rows:
            ex = ctx.examples[r]
            known = known_rewards(ex)
            if name not in known or torch.isnan(infl[r, k]).any():
                continue
            pair = (replay_messages(ex, known), replay_messages(ex, known - {name}))
            e, t = exact_influence(ctx, r, pair, null)
            n = len(e)
            first += infl[r, k, :n].tolist()
            exact += e.tolist()
            tgt += t.tolist()
        if len(first) < 3:
            continue
        f, e, t = map(torch.tensor, (first, exact, tgt))

        def r_(a, b):
            return float(torch.corrcoef(torch.stack([a, b]))[0, 1])

        size = (e - t).abs().median() / (f - t).abs().median().clamp(min=1e-12)
        out[name] = {"r_influence": r_(f, e), "r_input_role": r_(f - t, e - t),
                     "input_size_ratio": float(size), "tokens": len(first)}
    return out


def bench_p2t_exact(args: argparse.Namespace) -> int:
    from harness import engine as eng
    from harness.config import resolve
    from harness.method_config import method_config
    from harness.console import quiet
    from lab.bench import report
    from lab.bench.localisation import sampled_context
    from lab.flags import overrides_from

    quiet.configure_process()
    base = resolve(args.preset, overrides_from(args))
    group = base.rollout.group_size
    config = replace(base, seed=args.seed, method=method_config("p2t", {}, base.method),
                     rollout=replace(base.rollout,
                                     prompts_per_step=max(1, args.responses // group)))
    eng.init_single_process("nccl" if config.training.use_gpu else "gloo")
    meter = report.LoadMeter().start()
    trainer, ctx, _ = sampled_context(config)
    cfg = trainer.config
    rows = list(range(min(args.responses, ctx.response_ids.shape[0])))
    nulls = [x.strip() for x in args.nulls.split(",") if x.strip()]
    results = {n: agreement(ctx, trainer.options, rows, n) for n in nulls}
    m = report.machine() | meter.stop()
    label = args.label or f"p2t-exact-{cfg.task.task}"
    lines = [f"# {label}", "", f"`bench p2t-exact`: {cfg.task.task}, preset {args.preset}, "
             f"model {cfg.model.model}{' (warm-started)' if cfg.warmstart.warm_start else ''}, "
             f"{len(rows)} responses at seed {args.seed}; P2T leave-one-out influences against "
             "exact replacement of each response token by each null", "",
             f"Machine: {report.machine_line(m)}", "",
             "| null token | reward | r (whole influence) | r (input role: I - target vs "
             "exact - target) | input role size, exact / first order (median) | tokens |",
             "|---|---|---|---|---|---|"]
    for null, by_reward in results.items():
        token = ("the mean embedding" if null == "mean" else "`%s`" % ctx.tokenizer.
                 convert_ids_to_tokens(ctx.tokenizer.pad_token_id if null == "pad"
                                       else ctx.tokenizer.unk_token_id))
        for name, a in by_reward.items():
            lines.append(f"| {null} ({token}) | {name} | {a['r_influence']:.2f} | "
                         f"{a['r_input_role']:.2f} | {a['input_size_ratio']:.2f} | "
                         f"{a['tokens']} |")
    lines += ["", "The target term (the log-ratio of each response token against the null's at "
                  "its own position) is exact in both; the input role is what the first-order "
                  "term estimates. r near 0 or a size ratio far from 1 there means the Taylor "
                  "term does not follow replacement on this model.", ""]
    report.publish(label, {"bench": "p2t-exact", "machine": m, "task": cfg.task.task,
                           "preset": args.preset, "seed": args.seed, "responses": len(rows),
                           "results": results}, "\n".join(lines) + "\n", args.output_dir)
    return 0 if all(not math.isnan(a["r_influence"]) for v in results.values()
                    for a in v.values()) else 1


def add_parser(which) -> None:
    from lab.flags import add_config_flags

    p = which.add_parser("p2t-exact", help="P2T's first-order influences against exact token "
                                           "replacement by the null (pad, unk, mean) on the "
                                           "policy's own responses")
    p.add_argument("--preset", default="smoke-learn")
    p.add_argument("--responses", type=int, default=8, help="responses (G x prompts)")
    p.add_argument("--nulls", default=",".join(NULLS), help="comma-separated: pad, unk, mean")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--label", default="", help="report name (default p2t-exact-<task>)")
    p.add_argument("--output-dir", default=None,
                   help="default: runs/bench/ (results/bench refreshes the committed reports)")
    add_config_flags(p, only=("task", "model", "warm_start", "max_response_tokens",
                              "group_size", "data_dir", "plugins"))
    p.set_defaults(bench_fn=bench_p2t_exact)
