"""``python -m harness``: run, sft, list, score, explain, bench, reproduce, compare.

Every config field is a flag (``--group-size 8``); see ``python -m harness run --help``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness import config as cfg
from harness.assets import MissingAssetError

from lab.flags import (WHAT, add_config_flags, formatter, overrides_from, plugin_entries,
                       unknown_flag_hint, seed_count, seed_list)
from lab.summary import signal_note, summary_table, training_rewards


def prog() -> str:
    """How this program was called, to repeat in usage and hints: the interpreter's path
    relative to the working folder when it is under it (``.venv/bin/python -m harness``, the
    way that works from a fresh shell), else ``python -m harness``."""
    import os

    exe = Path(sys.executable)
    try:
        rel = exe.relative_to(Path.cwd())
    except ValueError:
        return "python -m harness"
    return f"{rel.as_posix() if os.sep == '/' else rel} -m harness"


class Parser(argparse.ArgumentParser):
    """argparse with errors as one line and a pointer to ``--help`` (not the whole usage)."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"error: {message} (`{self.prog} --help` lists the flags)\n")


def version() -> str:
    """The installed distribution that holds this package, its version, and the commit."""
    from importlib.metadata import packages_distributions, version as installed

    from harness import provenance

    names = packages_distributions().get("harness", [])
    found = f"{names[0]} {installed(names[0])}" if names else "harness (not installed)"
    commit, dirty = provenance.commit_state()
    return f"{found} (commit {commit[:12]}{'-dirty' if dirty else ''})"


def cmd_run(args: argparse.Namespace) -> int:
    from harness import run as runs
    from harness import startup
    from harness.launch import pending_seeds, run_seeds, stale_seeds, validate

    startup.mark("cli_ready")

    overrides = overrides_from(args)
    missing = [f"--{k}" for k in ("method", "task") if k not in overrides]
    if missing:
        print(f"error: say what to run: {' and '.join(missing)} (`{prog()} run --method NAME "
              f"--task NAME`; `{prog()} list` shows the names, --dry-run the resolved settings "
              "without running)", file=sys.stderr)
        return 2
    seeds = args.seed_list if args.seed_list is not None else list(range(args.seeds))
    run = runs.resolve(args.preset, overrides, seeds, args.force,
                       rerun_stale=args.rerun_stale, allow_mixed_code=args.allow_mixed_code)
    if args.dry_run:
        from lab.dryrun import dry_run

        return dry_run(run)
    validate(run)  # the verdict the dry run prints: nothing has started yet
    startup.mark("run_checked")
    config = run.config
    print(run.training_line)
    if run.untrained_note:
        print(run.untrained_note)
    seed_runs = run.seed_runs()  # each seed's files, resolved once
    todo = pending_seeds(run)
    stale = {} if args.force else stale_seeds(run)
    again = [s for s in stale if args.rerun_stale and s not in todo]
    for seed_run in seed_runs:
        s = seed_run.config.seed
        if s not in todo and s not in again:
            other = (f"; made by other code (fingerprint {stale[s]}): --rerun-stale remakes it"
                     if s in stale else "")
            print(f"seed {s}: stored at {seed_run.result} (skipped; --force reruns it{other})")
    run_seeds(run, todo, force=args.force)
    run_seeds(run, again, force=True)
    print()
    rewards = training_rewards(seed_runs)
    if rewards:
        print(rewards)
        print()
    note = signal_note(config, seed_runs)
    if note:
        print(note + "\n")
    evaluations = run.benchmarks
    for k, each in enumerate(evaluations):  # one table per benchmark (--also-evaluate)
        if len(evaluations) > 1:
            print(("\n" if k else "") + f"{each.task.task}:")
        print(summary_table(each, run.seed_runs(k), args.allow_mixed_code))
    return 0


