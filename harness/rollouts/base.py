"""What every rollout engine returns and the token bookkeeping they share."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Protocol, Sequence

import torch

from tasks.base import Example


@dataclass
class Rollout:
    """Sampled responses. N rows; prompts left-padded to P, responses right-padded to T."""

    prompt_ids: torch.Tensor  # [N, P] long
    prompt_mask: torch.Tensor  # [N, P] {0,1}
    response_ids: torch.Tensor  # [N, T] long
    response_mask: torch.Tensor  # [N, T] {0,1}: tokens up to and including the first EOS
    texts: list[str]  # N decoded responses (special tokens dropped)
    example_index: list[int]  # N: which input example each row answers
    # [N, T] the log-prob (at the sampling temperature) each response token was drawn with by
    # the engine, 0 past the response; None where the engine does not report it
    logprobs: Optional[torch.Tensor] = None
    # whether ``logprobs`` are of the distribution top-k/top-p left, renormalised over the
    # tokens they keep (vLLM's V1 sampler), rather than before top-k/top-p (the lean engine,
    # the policy's own definition): the update compares the policy's under the same one
    logprobs_truncated: bool = False


class RolloutEngine(Protocol):
    """What the trainer asks of a rollout engine. Optional abilities are declared in
    ``capabilities``, never probed: ``"sleep"`` (the engine frees the device between
    generations by itself: it wakes when a generation or a sync begins and sleeps when a
    generation ends, whether or not a sync came between; ``awake_used_gb`` is the device's use
    just before its latest sleep). No caller wakes or sleeps an engine."""

    capabilities: frozenset
    # a plain HF copy of the policy that the engine keeps in sync (the HF engine samples with
    # it), or None; methods may read it as the "current" model
    plain_model: Optional[object]

    def encode(self, examples: Sequence[Example]) -> list[list[int]]:
        """Each example's prompt token ids, as the engine renders it."""

    def generate(self, examples: Sequence[Example], n: int, max_new_tokens: int,
                 temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0,
                 seed: Optional[int] = None) -> "Rollout":
        """``n`` sampled responses per example."""

    def generate_eval(self, examples: Sequence[Example], max_new_tokens: int,
                      batch_size: int = 16, progress: Optional[Callable] = None) -> list[str]:
        """One greedy response per example."""

    def sync(self, policy) -> dict:
        """Load the policy's weights (a DeepSpeed engine, possibly ZeRO-3-partitioned);
        metrics of the sync (``param_update_norm``: the update's L2 norm, NaN where the engine
        cannot measure it)."""


def left_pad(rows: Sequence[Sequence[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token rows -> ([N, P] ids, [N, P] mask), left-padded so every row ends at column P."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, width - len(r):] = torch.tensor(list(r), dtype=torch.long)
        mask[i, width - len(r):] = 1
    return ids, mask


def with_response(p_ids: torch.Tensor, p_mask: torch.Tensor, r_ids: torch.Tensor,
                  r_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """[prompt | response] ids, attention mask and position ids. With left padding, positions
    count real tokens only, as ``generate`` counted them."""
    ids = torch.cat([p_ids, r_ids], dim=1)
    attn = torch.cat([p_mask, r_mask], dim=1)
    return ids, attn, (attn.cumsum(dim=1) - 1).clamp(min=0)


def render_prompt(tokenizer, example: Example) -> str:
    return tokenizer.apply_chat_template(
        list(example.messages), add_generation_prompt=True, tokenize=False
    )


def encode_prompts(tokenizer, examples: Sequence[Example]) -> list[list[int]]:
    """Each example's chat prompt as token ids (every engine samples from exactly these)."""
    texts = [render_prompt(tokenizer, ex) for ex in examples]
    # the chat template already holds the special tokens: add none
    return tokenizer(texts, add_special_tokens=False)["input_ids"]


def eos_token_ids(generation_eos, tokenizer) -> list[int]:
    """The ids that end a response: the generation config's EOS id(s) and the tokenizer's."""
    eos = generation_eos if isinstance(generation_eos, (list, tuple)) else [generation_eos]
    return sorted({e for e in eos if e is not None} | {tokenizer.eos_token_id})


def response_mask_from_ids(ids: torch.Tensor, eos_ids: Sequence[int]) -> torch.Tensor:
    """[N, T] ids -> [N, T] mask: 1 up to and including the first EOS token, 0 after it."""
    is_eos = torch.zeros_like(ids, dtype=torch.bool)
    for e in eos_ids:
        is_eos |= ids == e
    # number of EOS strictly before each position; a token is valid while that count is 0
    before = torch.cumsum(is_eos.to(torch.int32), dim=1) - is_eos.to(torch.int32)
    return (before == 0).to(torch.long)


def decode_responses(tokenizer, resp: torch.Tensor, eos_ids: Sequence[int]
                     ) -> tuple[torch.Tensor, list[str]]:
    """[N, T] right-padded response ids -> ([N, T] mask up to and including the first EOS, the
    N texts of the masked tokens, special tokens dropped)."""
    pad = tokenizer.pad_token_id
    mask = response_mask_from_ids(resp, eos_ids)
    return mask, tokenizer.batch_decode(resp * mask + pad * (1 - mask), skip_special_tokens=True)


def greedy_in_batches(engine, examples: Sequence[Example], max_new_tokens: int,
                      batch_size: int, progress: Optional[Callable] = None) -> list[str]:
    """Greedy responses for evaluation with an engine's ``generate``, batched by prompt length
    to limit padding; in the examples' order."""
    ids = engine.encode(examples)
    order = sorted(range(len(examples)), key=lambda i: len(ids[i]))
    out: list[str] = [""] * len(examples)
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        r = engine.generate([examples[i] for i in chunk], 1, max_new_tokens, greedy=True,
                            prompt_ids=[ids[i] for i in chunk])
        for i, text in zip(chunk, r.texts):
            out[i] = text
        if progress is not None:
            progress(len(chunk))
    return out
