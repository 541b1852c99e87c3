#!/usr/bin/env bash
# Set up, then run the whole test suite (CPU, no network); extra arguments go to pytest,
# e.g. `scripts/test.sh -m "not slow"` skips the Ray + DeepSpeed tests.
# `scripts/test.sh --fast` runs the unit layer alone (no model, no DeepSpeed, no Ray; about two
# minutes here; tests/conftest.py says which tests are in it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "${1:-}" = "--fast" ]; then
    shift
    exec .venv/bin/python -m pytest -q -m unit "$@"
fi
exec .venv/bin/python -m pytest -q "$@"
