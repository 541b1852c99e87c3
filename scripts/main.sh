#!/usr/bin/env bash
# The main job on the embedded default: GDPO on tool calling (offline RLLA-format generator),
# SmolLM2-135M-Instruct, smoke preset, evaluated on a 20-item stratified BFCL v4 subset.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m harness run --method gdpo --task bfcl --preset smoke --seeds 1 "$@"
