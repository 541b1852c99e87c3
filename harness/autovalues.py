"""Config values decided by the machine: a field set to ``auto`` is resolved once, before the
run, so the value stored with each seed (and checked when seeds are pooled) is the one that
ran."""
from __future__ import annotations

from dataclasses import replace


def auto_values(config):
    """``config`` (a RunConfig) with its ``auto`` fields decided for this machine:
    ``update_dtype`` is bfloat16 with GPUs (every GPU the presets target computes in bf16) and
    on a CPU whose oneDNN has bf16 kernels (AMX or AVX-512 BF16), float32 elsewhere (bf16
    without those kernels is several times slower than float32)."""
    t = config.training
    if t.update_dtype != "auto":
        return config
    from harness.provenance import machine

    bf16 = t.use_gpu or bool(machine().get("bf16"))
    return replace(config, training=replace(t, update_dtype="bfloat16" if bf16 else "float32"))
