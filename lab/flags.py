"""Config fields as command-line flags: one flag per field (``rollout.group_size`` ->
``--group-size``), grouped for ``--help`` with the preset's value as each default, TRL's names
as aliases where they mean the same, and the parsed flags back as config overrides."""
from __future__ import annotations

import argparse
from pathlib import Path

from common.registry import close_names
from harness import config as cfg

_TYPES = {"int": int, "float": float, "str": str, "Optional[str]": str, "Optional[float]": float}
_METAVARS = {"int": "N", "float": "X"}
_NOT_FLAGS = {"seed", "preset"}  # --seeds and --preset are handled by the command itself

WHAT = "what to run"
# --help's groups, in order; a field goes to the first group naming it, else its section's
GROUPS = (
    (WHAT, ("method", "task", "model", "plugins")),
    ("training", ("steps", "lr", "weight_decay", "grad_clip", "clip_eps_low", "clip_eps_high",
                  "loss_agg", "kl_coef", "kl_type", "ppo_epochs", "ppo_mini_batches",
                  "update_dtype")),
    ("task and data", ("train_data", "data_dir", "@task")),
    ("evaluation", ("eval_limit", "eval_seed", "eval_every", "eval_max_response_tokens",
                    "eval_batch_size")),
    ("rollouts and engine", ("@rollout",)),
    ("scale and placement", ("workers", "use_gpu", "gpus_per_worker", "cpus_per_worker",
                             "placement_strategy", "ray_address", "zero_stage",
                             "micro_batch_size", "gradient_checkpointing", "pack_prompts",
                             "dtype")),
    ("model", ("@model",)),
    ("warm start (supervised, before RL)", ("@warmstart",)),
    # after the common settings: every registered method's options (the run's own apply)
    ("method options (one the run's method does not read is refused)", ("@method",)),
    ("tracking", ("report_to", "mlflow_tracking_uri")),
    ("output, checkpoints and resuming", ("results_dir", "checkpoint_dir", "save_every",
                                          "keep_checkpoints", "max_failures")),
)

