"""Every vLLM class, method and keyword the engine uses exists in the installed vLLM with that
signature. Skips without vLLM (the CPU install); run it in an environment with the gpu extra:
``pip install -c requirements/constraints-gpu.txt -e '.[gpu,dev]'`` (no GPU needed)."""
import importlib
import inspect

import pytest

from harness.rollouts import vllm as engine

vllm = pytest.importorskip("vllm", reason="the gpu extra (vLLM) is not installed")


def resolve(path: str):
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def parameters(obj) -> dict:
    target = obj
    if inspect.isclass(obj):
        hints = getattr(obj, "__annotations__", {})
        if issubclass(obj, dict) and hints:  # a TypedDict: its keys are its fields
            return {k: None for k in hints}
        # msgspec / dataclass structs expose their fields as the constructor's parameters
        fields = getattr(obj, "__struct_fields__", None)
        if fields:
            return {k: None for k in fields}
        target = obj.__init__
    return dict(inspect.signature(target).parameters)


def test_the_installed_version_is_supported():
    assert engine.version_problem(engine.installed_version()) == ""


@pytest.mark.parametrize("path, method, positional, keywords", engine.VLLM_API,
                         ids=[f"{p}.{m or '__init__'}" for p, m, _, _ in engine.VLLM_API])
def test_every_call_the_engine_makes_exists(path, method, positional, keywords):
    obj = resolve(path)
    if method is not None:
        assert hasattr(obj, method), f"{path} has no {method}"
        obj = getattr(obj, method)
    params = parameters(obj)
    takes_any = any(p is not None and p.kind is inspect.Parameter.VAR_KEYWORD
                    for p in params.values())
    missing = [k for k in keywords if k not in params]
    if takes_any and method is None and inspect.isclass(resolve(path)):
        # LLM(**kwargs) forwards unknown keywords to EngineArgs: check them there
        from vllm.engine.arg_utils import EngineArgs

        fields = set(inspect.signature(EngineArgs).parameters)
        missing = [k for k in missing if k not in fields]
    assert not missing, f"{path}.{method or '__init__'} lacks {missing} (has {sorted(params)})"
    # what the engine passes by keyword may not be positional-only, and what it passes by
    # position must be the leading parameters (after self), in that order
    kinds = {k: p.kind for k, p in params.items() if p is not None}
    positional_only = [k for k in keywords if kinds.get(k) is inspect.Parameter.POSITIONAL_ONLY]
    assert not positional_only, f"{path}.{method}: {positional_only} are positional-only"
    if positional:
        leading = [k for k, kind in kinds.items() if k != "self" and kind in (
            inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        assert leading[:len(positional)] == list(positional), \
            f"{path}.{method} takes {leading[:len(positional)]} first, not {list(positional)}"


@pytest.mark.parametrize("path", ["vllm.model_executor.models.llama.LlamaForCausalLM",
                                  "vllm.model_executor.models.qwen2.Qwen2ForCausalLM"])
def test_load_weights_of_a_vllm_model_returns_the_names_it_loaded(path):
    # the engine's unwritten-parameter check relies on this return value (SmolLM2 is a Llama,
    # the paper's models are Qwen2)
    sig = inspect.signature(resolve(path).load_weights)
    assert "weights" in sig.parameters
    assert "set" in str(sig.return_annotation)


def test_top_k_zero_is_off_and_prompt_logprobs_are_raw():
    # sampling_kwargs passes our top_k (0 = off) as it is; the sync check compares the
    # policy's temperature-1 log-probs with the engine's prompt log-probs, which must be raw
    from vllm.engine.arg_utils import EngineArgs

    vllm.SamplingParams(top_k=0, temperature=1.0)  # accepted
    with pytest.raises(Exception):
        vllm.SamplingParams(top_k=-2)
    assert inspect.signature(EngineArgs).parameters["logprobs_mode"].default == "raw_logprobs"
