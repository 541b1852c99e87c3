"""Test layers. ``unit``: loads no model, no DeepSpeed engine and no Ray (methods, rewards,
parsers, sandboxes, reports, checks, the architecture rules): ``scripts/test.sh --fast`` runs
it alone, in about two minutes here. Every other test is the integration layer: files whose
tests mostly load models are listed below, single ones carry ``@pytest.mark.model``, and Ray +
DeepSpeed runs ``@pytest.mark.slow``."""
from pathlib import Path

import pytest

# files whose tests (nearly all) load a model, a DeepSpeed engine or Ray
MODEL_FILES = {"test_trainer.py", "test_explain.py", "test_packed.py", "test_models.py",
               "test_warmstart.py", "test_bench.py", "test_checkpoints.py",
               "test_vllm_engine.py", "test_vllm_api.py"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        heavy = (Path(str(item.fspath)).name in MODEL_FILES
                 or item.get_closest_marker("model") or item.get_closest_marker("slow"))
        if not heavy:
            item.add_marker(pytest.mark.unit)
