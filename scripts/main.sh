#!/usr/bin/env bash
# The main job on the embedded default: GDPO on tool calling (offline RLLA-format generator),
# SmolLM2-135M-Instruct after a supervised warm start (smoke-learn preset: trained once, cached
# under .cache/warm-start), evaluated on a 20-item stratified BFCL v4 subset; prints the
# training rewards of the first and last steps, then the benchmark table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m harness run --method gdpo --task bfcl --preset smoke-learn --seeds 1 "$@"
