#!/usr/bin/env bash
# Regenerate a paper table or figure: ./reproduce.sh table1 | ... | table9 | figure1 | ... | figure8 | all
#   [--preset smoke|paper] [--seeds N] [--data-dir DIR] [--model-dir DIR] [--dry-run]
# Sets up the environment first (idempotent), runs only the seeds that are not stored yet, then
# writes results/tables/NAME.{md,csv,tex} or results/figures/NAME.{png,pdf,md}.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh >&2
exec .venv/bin/python -m harness reproduce "$@"
