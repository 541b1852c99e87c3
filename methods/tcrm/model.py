"""TCRM's value model: a transformer body with one scalar head per reward, read at every token.

It is an HF sequence classifier (``AutoModelForSequenceClassification``, ``num_labels`` = the
task's rewards, ``id2label`` their names, ``tcrm_rewards`` in its config), so a saved one is an
ordinary HF folder: the class reads the head at a sequence's last token (TCRM's final value
``v(T)``), which is what P2T's reward-model variant reads (``--p2t-reward-model`` with
``--p2t-reward-label``), and TCRM reads the same head at every token through the body.
"""
from __future__ import annotations

import copy
import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from common.lazy import lazy

torch = lazy("torch", globals())  # imported on first use: common/lazy.py

REWARDS_KEY = "tcrm_rewards"  # the config field naming the heads


def _labels(rewards: Sequence[str]) -> dict:
    return {"num_labels": len(rewards), "id2label": dict(enumerate(rewards)),
            "label2id": {r: i for i, r in enumerate(rewards)}}


def from_policy(policy, rewards: Sequence[str], seed: int):
    """A value model whose body is a copy of ``policy``'s (an HF causal LM) and whose heads are
    new (drawn from a generator seeded by ``seed``: the caller's random stream is untouched)."""
    from transformers import AutoModelForSequenceClassification

    module = getattr(policy, "module", policy)
    config = copy.deepcopy(module.config)
    for key, value in _labels(rewards).items():
        setattr(config, key, value)
    setattr(config, REWARDS_KEY, list(rewards))
    config.architectures = None
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForSequenceClassification.from_config(config, dtype=torch.float32)
    model.base_model.load_state_dict(module.base_model.state_dict())
    # on the policy's device (a GPU run's value model trains there too)
    return _ready(model.to(next(module.parameters()).device), config)


def from_folder(path: str, rewards: Sequence[str], seed: int):
    """A value model read from an HF folder: a saved TCRM model of the same rewards (its heads
    kept), or any causal LM / backbone (its body; new heads seeded by ``seed``)."""
    from transformers import AutoConfig, AutoModelForSequenceClassification

    config = AutoConfig.from_pretrained(path, local_files_only=True)
    saved = getattr(config, REWARDS_KEY, None)
    if saved is not None and list(saved) != list(rewards):
        raise ValueError(f"--tcrm-model {path}: a TCRM model of the rewards {list(saved)}, "
                         f"this task's are {list(rewards)}; give one trained on this task's "
                         "rewards, or a plain backbone")
    kwargs = {} if saved is not None else _labels(rewards)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForSequenceClassification.from_pretrained(
            path, local_files_only=True, dtype=torch.float32, **kwargs)
    setattr(model.config, REWARDS_KEY, list(rewards))
    return _ready(model, model.config)


def _ready(model, config):
    if config.get_text_config().pad_token_id is None:
        # the class needs it to find a batch's last tokens; the body never reads it
        config.pad_token_id = config.get_text_config().eos_token_id
    return model.eval()  # no dropout: a value is a function of the tokens


def check_tokenizer(path: str, tokenizer) -> None:
    """A value model from another folder must read the policy's token ids."""
    from transformers import AutoTokenizer

    theirs = AutoTokenizer.from_pretrained(path, local_files_only=True)
    if theirs.get_vocab() != tokenizer.get_vocab():
        raise ValueError(f"--tcrm-model {path}: its tokenizer differs from the policy's; TCRM "
                         "reads the policy's token ids, so give a model of the same tokenizer "
                         "(e.g. another size of the policy's family)")


def train_layers(model, layers: int) -> list:
    """Freeze the body but its top ``layers`` blocks and final norm (-1: train everything);
    the heads always train. Returns the trainable parameters."""
    for p in model.parameters():
        p.requires_grad_(layers < 0)
    if layers >= 0:
        body = model.base_model
        blocks = list(body.layers)[len(body.layers) - layers:] if layers else []
        for module in blocks + [getattr(body, "norm", None), model.score]:
            if module is not None:
                for p in module.parameters():
                    p.requires_grad_(True)
    return [p for p in model.parameters() if p.requires_grad]


# bodies whose forward runs ``layers`` in order then ``norm`` on ``inputs_embeds`` as given (no
# scaling of the embeddings): their frozen blocks can run once and the top ones on their output
SPLITTABLE = ("llama", "qwen2", "qwen3", "mistral")


@contextmanager
def _blocks(body, keep: slice, norm: bool):
    """The body with only the blocks ``keep`` (and without its final norm unless ``norm``)."""
    layers, final = body.layers, body.norm
    body.layers = torch.nn.ModuleList(list(layers)[keep])
    if not norm:
        body.norm = torch.nn.Identity()
    try:
        yield body
    finally:
        body.layers, body.norm = layers, final


