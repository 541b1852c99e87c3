"""Config fields as command-line flags: one flag per field (``rollout.group_size`` ->
``--group-size``), grouped for ``--help`` with the preset's value as each default, TRL's names
as aliases where they mean the same, and the parsed flags back as config overrides."""
from __future__ import annotations

import argparse
import difflib
from pathlib import Path

from harness import config as cfg

_TYPES = {"int": int, "float": float, "str": str, "Optional[str]": str, "Optional[float]": float}
_METAVARS = {"int": "N", "float": "X"}
_NOT_FLAGS = {"seed", "preset"}  # --seeds and --preset are handled by the command itself

WHAT = "what to run"
# --help's groups, in order; a field goes to the first group naming it, else its section's
GROUPS = (
    (WHAT, ("method", "task", "model", "plugins")),
    ("method options (one the run's method does not read is refused)", ("@method",)),
    ("task and data", ("train_data", "data_dir", "@task")),
    ("evaluation", ("eval_limit", "eval_seed", "eval_every", "eval_max_response_tokens",
                    "eval_batch_size")),
    ("rollouts and engine", ("@rollout",)),
    ("training", ("steps", "lr", "weight_decay", "grad_clip", "clip_eps_low", "clip_eps_high",
                  "loss_agg", "kl_coef", "kl_type", "ppo_epochs", "ppo_mini_batches")),
    ("scale and placement", ("workers", "use_gpu", "gpus_per_worker", "cpus_per_worker",
                             "placement_strategy", "ray_address", "zero_stage",
                             "micro_batch_size", "gradient_checkpointing", "pack_prompts",
                             "dtype")),
    ("model", ("@model",)),
    ("warm start (supervised, before RL)", ("@warmstart",)),
    ("tracking", ("report_to", "mlflow_tracking_uri")),
    ("output, checkpoints and resuming", ("results_dir", "checkpoint_dir", "save_every",
                                          "keep_checkpoints", "max_failures")),
)

# TRL's GRPOConfig names for the same quantities (docs/runs.md has the table)
TRL_ALIASES = {
    "group_size": ("--num-generations",),
    "lr": ("--learning-rate",),
    "kl_coef": ("--beta",),
    "max_response_tokens": ("--max-completion-length",),
    "max_prompt_tokens": ("--max-prompt-length",),
    "steps": ("--max-steps",),
    "ppo_epochs": ("--num-iterations",),
    "clip_eps_low": ("--epsilon",),
    "clip_eps_high": ("--epsilon-high",),
    "grad_clip": ("--max-grad-norm",),
}
# TRL names whose meaning differs here: the hint an unknown flag gets
TRL_HINTS = {
    "--per-device-train-batch-size": "TRL counts completions per device; here "
                                     "--prompts-per-step counts prompts per step (each with "
                                     "--group-size responses) and --micro-batch-size the "
                                     "responses per forward",
    "--gradient-accumulation-steps": "accumulation follows from --prompts-per-step, "
                                     "--group-size, --workers and --micro-batch-size",
    "--num-train-epochs": "training length is --steps (each draws --prompts-per-step prompts)",
    "--seed": "--seeds N runs seeds 0..N-1, --seed-list K,K runs those",
    "--output-dir": "results go under --results-dir (checkpoints under --checkpoint-dir)",
    "--loss-type": "--loss-agg (token-mean | seq-mean-token-mean | seq-mean-token-sum | "
                   "seq-mean-token-sum-norm)",
    "--model-name-or-path": "--model (an embedded name or a local folder)",
    "--bf16": "--dtype bfloat16",
}


def formatter(prog: str) -> argparse.HelpFormatter:
    """--help at 100 columns, flags in a 34-column margin."""
    return argparse.HelpFormatter(prog, max_help_position=34, width=100)


def type_name(t) -> str:
    """A field's type as written (``"int"``): a file without postponed annotations (a plugin)
    gives the class itself."""
    if isinstance(t, str):
        return t
    return t.__name__ if isinstance(t, type) else str(t).replace("typing.", "")


