"""The run's own problems, each with its fix: a part of the one check of a run
(``harness.preflight.problems``), and what only a training worker can check
(``worker_problems``: its actual world size, its machine).

Each takes the resolved ``harness.run.Run`` and reads the method, task and engine it resolved
(no name is looked up again). ``settings_problems`` looks at the settings (value types first);
``verifier_info_problems`` at the loaded training examples (a method that replays verifier
information needs it on every example). Both return every problem at once, so that one failed
start lists all there is to fix.
"""
from __future__ import annotations

import math

from typing import Sequence

from harness.config import RunConfig

KL_TYPES = ("low_var_kl", "kl", "mse")
DTYPES = ("float32", "bfloat16", "float16")
UPDATE_DTYPES = ("float32", "bfloat16")


def _group_method(method) -> bool:
    """Its advantages compare a response with the others of its group (every reward term
    does: a group of one has no spread, so every advantage would be 0)."""
    return method.pg_term


def local_responses(run, world: int) -> int:
    """Responses one worker trains on per step: its whole groups."""
    r = run.config.rollout
    return r.prompts_per_step // max(world, 1) * r.group_size


PLACEMENTS = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
_KINDS = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,),
          "Optional[str]": (str, type(None)), "Optional[float]": (int, float, type(None)),
          "tuple[str, ...]": (tuple, list)}


def type_problems(config: RunConfig) -> list[str]:
    """Values of the wrong type (an API keyword ``lr="abc"``, a hand-edited stored config):
    checked first, since every other check compares them as numbers."""
    from harness.config import ABSENT, all_fields, field_value

    out = []
    for name, (section, f) in all_fields().items():
        value = field_value(config, section, name)
        if value is ABSENT:  # another method's option
            continue
        kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        allowed = _KINDS.get(kind)
        if allowed is None:
            continue
        wrong = not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed)
        if wrong:
            want = kind.replace("Optional[", "").rstrip("]")
            out.append(f"{name} is {value!r} (a {type(value).__name__}); give a {want} "
                       f"(--{name.replace('_', '-')})")
        elif isinstance(value, float) and not math.isfinite(value):
            # every comparison with NaN is False: no range check below would catch it
            out.append(f"{name} is {value}; give a finite number (--{name.replace('_', '-')})")
    return out


