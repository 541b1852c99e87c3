"""``bench tcrm``: a TCRM value model trained offline on rollouts of a task, against a reward
model trained on the same pairs with the Bradley-Terry loss alone, measured where the paper
measures it: the pairwise accuracy of held-out pairs at the final token and at the middle one.

The policy (warm-started where the preset says so) samples ``--responses`` responses to the
task's training prompts in groups of the preset's size; the verifiers score them. The rollouts
are written beside the report (``<label>.rollouts.jsonl``: each response's prompt, token ids
and per-reward outcomes) and ``--rollouts FILE`` trains on a stored file instead of sampling.
Prompts are split (seeded) into training and held-out ones; both models start from the same
copy of the starting policy with the same heads and train ``--epochs`` passes over the training
prompts' groups with the same optimizer; then, on every held-out pair of responses to one
prompt whose reward differs (per reward), a model is right at a token when the preferred
response's value there is the larger (ties: half). The middle token of a response of L tokens
is its token ``floor((L - 1) / 2)``. Intervals: 95 %, resampling held-out prompts
(``lab.bench.localisation.interval``). ``--save DIR`` keeps the TCRM model as an HF folder
(``--tcrm-model``, ``--p2t-reward-model`` with ``--p2t-reward-label``).
"""
from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import replace
from pathlib import Path

MIN_PROMPTS = 5  # fewer held-out prompts than this: no interval


def sample_rollouts(trainer, responses: int) -> list[dict]:
    """``responses`` responses (whole groups) to the trainer's training prompts, scored."""
    from harness.train.sample import sample

    cfg = trainer.config
    group = cfg.rollout.group_size
    per_round = cfg.rollout.prompts_per_step
    rows: list[dict] = []
    prompts = responses // group
    done = 0
    while done < prompts:
        take = min(per_round, prompts - done)
        sampled = sample(trainer.rollout, trainer.task, trainer.train_examples,
                         trainer.sampler.next(take), 0, 1, replace(
                             cfg, rollout=replace(cfg.rollout, prompts_per_step=take)),
                         done, trainer.cuda)
        ro = sampled.rollout
        for i, ex in enumerate(sampled.rows):
            n = int(ro.response_mask[i].sum())
            rows.append({"prompt": f"{done}:{sampled.groups[i]}", "id": ex.id,
                         "messages": [dict(m) for m in ex.messages],
                         "response_ids": ro.response_ids[i, :n].tolist(),
                         "rewards": {rw.name: _number(sampled.rewards[i][k])
                                     for k, rw in enumerate(trainer.task.rewards)}})
        done += take
    return rows


def _number(x: float):
    """A reward for JSON: NaN (the reward does not apply) as null."""
    return None if x != x else float(x)


def read_rollouts(path: str) -> list[dict]:
    """A stored rollouts file; a malformed line names the file and line."""
    rows = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            row["response_ids"], row["rewards"], row["messages"]  # noqa: B018
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}:{n}: not a rollout row ({e}); each line is a JSON "
                             "object with prompt, messages, response_ids and rewards") from None
        rows.append(row)
    if not rows:
        raise ValueError(f"{path}: no rollouts")
    return rows


def to_rollouts(rows: list[dict], tokenizer, rewards: list[str]):
    """Rows -> ``methods.tcrm.online.Rollouts`` (one group per prompt)."""
    import torch

    from methods.tcrm.online import Rollouts, render_prompts

    class _Ex:  # render_prompts reads .messages
        def __init__(self, messages):
            self.messages = messages

    keys = list(dict.fromkeys(r["prompt"] for r in rows))
    width = max(len(r["response_ids"]) for r in rows)
    ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r["response_ids"])] = torch.tensor(r["response_ids"], dtype=torch.long)
        mask[i, :len(r["response_ids"])] = 1
    value = torch.tensor([[float("nan") if r["rewards"].get(k) is None else
                           float(r["rewards"][k]) for k in rewards] for r in rows])
    return Rollouts(render_prompts(tokenizer, [_Ex(r["messages"]) for r in rows]), ids, mask,
                    value, torch.tensor([keys.index(r["prompt"]) for r in rows]))


