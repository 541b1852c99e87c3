#!/usr/bin/env bash
# Set up, then run the whole test suite (CPU, no network); extra arguments go to pytest,
# e.g. `scripts/test.sh -m "not slow"` skips the Ray + DeepSpeed tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q "$@"