def settings_problems(run, world: int | None = None, on_worker: bool = False) -> list[str]:
    """``world``: the number of workers that will share each step (default: the config's
    ``workers``; a trainer passes the process group's actual size). ``on_worker``: checked
    in a training worker; the driver of a run that joins a cluster (``--ray-address``) may have
    no GPU itself, so it leaves the device checks to the workers."""
    from harness.loss import AGG_MODES

    config = run.config
    out: list[str] = type_problems(config)
    if out:  # the checks below compare these values as numbers
        return out
    r, t, m, method = config.rollout, config.training, config.method, run.method
    if r.group_size < 1:
        out.append(f"group_size is {r.group_size}; use --group-size 2 or more")
    elif r.group_size == 1 and _group_method(method):
        out.append(f"method {m.method!r} normalises rewards within each prompt's group, and a "
                   "group of 1 response has no spread (every advantage would be 0); use "
                   "--group-size 2 or more")
    if r.prompts_per_step < 1:
        out.append(f"prompts_per_step is {r.prompts_per_step}; use --prompts-per-step 1 or more")
    world = t.workers if world is None else world
    if world < 1:
        out.append(f"workers is {world}; use --workers 1 or more")
    elif r.prompts_per_step % world:
        out.append(f"prompts_per_step ({r.prompts_per_step}) is not divisible by workers "
                   f"({world}): each worker takes whole groups; use --prompts-per-step "
                   f"{(r.prompts_per_step // world + 1) * world} or --workers "
                   "dividing it")
    if t.steps < 0:
        out.append(f"steps is {t.steps}; use --steps 0 (evaluate only) or more")
    if t.ppo_mini_batches < 1 or t.ppo_epochs < 1:
        out.append("ppo_epochs and ppo_mini_batches must be 1 or more")
    elif (local := local_responses(run, world)) % t.ppo_mini_batches:
        out.append(f"each worker's {local} responses per step cannot be split into "
                   f"{t.ppo_mini_batches} equal mini-batches; use --ppo-mini-batches dividing "
                   f"{local}")
    if t.micro_batch_size < 1:
        out.append(f"micro_batch_size is {t.micro_batch_size}; use --micro-batch-size 1 or more")
    if not t.lr > 0:
        out.append(f"lr is {t.lr}; use a positive --lr")
    if t.clip_eps_low < 0 or t.clip_eps_high < 0 or t.clip_eps_low >= 1:
        out.append(f"clip epsilons ({t.clip_eps_low}, {t.clip_eps_high}) must be >= 0, the "
                   "lower one below 1")
    if t.grad_clip < 0 or t.kl_coef < 0 or t.weight_decay < 0:
        out.append("grad_clip, kl_coef and weight_decay must be >= 0")
    if t.loss_agg not in AGG_MODES:
        out.append(f"unknown loss_agg {t.loss_agg!r}; use one of {', '.join(AGG_MODES)}")
    if t.kl_type not in KL_TYPES:
        out.append(f"unknown kl_type {t.kl_type!r}; use one of {', '.join(KL_TYPES)}")
    if t.zero_stage not in (0, 1, 2, 3):
        out.append(f"zero_stage is {t.zero_stage}; use 0, 1, 2 or 3")
    if config.model.dtype not in DTYPES:
        out.append(f"unknown dtype {config.model.dtype!r}; use one of {', '.join(DTYPES)}")
    if t.update_dtype not in UPDATE_DTYPES:  # "auto" is decided when the run is resolved
        out.append(f"unknown update_dtype {t.update_dtype!r}; use one of "
                   f"{', '.join(UPDATE_DTYPES)} or auto")
    if not r.temperature > 0:
        out.append(f"temperature is {r.temperature}; use a positive --temperature")
    if not 0 < r.top_p <= 1:
        out.append(f"top_p is {r.top_p}; use a value in (0, 1]")
    if r.top_k < 0:
        out.append(f"top_k is {r.top_k}; use 0 (off) or more")
    if min(r.max_prompt_tokens, r.max_response_tokens, r.eval_max_response_tokens,
           r.eval_batch_size) < 1:
        out.append("max_prompt_tokens, max_response_tokens, eval_max_response_tokens and "
                   "eval_batch_size must be 1 or more")
    out += method.problems(run.options)  # the method's own options check themselves
    if run.task is not None:  # and against the task's rewards (a value model's heads)
        out += method.reward_problems(run.options, [rw.name for rw in run.task.rewards])
    out += run.family_options.problems() if run.family_options is not None else []
    here = on_worker or not t.ray_address
    out += model_problems(run, here) + device_problems(run, here)
    if t.save_every < 0 or t.keep_checkpoints < 1 or t.max_failures < 0:
        out.append("save_every and max_failures must be >= 0 (0 = off), keep_checkpoints >= 1")
    if config.task.eval_limit < 0:
        out.append(f"eval_limit is {config.task.eval_limit}; use 0 (the whole benchmark) or a "
                   "number of items")
    if t.eval_every < 0:
        out.append(f"eval_every is {t.eval_every}; use 0 (after training only) or more")
    from harness.train import stopping

    try:
        stopping.parse(t.stop_when, t.stop_window)
    except ValueError as exc:
        out.append(str(exc))
    from harness import tracking

    out += tracking.problems(t.report_to)  # before Ray: a missing library names its extra
    ws = config.warmstart
    if ws.warm_start and min(ws.warm_start_steps, ws.warm_start_batch) < 1:
        out.append("warm_start_steps and warm_start_batch must be 1 or more")
    elif ws.warm_start and world >= 1 and ws.warm_start_batch % world:
        out.append(f"warm_start_batch ({ws.warm_start_batch}) is not divisible by workers "
                   f"({world}): each worker takes an equal share; use --warm-start-batch "
                   f"{(ws.warm_start_batch // world + 1) * world}")
    if ws.warm_start and not ws.warm_start_lr > 0:
        out.append(f"warm_start_lr is {ws.warm_start_lr}; use a positive --warm-start-lr")
    if ws.warm_start_layers < 0:
        out.append(f"warm_start_layers is {ws.warm_start_layers}; use 0 (every parameter) or "
                   "a number of top blocks")
    return out


def worker_problems(run, world: int) -> list[str]:
    """What a training worker checks of a run the driver checked: only the facts it alone
    sees. Its process group's size, when it is not the ``--workers`` the driver checked; and,
    when the driver joined a cluster (``--ray-address``: it left the model folder, the CUDA
    devices and the installs to the workers), this machine's. Otherwise nothing: the driver's
    check stands."""
    t = run.config.training
    if world == t.workers and not t.ray_address:
        return []
    return settings_problems(run, world=world, on_worker=True)


def model_problems(run, here: bool = True) -> list[str]:
    """The model must be embedded, a folder holding an HF model (``config.json``), or (online)
    a hub id; a paper preset (``Preset.published``) trains a model folder, never an embedded
    stand-in. ``here``: see ``device_problems`` (on a cluster the folder may exist on the
    workers' nodes only)."""
    from pathlib import Path

    from harness.models import EMBEDDED

    config = run.config
    m = config.model
    if run.preset.published and m.model in EMBEDDED:
        return [f"preset {config.preset!r} trains a paper model, not the embedded {m.model!r}; "
                "pass --model FOLDER (an HF model folder) or --model-dir DIR holding it"]
    if not here or m.model in EMBEDDED:
        return []
    folder = Path(m.model).expanduser()
    if folder.is_dir():
        return model_folder_problems(folder)
    if m.allow_download:
        return []
    looked = f" ({Path(m.model_dir).expanduser() / m.model} does not exist)" if m.model_dir else ""
    return [f"model {m.model!r} is neither an embedded model nor a folder{looked}; pass "
            f"--model-dir DIR (a folder holding {Path(m.model).name}/) or --model FOLDER"]