def measure(hits: dict, seed: int) -> dict:
    """Per reward and pooled: accuracy at each position with its interval."""
    from lab.bench.localisation import interval

    pooled = {"final": [], "middle": [], "prompt": []}
    for h in hits.values():
        for key in pooled:
            pooled[key] += h[key]
    out = {}
    for name, h in {**hits, "all": pooled}.items():
        if not h["prompt"]:
            continue
        out[name] = {"pairs": len(h["prompt"]), "prompts": len(set(h["prompt"]))}
        for key in ("final", "middle"):
            mean, low, high = interval(h[key], seed, clusters=h["prompt"])
            out[name][key] = {"mean": mean, "low": low, "high": high}
    return out


def markdown(what: str, machine: str, facts: dict, results: dict) -> str:
    lines = [what, "", f"Machine: {machine}", "",
             f"{facts['responses']} responses to {facts['prompts']} prompts ({facts['train']} "
             f"prompts train, {facts['heldout']} held out); training {facts['train_s']:.0f} s "
             "a model. Pairwise accuracy of held-out pairs (the preferred response's value "
             "is the larger), mean over prompts of the prompt's pairs [95 % interval, "
             f"resampling prompts; Student t below 10, cut at 0 and 100; none below "
             f"{MIN_PROMPTS} prompts]; 50 % is chance.", "",
             "| reward | pairs (prompts) | model | final token | middle token |",
             "|---|---|---|---|---|"]
    for name in results["tcrm"]:
        for model in ("tcrm", "bt"):
            r = results[model][name]
            cells = [f"{100 * r[k]['mean']:.1f} [{100 * max(0.0, r[k]['low']):.1f}, "
                     f"{100 * min(1.0, r[k]['high']):.1f}]" if r["prompts"] >= MIN_PROMPTS else
                     f"{100 * r[k]['mean']:.1f} (too few prompts for an interval)"
                     for k in ("final", "middle")]
            lines.append(f"| {name} | {r['pairs']} ({r['prompts']}) | {model} | "
                         + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def bench_tcrm(args: argparse.Namespace) -> int:
    from harness import engine as eng
    from harness.config import resolve
    from harness.method_config import method_config
    from harness.console import quiet
    from harness.trainer import Trainer
    from lab.bench import report
    from lab.flags import overrides_from
    from methods.tcrm import online
    from methods.tcrm import model as vm

    quiet.configure_process()
    base = resolve(args.preset, overrides_from(args))
    group = base.rollout.group_size
    if args.responses < 2 * group or args.responses % group:
        raise ValueError(f"--responses {args.responses} must be a multiple of the group size "
                         f"{group} (--group-size), at least two groups")
    config = replace(base, seed=args.seed, method=method_config("tcrm", {}, base.method))
    eng.init_single_process("nccl" if config.training.use_gpu else "gloo")
    meter = report.LoadMeter().start()
    trainer = Trainer(config)
    tok, rewards = trainer.tokenizer, [rw.name for rw in trainer.task.rewards]
    label = args.label or f"tcrm-{config.task.task}"
    t0 = time.perf_counter()
    rows = read_rollouts(args.rollouts) if args.rollouts else sample_rollouts(
        trainer, args.responses)
    sample_s = time.perf_counter() - t0
    prompts = list(dict.fromkeys(r["prompt"] for r in rows))
    random.Random(args.seed).shuffle(prompts)
    held = set(prompts[:max(1, round(args.heldout * len(prompts)))])
    train_rows = [r for r in rows if r["prompt"] not in held]
    results, spent = {}, []
    opts = trainer.options
    for model, look, smooth in (("tcrm", opts.tcrm_lookahead, opts.tcrm_smoothness),
                                ("bt", 0.0, 0.0)):
        # fresh rows per model: their cached frozen-block states are the model's own
        test = to_rollouts([r for r in rows if r["prompt"] in held], tok, rewards)
        train = to_rollouts(train_rows, tok, rewards)
        state = online.ValueState(None, tuple(rewards), args.seed, opts.tcrm_train_layers,
                                  opts.tcrm_lr, buffer=[train])
        state.ensure(trainer.models["initial"])
        t1 = time.perf_counter()
        online.train(state, args.epochs, trainer.ds_config["train_micro_batch_size_per_gpu"],
                     look, smooth, tok.pad_token_id)
        spent.append(time.perf_counter() - t1)
        v = online.predict(state.model, test, 8, tok.pad_token_id, state.frozen)
        results[model] = measure(online.pair_hits(v, test, rewards), args.seed)
        if model == "tcrm" and args.save:
            vm.save(state.model, tok, args.save)
        del state
    m = report.machine() | meter.stop()
    facts = {"responses": len(rows), "prompts": len(prompts), "train": len(prompts) - len(held),
             "heldout": len(held), "sample_s": sample_s, "train_s": sum(spent) / len(spent)}
    what = (f"# {label}\n\n`bench tcrm`: {config.task.task}, preset {args.preset}, model "
            f"{config.model.model}{' (warm-started)' if config.warmstart.warm_start else ''}, "
            f"{'rollouts ' + args.rollouts if args.rollouts else f'{args.responses} sampled responses (G={group})'}, "
            f"seed {args.seed}; {args.epochs} epochs, lr {opts.tcrm_lr:g}, top "
            f"{opts.tcrm_train_layers} blocks and the heads trained; TCRM with lookahead "
            f"{opts.tcrm_lookahead:g} and smoothness {opts.tcrm_smoothness:g} against "
            "Bradley-Terry alone (bt)")
    data = {"bench": "tcrm", "label": label, "machine": m, "task": config.task.task,
            "preset": args.preset, "config": config.to_dict(), "epochs": args.epochs,
            "facts": facts, "results": results, "saved": args.save or None}
    report.publish(label, data, markdown(what, report.machine_line(m), facts, results),
                   args.output_dir)
    if not args.rollouts:
        folder = Path(args.output_dir or "runs/bench")
        from harness.results import atomic_write_jsonl

        atomic_write_jsonl(folder / f"{label}.rollouts.jsonl", rows)
    return 0


def add_parser(which) -> None:
    from lab.flags import add_config_flags

    p = which.add_parser("tcrm", help="a TCRM value model trained offline on a task's rollouts "
                                      "vs Bradley-Terry alone: held-out pairwise accuracy at "
                                      "the final and the middle token")
    p.add_argument("--preset", default="smoke-learn")
    p.add_argument("--responses", type=int, default=128,
                   help="responses to sample (a multiple of the group size)")
    p.add_argument("--rollouts", default=None,
                   help="train on a stored rollouts file (<label>.rollouts.jsonl) instead")
    p.add_argument("--heldout", type=float, default=0.25, help="share of prompts held out")
    p.add_argument("--epochs", type=int, default=4, help="passes over the training prompts")
    p.add_argument("--save", default=None, help="write the TCRM model here (an HF folder)")
    p.add_argument("--seed", type=int, default=0, help="sampling, split and head seed")
    p.add_argument("--label", default="", help="report name (default tcrm-<task>)")
    p.add_argument("--output-dir", default=None,
                   help="default: runs/bench/ (results/bench refreshes the committed reports)")
    add_config_flags(p, only=("task", "model", "warm_start", "max_response_tokens",
                              "group_size", "micro_batch_size", "data_dir", "engine", "dtype",
                              "plugins", "tcrm_lr", "tcrm_lookahead", "tcrm_smoothness",
                              "tcrm_train_layers"))
    p.set_defaults(bench_fn=bench_tcrm)
