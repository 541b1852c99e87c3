"""Config values decided by the machine: a field set to ``auto`` is resolved once, before the
run, so the value stored with each seed is the one that ran (``update_dtype`` is part of the
setting; ``rollout_dtype``, decided like the machine's kind, is not: docs/runs.md)."""
from __future__ import annotations

from dataclasses import replace
from functools import cache


def auto_values(config):
    """``config`` (a RunConfig) with its ``auto`` fields decided for this machine (idempotent):
    ``update_dtype`` and ``rollout_dtype`` are bfloat16 with GPUs (every GPU the presets target
    computes in bf16) and on a CPU with native bf16 instructions (AVX512-BF16 or AMX, read from
    its flags: ``harness.provenance.native_bf16``), float32 elsewhere (where oneDNN emulates
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
    from harness.provenance import native_bf16

    native = native_bf16()
    if native is None:
        import torch

        native = torch.backends.mkldnn.is_available() and \
            torch.ops.mkldnn._is_mkldnn_bf16_supported()
    return bool(native)