def cuda_available(run, here: bool = True) -> bool | None:
    """Whether this machine has a CUDA device; None when not asked (no GPU setting, an engine
    that does not care) or not this machine's to say (a cluster's driver)."""
    if here and (run.config.training.use_gpu or run.engine.probes_cuda):
        import torch

        return torch.cuda.is_available()
    return None


def device_problems(run, here: bool = True) -> list[str]:
    """GPU, rollout engine and placement settings. ``here``: the workers run on this machine,
    so its CUDA devices and its installs are theirs. Each engine checks its own settings
    (``EngineEntry.problems``): this module names none of them."""
    config = run.config
    r, t = config.rollout, config.training
    out = []
    cuda = cuda_available(run, here)
    if t.use_gpu and cuda is False:
        out.append("use_gpu is set but this machine has no CUDA device; use --no-use-gpu "
                   "(the smoke presets) or run on a GPU machine with the gpu extra")
    if run.engine.problems is not None:
        out += run.engine.problems(config, here, cuda)
    if r.rollout_logprob_tolerance < 0:
        out.append(f"rollout_logprob_tolerance is {r.rollout_logprob_tolerance}; use >= 0")
    if t.placement_strategy not in PLACEMENTS:
        out.append(f"unknown placement_strategy {t.placement_strategy!r}; use one of "
                   f"{', '.join(PLACEMENTS)}")
    if t.use_gpu and not t.gpus_per_worker > 0:
        out.append(f"gpus_per_worker is {t.gpus_per_worker}; use a positive value with "
                   "--use-gpu")
    if t.cpus_per_worker < 0:
        out.append(f"cpus_per_worker is {t.cpus_per_worker}; use 0 (auto) or more")
    return out


def verifier_info_problems(run, train: Sequence) -> list[str]:
    """What the training examples lack for this method (checked on every example): a method
    with extra passes or loss terms re-reads responses under contexts built from each
    example's verifier information."""
    readers = run.method.verifier_info_readers(run.options)
    if not readers:
        return []
    for example in train:
        if not example.verifier_info:
            passes = ", ".join(readers)
            return [f"method {run.method.name!r} re-reads each response with and without "
                    f"its verifiers' information ({passes}), and the training "
                    f"examples of task {run.task.name!r} carry none (first: {example.id!r}); use a "
                    "method without extra passes or a task family that provides it"]
    return []


def task_problems(task, data_dir: str | None) -> list[str]:
    """What the task itself reports before training (its ``preflight``: e.g. a package its
    benchmark's evaluation code imports), so that a run cannot train and then fail to score."""
    from pathlib import Path

    if task.preflight is None:
        return []
    return [f"task {task.name!r}: {p}"
            for p in task.preflight(Path(data_dir) if data_dir else None)]


WEIGHTS = ("model.safetensors", "pytorch_model.bin")  # each alone, or sharded with an index
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")


def model_folder_problems(folder) -> list[str]:
    """What an HF model folder lacks that loading it would fail on after Ray starts: a readable
    ``config.json``, the weights (every shard its index names), a tokenizer."""
    import json

    config = folder / "config.json"
    if not config.is_file():
        return [f"model folder {folder} holds no config.json: not an HF model folder; "
                "give the folder a model was saved to (save_pretrained)"]
    try:
        json.loads(config.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        where = f"line {exc.lineno}: {exc.msg}" if isinstance(exc, json.JSONDecodeError) \
            else str(exc)
        return [f"{config}: not valid JSON ({where}); save the model again (save_pretrained)"]
    out = []
    for name in WEIGHTS:
        index = folder / f"{name}.index.json"
        if index.is_file():
            try:
                shards = set(json.loads(index.read_text())["weight_map"].values())
            except (ValueError, KeyError, AttributeError) as exc:
                out.append(f"{index}: not a weight index ({exc}); save the model again")
                break
            missing = sorted(s for s in shards if not (folder / s).is_file())
            if missing:
                out.append(f"model folder {folder}: {len(missing)} of the {len(shards)} weight "
                           f"files its index names are missing ({', '.join(missing[:3])}"
                           f"{', ...' if len(missing) > 3 else ''}); copy them there")
            break
        if (folder / name).is_file():
            break
    else:
        out.append(f"model folder {folder} holds no weights (model.safetensors, "
                   "pytorch_model.bin or their sharded index): save the model there "
                   "(save_pretrained)")
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        out.append(f"model folder {folder} holds no tokenizer (tokenizer.json, tokenizer.model "
                   "or vocab.json): save it beside the model (tokenizer.save_pretrained)")
    return out