def group_of(name: str, section: str | None) -> str:
    for title, members in GROUPS:
        if name in members or (section and f"@{section}" in members):
            return title
    return GROUPS[-1][0]


def _default_text(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if value in (None, "", ()):
        return "none"
    return str(value)


def _order(item: tuple[int, tuple[str, tuple]]) -> tuple[int, int, int]:
    """Group by group, a group's named fields in its order, then the rest as declared."""
    position, (name, (section, _)) = item
    title = group_of(name, section)
    index = [t for t, _ in GROUPS].index(title)
    members = dict(GROUPS)[title]
    return index, members.index(name) if name in members else len(members), position


def add_config_flags(parser: argparse.ArgumentParser, only: tuple[str, ...] = (),
                     preset: str | None = None, required: tuple[str, ...] = ()
                     ) -> dict[str, argparse._ArgumentGroup]:
    """One flag per config field (``only``: just the fields with these name prefixes), in
    --help's groups; ``preset``: the preset whose values the help shows as defaults;
    ``required``: fields the command needs given (checked by the command). Returns the groups
    by title (the command adds its own flags to them)."""
    shown = cfg.resolve(preset, {}) if preset else None
    groups: dict[str, argparse._ArgumentGroup] = {}
    if not only:
        for title, _ in GROUPS:
            groups[title] = parser.add_argument_group(title)
    ordered = sorted(enumerate(cfg.all_fields().items()), key=_order)
    for _, (name, (section, f)) in ordered:
        if name in _NOT_FLAGS or (only and not name.startswith(only)):
            continue
        target = groups.get(group_of(name, section), parser)
        flag = "--" + name.replace("_", "-")
        help_text = f.metadata.get("help", "")
        if name in required:
            help_text += " [required]"
        elif shown is not None:
            value = getattr(getattr(shown, section), name) if section else getattr(shown, name)
            help_text += f" [{_default_text(value)}]"
        former = tuple("--" + a.replace("_", "-") for a in f.metadata.get("aliases", ()))
        names = (flag, *TRL_ALIASES.get(name, ()), *former)
        if former:
            help_text += f" (formerly {', '.join(former)}: still read, for one release)"
        kind = type_name(f.type)
        if kind == "tuple[str, ...]":
            target.add_argument(flag.rstrip("s"), dest=name, action="append",
                                default=argparse.SUPPRESS, metavar="FILE_OR_MODULE",
                                help=help_text)
        elif kind == "bool":
            target.add_argument(*names, dest=name, action=argparse.BooleanOptionalAction,
                                default=argparse.SUPPRESS, help=help_text)
        else:
            metavar = "DIR" if name.endswith("_dir") else _METAVARS.get(kind, "NAME")
            if kind not in _TYPES:
                raise TypeError(f"option {name!r} has type {kind}; a flag takes int, float, str, "
                                "bool or Optional[str | float]")
            target.add_argument(*names, dest=name, type=_TYPES[kind],
                                default=argparse.SUPPRESS, metavar=metavar, help=help_text)
    return groups


def unknown_flag_hint(flag: str, parser: argparse.ArgumentParser) -> str:
    """What an unknown flag probably meant: TRL's name for something else here, or the
    closest known flag."""
    name = flag.split("=", 1)[0]
    if name in TRL_HINTS:
        return f"{name}: {TRL_HINTS[name]}"
    known = [s for a in parser._actions for s in a.option_strings if s.startswith("--")]
    close = difflib.get_close_matches(name, known, n=2, cutoff=0.6)
    return f"{name}: unknown" + (f"; did you mean {' or '.join(close)}?" if close else "")


def overrides_from(args: argparse.Namespace) -> dict:
    known = cfg.all_fields()
    out = {k: v for k, v in vars(args).items() if k in known}
    if "plugins" in out:
        out["plugins"] = plugin_entries(out["plugins"])
    return out


def plugin_entries(entries) -> tuple[str, ...]:
    """``--plugin`` values as a run records them: files by absolute path, modules by name."""
    return tuple(str(Path(p).resolve()) if p.endswith(".py") else p for p in entries)
