"""Test layers. ``unit``: loads no model, no DeepSpeed engine and no Ray (methods, rewards,
parsers, sandboxes, reports, checks, the architecture rules): ``scripts/test.sh --fast`` runs
it alone. Every other test is the integration layer: files whose tests mostly load models are
listed below, single ones carry ``@pytest.mark.model``, and Ray + DeepSpeed runs
``@pytest.mark.slow``. A unit test that builds a model (any Hugging Face model, tiny-random
too), a DeepSpeed engine or a Ray instance in its own process fails, naming the marker it
needs, so the fast layer stays fast."""
from pathlib import Path

import pytest

# files whose tests (nearly all) load a model, a DeepSpeed engine or Ray
MODEL_FILES = {"test_trainer.py", "test_explain.py", "test_packed.py", "test_models.py",
               "test_warmstart.py", "test_bench.py", "test_checkpoints.py",
               "test_vllm_engine.py", "test_vllm_api.py", "test_engine_lifecycle.py",
               "test_lean_rollout.py"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        heavy = (Path(str(item.fspath)).name in MODEL_FILES
                 or item.get_closest_marker("model") or item.get_closest_marker("slow"))
        if not heavy:
            item.add_marker(pytest.mark.unit)


def _refuse(what: str):
    def refuse(*args, **kwargs):
        raise AssertionError(f"this test {what}, so it is not a unit test: mark it "
                             "@pytest.mark.model (or slow), or list its file in MODEL_FILES "
                             "(tests/conftest.py)")
    return refuse


@pytest.fixture(autouse=True)
def _the_unit_layer_builds_no_model(request, monkeypatch):
    if request.node.get_closest_marker("unit") is None:
        return
    import transformers

    monkeypatch.setattr(transformers.PreTrainedModel, "__init__", _refuse("builds a model"))
    try:
        import ray
    except ImportError:
        return
    monkeypatch.setattr(ray, "init", _refuse("starts Ray"))