# TRL's GRPOConfig names for the same quantities, as flags (``harness.config.TRL_NAMES``, which
# API keywords read too; docs/runs.md has the table)
TRL_ALIASES = {field: ("--" + name.replace("_", "-"),) for name, field in cfg.TRL_NAMES.items()}
# Other tools' flag names (TRL's GRPOConfig and transformers' TrainingArguments, lm-eval-harness,
# accelerate / torchrun) that are no flag here: name -> (what to pass here, or "" where nothing
# corresponds; a one-line explanation). An unknown flag is looked up with any case and with _ or
# - (HfArgumentParser and lm-eval spell them --save_steps); tests/test_flag_hints.py checks every
# flag named here exists on `run`.
FOREIGN_FLAGS: dict[str, tuple[str, str]] = {
    # TRL GRPOConfig / TrainingArguments
    "--per-device-train-batch-size": ("--prompts-per-step", "TRL counts completions per device; "
                                      "here --prompts-per-step counts prompts per step (each "
                                      "with --group-size responses) and --micro-batch-size the "
                                      "responses per forward"),
    "--gradient-accumulation-steps": ("", "accumulation follows from --prompts-per-step, "
                                      "--group-size, --workers and --micro-batch-size"),
    "--generation-batch-size": ("--prompts-per-step", "each step samples --prompts-per-step x "
                                "--group-size responses and updates on them"),
    "--steps-per-generation": ("--ppo-mini-batches", "optimizer steps per pass over one "
                               "step's rollouts"),
    "--num-train-epochs": ("--steps", "training length is in steps (each draws "
                           "--prompts-per-step prompts)"),
    "--seed": ("--seed-list K", "runs exactly seed K; --seeds N runs seeds 0..N-1"),
    "--data-seed": ("--seed-list K", "a seed also fixes the prompt sampling"),
    "--output-dir": ("--results-dir", "checkpoints go under --checkpoint-dir"),
    "--logging-dir": ("--results-dir", "the per-step log and the trackers' files go in the run's "
                      "folder under it"),
    "--run-name": ("", "a run's folder is <task>/<method>/<model>/<setting> under --results-dir"),
    "--loss-type": ("--loss-agg", "token-mean | seq-mean-token-mean | seq-mean-token-sum | "
                    "seq-mean-token-sum-norm; TRL's dapo is token-mean"),
    "--model-name-or-path": ("--model", "an embedded name or a local folder"),
    "--model-init-kwargs": ("--dtype", "the model loads with --dtype; --allow-download for a hub "
                            "id"),
    "--torch-dtype": ("--dtype", "float32 | bfloat16 | float16"),
    "--bf16": ("--dtype bfloat16", ""),
    "--fp16": ("--dtype float16", ""),
    "--use-cpu": ("--no-use-gpu", "CPU is the default; --use-gpu puts each worker on a GPU"),
    "--no-cuda": ("--no-use-gpu", "CPU is the default; --use-gpu puts each worker on a GPU"),
    "--save-steps": ("--save-every", "a checkpoint every N steps; 0 = off"),
    "--save-strategy": ("--save-every", "checkpoints are saved every N steps; 0 = off"),
    "--save-total-limit": ("--keep-checkpoints", "checkpoints kept per seed"),
    "--resume-from-checkpoint": ("--save-every", "rerunning the same command resumes from its "
                                 "latest checkpoint"),
    "--resume": ("--save-every", "a run resumes by itself: rerunning the same command continues "
                 "from its latest checkpoint (saved every --save-every N steps)"),
    "--eval-steps": ("--eval-every", "also evaluate every N steps; 0 = only after training"),
    "--eval-strategy": ("--eval-every", "every run evaluates after training; --eval-every N "
                        "also every N steps"),
    "--evaluation-strategy": ("--eval-every", "every run evaluates after training; --eval-every "
                              "N also every N steps"),
    "--do-eval": ("--eval-every", "every run evaluates after training; --eval-every N also "
                  "every N steps"),
    "--per-device-eval-batch-size": ("--eval-batch-size", "prompts per generate call during "
                                     "evaluation"),
    "--logging-steps": ("", "every step is logged (seed<k>.train.jsonl beside the result) and "
                        "sent to --report-to's trackers"),
    "--log-completions": ("", "every evaluated response is stored (seed<k>.predictions.jsonl); "
                          "`python -m harness explain` shows a sampled one's credit"),
    "--warmup-steps": ("", "the learning rate is constant (--lr), no warm-up; --warm-start is a "
                       "supervised fine-tune before RL, --warm-start-steps its length"),
    "--warmup-ratio": ("", "the learning rate is constant (--lr), no warm-up; --warm-start is a "
                       "supervised fine-tune before RL"),
    "--lr-scheduler-type": ("", "the learning rate is constant (--lr)"),
    "--optim": ("", "torch's AdamW (betas 0.9, 0.999, eps 1e-8) with --lr and --weight-decay"),
    "--adam-beta1": ("", "torch's AdamW defaults (betas 0.9, 0.999, eps 1e-8)"),
    "--adam-beta2": ("", "torch's AdamW defaults (betas 0.9, 0.999, eps 1e-8)"),
    "--adam-epsilon": ("", "torch's AdamW defaults (betas 0.9, 0.999, eps 1e-8)"),
    "--deepspeed": ("--zero-stage", "the DeepSpeed config is built from --zero-stage, "
                    "--micro-batch-size, --lr, --weight-decay and --grad-clip"),
    "--use-vllm": ("--engine vllm", "vLLM colocated in each worker's process"),
    "--vllm-mode": ("--engine vllm", "colocated in each worker's process; no server mode"),
    "--vllm-gpu-memory-utilization": ("--vllm-gpu-memory", "its share of the GPU's memory"),
    "--scale-rewards": ("", "how rewards are normalised is the method's (--method grpo: "
                        "within the group, by its std; `python -m harness list`); --whiten sets "
                        "the batch whitening after it, --conventions trl TRL's eps"),
    "--reward-weights": ("--method", "a task declares its rewards; a method weighs them "
                         "(`python -m harness list`)"),
    "--reward-funcs": ("--task", "a task declares its rewards"),
    "--sync-ref-model": ("", "the KL reference (--kl-coef) is the fixed initial policy"),
    "--repetition-penalty": ("", "rollouts sample with --temperature, --top-p and --top-k only"),
    "--min-p": ("", "rollouts sample with --temperature, --top-p and --top-k only"),
    "--max-new-tokens": ("--max-response-tokens", "--eval-max-response-tokens in evaluation"),
    "--use-peft": ("", "no LoRA/PEFT: every parameter trains (the warm start: the top "
                   "--warm-start-layers)"),
    "--lora-r": ("", "no LoRA/PEFT: every parameter trains (the warm start: the top "
                 "--warm-start-layers)"),
    "--dataset-name": ("--train-data", "a training set by name (`python -m harness list`); "
                       "--task is the benchmark"),
    "--push-to-hub": ("", "nothing is uploaded; results stay under --results-dir"),
    # accelerate / torchrun
    "--num-processes": ("--workers", "data-parallel Ray Train workers"),
    "--nproc-per-node": ("--workers", "data-parallel Ray Train workers"),
    # lm-eval-harness
    "--tasks": ("--task", "one benchmark or group; --also-evaluate adds more"),
    "--num-fewshot": ("", "no few-shot examples: each task's prompts are its own, zero-shot"),
    "--batch-size": ("--eval-batch-size", "prompts per generate call during evaluation; "
                     "training: --prompts-per-step"),
    "--max-batch-size": ("--eval-batch-size", "prompts per generate call during evaluation"),
    "--limit": ("--eval-limit", "a seeded, category-stratified subset of N items; 0 = all"),
    "--model-args": ("--model", "a name or local folder; --dtype and --allow-download set the "
                     "rest"),
    "--output-path": ("--results-dir", ""),
    "--log-samples": ("", "every evaluated response is stored with its verdict "
                      "(seed<k>.predictions.jsonl beside the result)"),
    "--device": ("--use-gpu", "one GPU per worker; CPU without it"),
    "--gen-kwargs": ("--eval-max-response-tokens", "evaluation is greedy; training samples with "
                     "--temperature, --top-p, --top-k and --max-response-tokens"),
    "--apply-chat-template": ("", "prompts are always in the model's chat template (the task "
                              "family's layout)"),
    "--system-instruction": ("", "the task family writes the system message"),
    "--include-path": ("--plugin", "register your own tasks (or methods) from a file or module"),
    "--wandb-args": ("--report-to wandb", ""),
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
    """A default as --help shows it: ``unset`` for no value (None, empty), which no option has
    as a value (``--whiten none`` is a value); a string with spaces at its ends or control
    characters quoted (``'\\n\\n'``)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if value in (None, "", ()):
        return "unset"
    if isinstance(value, str) and (not value.isprintable() or value != value.strip()):
        return repr(value)
    return str(value)


def _order(item: tuple[int, tuple[str, tuple]]) -> tuple[int, int, int]:
    """Group by group, a group's named fields in its order, then the rest as declared."""
    position, (name, (section, _)) = item
    title = group_of(name, section)
    index = [t for t, _ in GROUPS].index(title)
    members = dict(GROUPS)[title]
    return index, members.index(name) if name in members else len(members), position


def sft_lists(name: str, section: str | None) -> bool:
    """Whether ``sft --help`` lists a field: what the warm start reads (its task and data, the
    model, its own settings, the probe's sampling, scale and placement, the cache's and the
    plugins' paths). ``sft`` accepts a run's other flags too, unlisted, so that it takes the
    same flags as the ``run --warm-start`` it prepares."""
    if name in ("warm_start", "also_evaluate", "eval_limit", "eval_seed"):
        return False  # sft always warm-starts; it evaluates nothing
    return section in ("task", "model", "warmstart") or name in (
        "plugins", "results_dir", "group_size", "temperature", "top_p", "top_k",
        "max_prompt_tokens", "max_response_tokens", "workers", "use_gpu", "gpus_per_worker",
        "cpus_per_worker", "placement_strategy", "ray_address", "zero_stage",
        "micro_batch_size", "gradient_checkpointing")


def add_config_flags(parser: argparse.ArgumentParser, only: tuple[str, ...] = (),
                     preset: str | None = None, required: tuple[str, ...] = (),
                     listed=None) -> dict[str, argparse._ArgumentGroup]:
    """One flag per config field (``only``: just the fields with these name prefixes), in
    --help's groups; ``preset``: the preset whose values the help shows as defaults;
    ``required``: fields the command needs given (checked by the command); ``listed(name,
    section)``: false for a field whose flag is accepted but left out of --help (``sft_lists``).
    Abbreviated flags are refused on ``parser`` (``--seed`` would otherwise be ambiguous
    between --seeds and --seed-list, and ``--max-step`` silently --max-steps). Returns the
    groups by title (the command adds its own flags to them)."""
    parser.allow_abbrev = False
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
        if listed is not None and not listed(name, section):
            help_text = argparse.SUPPRESS
        elif name in required:
            help_text += " [required]"
        elif shown is not None:
            value = cfg.field_value(shown, section, name, f.default)
            help_text += f" [{_default_text(value)}]"
        former = tuple("--" + a.replace("_", "-") for a in f.metadata.get("aliases", ()))
        names = (flag, *TRL_ALIASES.get(name, ()), *former)
        if former and help_text != argparse.SUPPRESS:
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


def foreign_hint(name: str) -> str:
    """The hint for another tool's flag (``FOREIGN_FLAGS``), in any case and with _ or -;
    empty when it is none of them."""
    target, why = FOREIGN_FLAGS.get(name.lower().replace("_", "-"), ("", ""))
    if target:
        return f"{name}: use {target}" + (f" ({why})" if why else "")
    return f"{name}: {why}" if why else ""


def unknown_flag_hint(flag: str, parser: argparse.ArgumentParser) -> str:
    """What an unknown flag probably meant: another tool's name (``FOREIGN_FLAGS``), else the
    known flag it spells in another case or with _, else the flags it begins, else the closest
    ones."""
    name = flag.split("=", 1)[0]
    hint = foreign_hint(name)
    if hint:
        return hint
    known = {s[2:]: s for a in parser._actions for s in a.option_strings if s.startswith("--")}
    close = close_names(name.lstrip("-").replace("_", "-"), known, n=2, cutoff=0.6, family=4)
    return f"{name}: unknown" + (f"; did you mean {' or '.join(known[c] for c in close)}?"
                                 if close else "")


def overrides_from(args: argparse.Namespace) -> dict:
    known = cfg.all_fields()
    out = {k: v for k, v in vars(args).items() if k in known}
    if "plugins" in out:
        out["plugins"] = plugin_entries(out["plugins"])
    return out


def plugin_entries(entries) -> tuple[str, ...]:
    """``--plugin`` values as a run records them: files by absolute path, modules by name."""
    return tuple(str(Path(p).resolve()) if p.endswith(".py") else p for p in entries)


def seed_count(text: str) -> int:
    """``--seeds 3`` -> 3 (seeds 0, 1, 2): at least one, or the run would do nothing."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of seeds, e.g. 3") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give 1 or more seeds (--seeds 3 runs "
                                         "seeds 0, 1, 2)")
    return n


def seed_list(text: str) -> list[int]:
    """``--seed-list 0,2`` -> [0, 2]: non-negative, distinct, in the order given."""
    try:
        seeds = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give seeds as comma-separated integers, "
                                         "e.g. 1,2") from None
    if not seeds or min(seeds) < 0 or len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"{text!r}: give one or more distinct seeds >= 0")
    return seeds
