"""The vLLM versions the engine supports and every vLLM name it calls (checked against the
installed package by tests/test_vllm_api.py); importable without vLLM."""
from __future__ import annotations

# the range the gpu extra pins (pyproject.toml); other versions changed the weight-loading and
# sleep-mode calls this engine makes
SUPPORTED = (">=0.33.0", "<0.34")
INSTALL_HINT = "pip install -c requirements/constraints-gpu.txt -e '.[gpu]'"

# what this module calls, for the API test: (object path, method or None, the arguments it
# passes by position, in order, and the keyword arguments). Prompts go by position, as TRL and
# verl pass them: vLLM has made such parameters positional-only before.
VLLM_API: tuple[tuple[str, str | None, tuple[str, ...], tuple[str, ...]], ...] = (
    ("vllm.LLM", None, (), ("model", "tokenizer", "dtype", "seed", "gpu_memory_utilization",
                            "max_model_len", "enable_prefix_caching", "enable_sleep_mode",
                            "distributed_executor_backend", "tensor_parallel_size")),
    ("vllm.LLM", "generate", ("prompts",), ("sampling_params", "use_tqdm")),
    ("vllm.LLM", "sleep", (), ("level",)),
    ("vllm.model_executor.models.llama.LlamaForCausalLM", "load_weights", ("weights",), ()),
    ("vllm.model_executor.models.qwen2.Qwen2ForCausalLM", "load_weights", ("weights",), ()),
    ("vllm.LLM", "wake_up", (), ("tags",)),
    ("vllm.LLM", "reset_prefix_cache", (), ()),
    ("vllm.LLM", "apply_model", ("func",), ()),
    ("vllm.LLM", "collective_rpc", ("method",), ()),
    ("vllm.v1.engine.llm_engine.LLMEngine", "is_sleeping", (), ()),
    ("vllm.SamplingParams", None, (), ("n", "temperature", "top_p", "top_k", "max_tokens",
                                       "seed", "stop_token_ids", "prompt_logprobs",
                                       "detokenize")),
    ("vllm.inputs.TokensPrompt", None, (), ("prompt_token_ids",)),
)


def version_problem(installed: str | None) -> str:
    """Why this vLLM version cannot serve (``""``: it can). ``installed``: its version or None."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    if installed is None:
        return f"--engine vllm needs vLLM {','.join(SUPPORTED)}, which is not installed: " \
               f"{INSTALL_HINT}"
    try:
        ok = Version(installed) in SpecifierSet(",".join(SUPPORTED))
    except InvalidVersion:
        ok = False
    if not ok:
        return f"--engine vllm supports vLLM {','.join(SUPPORTED)}, found {installed}: " \
               f"{INSTALL_HINT}"
    return ""


def installed_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("vllm")
    except PackageNotFoundError:
        return None
