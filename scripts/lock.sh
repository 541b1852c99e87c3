#!/usr/bin/env bash
# Remake the locks that scripts/setup.sh installs, after a pin in requirements/cpu.txt or
# requirements/no-deps.txt changed: every package the pins need, at one version each, with the
# hashes of its files on PyPI (universal: every platform's markers, Python 3.11).
#   requirements/cpu.lock      cpu.txt with its dependencies, torch left out (setup.sh installs
#                              torch through pip: the machine's CPU build, not PyPI's CUDA one)
#   requirements/no-deps.lock  no-deps.txt as it is (installed without dependencies)
# The resolution reads torch 2.13.0's CPU build for its dependencies: give the folder that holds
# its wheel (default: pip's find-links on this machine, /opt/wheels).
set -euo pipefail
cd "$(dirname "$0")/.."
wheels=${1:-/opt/wheels}
[ -x .venv/bin/uv ] || { echo "lock: run bash scripts/setup.sh first (it installs uv)" >&2; exit 1; }
uv=.venv/bin/uv
common=(--python-version 3.11 --universal --generate-hashes --no-header --quiet)
"$uv" pip compile requirements/cpu.txt -c requirements/constraints-cpu.txt "${common[@]}" \
    --find-links "$wheels" --override <(echo "torch==2.13.0+cpu") --no-emit-package torch \
    -o requirements/cpu.lock
"$uv" pip compile requirements/no-deps.txt --no-deps "${common[@]}" -o requirements/no-deps.lock
echo "lock: requirements/cpu.lock and requirements/no-deps.lock remade"