def cmd_sft(args: argparse.Namespace) -> int:
    """Train (or find in the cache) the supervised warm start of a run's settings."""
    import json

    from harness import assets
    from harness import run as runs
    from harness.backend import start_ray, warm_start
    from harness.launch import validate
    from harness.warmstart import cache

    run = runs.resolve(args.preset, {**overrides_from(args), "warm_start": True},
                       purpose="sft")
    if args.dry_run:
        from lab.dryrun import dry_run

        return dry_run(run)
    validate(run)
    config, path = run.config, run.warm_start_folder
    if cache.is_complete(path) and args.force:
        import shutil

        shutil.rmtree(path)
    if not cache.is_complete(path):
        if config.model.model == assets.SMOLLM2_NAME:
            assets.prepare_smollm2()
        start_ray(address=config.training.ray_address)
        steps = tuple(int(x) for x in args.probe_steps.split(",") if x.strip())
        warm_start(run, args.probe, steps)
    info = json.loads((path / cache.MARKER).read_text())
    hist = info["history"]
    print(f"warm start: {path}")
    print(f"  {info['demonstrations']} demonstrations, {len(hist)} steps, "
          f"loss {hist[0]['loss']:.3f} -> {hist[-1]['loss']:.3f}, {info['seconds']:.0f} s")
    for p in info.get("probes", []):
        rewards = ", ".join(f"{k.split('/')[-1]} {v:.2f}" for k, v in p.items()
                            if k.startswith("reward/"))
        print(f"  probe after step {p['step']:>3} ({p['probe_prompts']} unseen prompts x "
              f"G={p['probe_group_size']}): format rate {p.get('format_rate', float('nan')):.2f}"
              f", groups with signal {p['groups_with_signal']:.2f}; {rewards}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    import methods
    from tasks import TASKS, TRAIN_SETS

    print("methods (compose presets with +, e.g. a+b; see docs/methods.md):")
    for name, m in methods.METHODS.items():
        print(f"  {name:<14} {m.help}  [{m.source}]")
    print("tasks (what --task evaluates; training sets in order of preference):")
    for name, t in TASKS.items():
        print(f"  {name:<28} {t.family:<6} train: {', '.join(t.train_sets):<18} {t.help}")
    print("training sets:")
    for name, ts in TRAIN_SETS.items():
        where = "--data-dir" if ts.needs_data_dir else "offline"
        print(f"  {name:<14} {ts.family:<6} {where:<10} {ts.help}")
    print("presets:")
    for name, p in cfg.PRESETS.items():
        print(f"  {name:<14} {p.help}")
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    from lab.explain import explain, parse_where

    try:
        where = parse_where(args.where) if args.where else None
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    shown = explain(Path(args.run), args.example, Path(args.output), args.response, args.model,
                    args.group_size, args.seed, where)
    if where:
        print(f"prompt {shown.example}, response {shown.response} has {args.where}")
    print(f"wrote {shown.html}\nwrote {shown.png}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog=prog(), description=__doc__, formatter_class=formatter)
    parser.add_argument("--version", action="store_true",
                        help="the installed version and the checkout's commit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    run = sub.add_parser("run", help="train and evaluate seeds; print mean ± std",
                         formatter_class=formatter,
                         usage=f"{prog()} run --method NAME --task NAME [options]",
                         description="Train and evaluate seeds of one setting, then print "
                                     "their mean ± std. Values in [brackets] are the default "
                                     "preset's (smoke); another --preset changes them.")
    groups = add_config_flags(run, preset="smoke", required=("method", "task"))
    what = groups[WHAT]
    what.add_argument("--preset", default="smoke", help="starting preset (see `list`) [smoke]")
    which = what.add_mutually_exclusive_group()
    which.add_argument("--seeds", type=seed_count, default=1, metavar="N",
                       help="run seeds 0..N-1 [1]")
    which.add_argument("--seed-list", type=seed_list, default=None, metavar="K,K,...",
                       help="run exactly these seeds, e.g. 1,2 (to spread one cell's seeds over "
                            "cores or machines: each stores into the same run folder)")
    what.add_argument("--force", action="store_true", help="rerun seeds already stored")
    what.add_argument("--rerun-stale", action="store_true",
                      help="rerun the stored seeds made by other code than this tree's")
    what.add_argument("--allow-mixed-code", action="store_true",
                      help="pool stored seeds of other code with this tree's in the summary "
                           "(footnoted with the commits), as compare --allow-mixed-code")
    what.add_argument("--dry-run", action="store_true",
                      help="print the resolved settings, the seeds and folders it would write, "
                           "the checks' verdict (the one the run acts on) and a time estimate; "
                           "start nothing, write nothing")
    sft = sub.add_parser("sft", help="the supervised warm start of a run's settings (cached; "
                                     "`run --warm-start` uses it)", formatter_class=formatter,
                         usage=f"{prog()} sft --task NAME [options]",
                         description="Values in [brackets] are the default preset's "
                                     "(smoke-learn). Listed: the settings the warm start "
                                     "reads; a run's other flags are accepted too (so `sft` "
                                     "takes the flags of the `run --warm-start` it prepares).")
    from lab.flags import sft_lists

    groups = add_config_flags(sft, preset="smoke-learn", listed=sft_lists)
    what = groups[WHAT]
    what.add_argument("--preset", default="smoke-learn",
                      help="starting preset (see `list`) [smoke-learn]")
    what.add_argument("--probe", type=int, default=0, metavar="PROMPTS",
                      help="afterwards, sample G responses to this many training prompts and "
                           "report the format rate and the share of groups with reward signal")
    what.add_argument("--probe-steps", default="", metavar="S1,S2",
                      help="also probe after these steps (0: the base model), to choose the "
                           "warm start's length")
    what.add_argument("--force", action="store_true", help="retrain even if cached")
    what.add_argument("--dry-run", action="store_true",
                      help="print the resolved settings and the checks' verdict; train nothing")
    listing = sub.add_parser("list", help="methods, tasks, training sets, presets")
    listing.add_argument("--plugin", dest="plugins", action="append", default=[],
                         metavar="FILE_OR_MODULE", help="import first: show its methods and "
                                                        "tasks too")
    from lab import score

    score.add_parser(sub)
    from lab.bench import add_parser as add_bench

    add_bench(sub)
    from lab.reports import compare, reproduce

    reproduce.add_parser(sub)
    compare.add_parser(sub)
    ex = sub.add_parser("explain", help="one response's per-token credit under a run's method and the one it reduces to "
                                        "(HTML + PNG)")
    ex.add_argument("--run", required=True, help="a stored result (seedK.json) whose config to use")
    ex.add_argument("--example", type=int, required=True, help="index into the training set")
    ex.add_argument("--response", type=int, default=0, help="which of the G samples to show")
    ex.add_argument("--model", default=None, help="another model (e.g. a checkpoint folder)")
    ex.add_argument("--group-size", type=int, default=None, help="samples drawn (default: run's G)")
    ex.add_argument("--seed", type=int, default=0, help="sampling seed")
    ex.add_argument("--where", default="", metavar="REWARD=V,...",
                    help="show the first sampled response with these reward values instead of "
                         "--response, searching prompts from --example on (e.g. format=1,"
                         "execution=0: a well-formed query that fails)")
    ex.add_argument("--output", default="runs/explain", help="folder for the HTML and PNG")
    return parser


def load_plugins_first(argv: list[str] | None) -> None:
    """Import the ``--plugin`` files before the parser is built, so that the options they
    register are flags (with help) like the built-in ones."""
    from harness.plugins import load_plugins

    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--plugin", dest="plugins", action="append", default=[])
    found, _ = pre.parse_known_args(sys.argv[1:] if argv is None else argv)
    load_plugins(plugin_entries(found.plugins))


def main(argv: list[str] | None = None) -> int:
    try:
        load_plugins_first(argv)
    except (ImportError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if args.version:
        print(version())
        return 0
    if args.command is None:
        parser.print_help()
        return 2
    if unknown:
        chosen = parser._subparsers._group_actions[0].choices[args.command]
        hints = "; ".join(unknown_flag_hint(u, chosen) for u in unknown if u.startswith("-"))
        extra = [u for u in unknown if not u.startswith("-")]
        print(f"error: {hints or 'unexpected arguments'}"
              + (f" (unexpected {' '.join(extra)})" if extra else "")
              + f" (`{prog()} {args.command} --help` lists the flags)", file=sys.stderr)
        return 2
    handlers = {"run": cmd_run, "sft": cmd_sft, "list": cmd_list, "score": lambda a: a.handler(a),
                "explain": cmd_explain, "bench": lambda a: a.bench_fn(a),
                "reproduce": lambda a: a.handler(a), "compare": lambda a: a.handler(a)}
    try:
        return handlers[args.command](args)
    except BrokenPipeError:  # the reader stopped early (`... --dry-run | head`): not an error
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's own advice
        return 141
    except KeyboardInterrupt as exc:  # Ctrl-C: one line, what the same command does next
        from harness.launch import Interrupted

        print("\n" + (str(exc) if isinstance(exc, Interrupted) else
                      "interrupted: nothing of the current step was stored; the same command "
                      "goes on from what is stored"), file=sys.stderr)
        return 130
    except (KeyError, ValueError, FileNotFoundError, ImportError, MissingAssetError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
