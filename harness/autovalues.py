"""Config values decided by the machine: a field set to ``auto`` is resolved once, before the
run, so the value stored with each seed is the one that ran (``update_dtype`` is part of the
setting; ``rollout_dtype``, decided like the machine's kind, is not: docs/runs.md)."""
from __future__ import annotations

from dataclasses import replace
from functools import cache
from pathlib import Path

# CPU flags (Linux's /proc/cpuinfo) of native bf16 arithmetic: x86's AVX512-BF16 or AMX,
# Arm's BF16 extension
NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})


def auto_values(config):
    """``config`` (a RunConfig) with its ``auto`` fields decided for this machine (idempotent):
    ``update_dtype`` and ``rollout_dtype`` are bfloat16 with GPUs (every GPU the presets target
    computes in bf16) and on a CPU with native bf16 instructions (AVX512-BF16 or AMX, read from
    its flags: :func:`native_bf16`), float32 elsewhere (where oneDNN emulates
    bf16, several times slower than float32)."""
    t, r = config.training, config.rollout
    if "auto" not in (t.update_dtype, r.rollout_dtype):
        return config
    dtype = "bfloat16" if t.use_gpu or bf16_here() else "float32"
    if t.update_dtype == "auto":
        config = replace(config, training=replace(t, update_dtype=dtype))
    if r.rollout_dtype == "auto":
        config = replace(config, rollout=replace(r, rollout_dtype=dtype))
    return config


@cache
def bf16_here() -> bool:
    """Whether this CPU has native bf16 instructions (read once per process; where its flags
    cannot be read, whether oneDNN has bf16 kernels)."""
    native = native_bf16()
    return onednn_bf16() if native is None else native


def cpu_flags() -> frozenset[str] | None:
    """The CPU's feature flags as Linux lists them (x86 ``flags``, Arm ``Features``); None
    where they cannot be read (another OS)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return None


def native_bf16(flags: frozenset[str] | None = None) -> bool | None:
    """Whether the CPU computes bf16 in its own instructions (AVX512-BF16, AMX, Arm BF16), read
    from its flags; None where they cannot be read. Not :func:`onednn_bf16`, which is also true
    on AVX-512 without BF16, where oneDNN emulates bf16, slower than float32."""
    flags = cpu_flags() if flags is None else flags
    return None if flags is None else bool(flags & NATIVE_BF16_FLAGS)


def onednn_bf16() -> bool:
    """Whether oneDNN runs bf16 kernels here, natively or emulated (the lean engine's packed
    bf16 linear needs them)."""
    import torch

    try:
        return bool(torch.backends.mkldnn.is_available()
                    and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False
