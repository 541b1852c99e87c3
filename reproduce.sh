#!/usr/bin/env bash
# Regenerate a paper table or figure: ./reproduce.sh table1 | ... | table9 | figure1 | ... | figure8 | all
#   [--preset smoke|paper] [--seeds N] [--data-dir DIR] [--model-dir DIR] [--dry-run]
# Sets up the environment first (idempotent), runs only the seeds that are not stored yet, then
# writes results/tables/NAME.{md,csv,tex} or results/figures/NAME.{png,pdf,md}.
set -euo pipefail
cd "$(dirname "$0")"
for arg in "$@"; do
    case "$arg" in
        -h|--help)  # help needs no setup: with no environment yet, this script's own
            if [ ! -x .venv/bin/python ]; then
                sed -n '2,5p' "$0" | cut -c3-
                echo "(the environment is set up on the first real run: bash scripts/setup.sh;"
                echo " then ./reproduce.sh --help lists every option)"
                exit 0
            fi
            exec .venv/bin/python -m harness reproduce --help ;;
    esac
done
bash scripts/setup.sh >&2
exec .venv/bin/python -m harness reproduce "$@"
