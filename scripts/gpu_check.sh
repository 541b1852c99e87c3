#!/usr/bin/env bash
# The GPU path, checked in one short run on one GPU (about 10 minutes, most of it the install):
#   1. installs the gpu extra (vLLM, its torch) into .venv-gpu, next to the CPU .venv
#   2. checks every vLLM call the engine makes against the installed vLLM (tests/test_vllm_api.py)
#   3. rollout tokens/s of vLLM vs HF generate on the same 32 BFCL prompts x G=4 (bench rollout)
#   4. one MRTPO and one GDPO step with colocated vLLM rollouts (sleep/wake, weight sync, the
#      log-prob check), each followed by a 32-item BFCL evaluation with the same engine
#   5. each step's split into phases and its peak GPU memory (bench steps)
# Everything it writes goes under runs/gpu-check/. Usage: bash scripts/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv-gpu
out=runs/gpu-check
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu_check: no NVIDIA GPU is visible here (nvidia-smi); run this on a GPU machine" >&2
    exit 2
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
mkdir -p "$out"

want=$(cat pyproject.toml requirements/*.txt scripts/gpu_check.sh | sha256sum | cut -c1-16)
if [ ! -f "$venv/.setup-done" ] || [ "$(cat "$venv/.setup-done")" != "$want" ]; then
    echo "gpu_check: installing the gpu extra into $venv"
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        -c requirements/constraints-gpu.txt -e '.[gpu,dev]'
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
        -r requirements/no-deps.txt
    echo "$want" > "$venv/.setup-done"
fi
py="$venv/bin/python"
"$py" -m harness.assets
"$py" -c "import torch, vllm; print(f'torch {torch.__version__}, vLLM {vllm.__version__}, ' \
f'CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}')"

echo "== vLLM API used by the engine"
"$py" -m pytest -q -p no:cacheprovider tests/test_vllm_api.py tests/test_vllm_engine.py

echo "== rollout tokens/s: vLLM vs HF generate, same prompts (32 prompts x G=4)"
"$py" -m harness bench rollout --preset smoke --task bfcl --use-gpu --dtype bfloat16 \
    --candidates hf-bf16,vllm --group-size 4 --batch-sizes 128 --max-response-tokens 256 \
    --label gpu-rollout --output-dir "$out"

echo "== one MRTPO and one GDPO step with vLLM rollouts, then a 32-item BFCL evaluation"
for method in mrtpo gdpo; do
    "$py" -m harness run --preset smoke --task bfcl --method "$method" --engine vllm \
        --use-gpu --dtype bfloat16 --zero-stage 3 --steps 1 --prompts-per-step 32 \
        --group-size 4 --max-response-tokens 256 --eval-limit 32 \
        --eval-max-response-tokens 256 --results-dir "$out" --force
done

echo "== step split (seconds per phase) and peak GPU memory (GB)"
"$py" -m harness bench steps "$out"/bfcl/mrtpo/*/* "$out"/bfcl/gdpo/*/*
echo "gpu_check: done; results under $out"