def frozen_blocks(model, layers: int) -> int:
    """How many of the body's first blocks are frozen and can run once (0: none; the whole
    model runs each time)."""
    body = model.base_model
    if layers < 0 or getattr(model.config, "model_type", "") not in SPLITTABLE:
        return 0
    return max(0, len(body.layers) - layers)


@dataclass
class Encoded:
    """Rows of (prompt, response) right-padded, and where each value is read."""

    ids: Any  # [m, W] long
    attn: Any  # [m, W]
    index: Any  # [m, T + 1] the position of v(-1), v(0), ... v(T-1) in each row
    keep: Any  # [m, T + 1] bool


def encode(prompts: Sequence[Sequence[int]], response_ids: "torch.Tensor",
           response_mask: "torch.Tensor", pad_id: int) -> Encoded:
    m, t = response_ids.shape
    lengths = [int(x) for x in response_mask.sum(dim=1).tolist()]
    rows = [list(p) + response_ids[i, :lengths[i]].tolist() for i, p in enumerate(prompts)]
    width = max(len(r) for r in rows)
    ids = torch.full((m, width), pad_id, dtype=torch.long)
    attn = torch.zeros(m, width, dtype=torch.long)
    index = torch.zeros(m, t + 1, dtype=torch.long)
    keep = torch.zeros(m, t + 1, dtype=torch.bool)
    for i, r in enumerate(rows):  # right padding: each row's positions start at 0
        ids[i, :len(r)] = torch.tensor(r)
        attn[i, :len(r)] = 1
        index[i, :lengths[i] + 1] = torch.arange(len(prompts[i]) - 1, len(r))
        keep[i, :lengths[i] + 1] = True
    return Encoded(ids, attn, index, keep)


def trunk(model, frozen: int, enc: Encoded) -> "torch.Tensor":
    """[m, W, H] the output of the first ``frozen`` blocks (no gradient: they do not train)."""
    device = next(model.parameters()).device
    with torch.no_grad(), _blocks(model.base_model, slice(0, frozen), norm=False) as body:
        return body(input_ids=enc.ids.to(device), attention_mask=enc.attn.to(device),
                    use_cache=False).last_hidden_state


def values(model, prompts: Sequence[Sequence[int]], response_ids: "torch.Tensor",
           response_mask: "torch.Tensor", pad_id: int, frozen: int = 0,
           states: Optional["torch.Tensor"] = None) -> "torch.Tensor":
    """The heads at the prompt's last token and at every response token.

    Args:
        prompts: m token-id lists (the rendered prompt each response follows).
        response_ids, response_mask: [m, T].
        frozen: the body's first blocks whose output is ``states`` ([m, W, H], from
            :func:`trunk` on the same rows; computed here when None); 0: the whole body runs.
    Returns: [m, K, T + 1]: column 0 is ``v(-1)`` (after the prompt), column t + 1 is ``v(t)``
        (after response token t); 0 past a response's end. Gradient as the caller's mode.
    """
    enc = encode(prompts, response_ids, response_mask, pad_id)
    device = next(model.parameters()).device
    body, attn = model.base_model, enc.attn.to(device)
    if frozen:
        states = trunk(model, frozen, enc) if states is None else states[:, :enc.ids.shape[1]]
        with _blocks(body, slice(frozen, None), norm=True) as top:
            hidden = top(inputs_embeds=states.to(device), attention_mask=attn,
                         use_cache=False).last_hidden_state
    else:
        hidden = body(input_ids=enc.ids.to(device), attention_mask=attn,
                      use_cache=False).last_hidden_state
    scores = model.score(hidden).float()  # [m, W, K]
    out = scores.gather(1, enc.index.to(device)[..., None].expand(-1, -1, scores.shape[-1]))
    return (out * enc.keep.to(device)[..., None]).permute(0, 2, 1).cpu()


def save(model, tokenizer, folder: str) -> None:
    """The value model as an HF folder (written beside, then moved into place: a reader never
    sees half of it)."""
    import shutil

    folder = os.path.abspath(folder)
    tmp = folder + ".partial"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    old = folder + ".old"
    shutil.rmtree(old, ignore_errors=True)
    if os.path.exists(folder):
        os.replace(folder, old)
    os.replace(tmp, folder)
    shutil.rmtree(old, ignore_errors=True)


def describe(model) -> dict[str, Any]:
    """Sizes for the log: parameters in all and trained."""
    return {"params": sum(p.numel() for p in model.parameters()),
            "trained": sum(p.numel() for p in model.parameters() if p.requires_grad)}
