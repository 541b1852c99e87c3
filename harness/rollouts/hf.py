"""The HF engine: transformers ``generate`` on a plain (non-DeepSpeed) copy of the policy whose
weights the trainer syncs from the gathered ZeRO-3 parameters before every rollout."""
from __future__ import annotations

from typing import Sequence

import torch

from harness.rollouts.base import (Rollout, decode_responses, encode_prompts, eos_token_ids,
                                   greedy_in_batches, left_pad)
from tasks.base import Example


@torch.no_grad()
def copy_weights(model, named_tensors) -> float:
    """Copy ``(name, tensor)`` pairs into ``model``'s parameters; the L2 norm of the change."""
    params = dict(model.named_parameters())
    sq = 0.0
    for name, tensor in named_tensors:
        old = params[name].data
        new = tensor.to(old.dtype)
        if torch.equal(new, old):  # nothing to copy (a run's first sync: one source folder)
            continue
        # accumulated in float64 without a float64 copy of the difference (2 to 4x faster)
        sq += float(torch.linalg.vector_norm(new - old, dtype=torch.float64)) ** 2
        old.copy_(new)
    return sq ** 0.5


def sync_plain_copy(model, policy) -> float:
    """The policy's (a DeepSpeed engine's, gathered under ZeRO-3) weights -> ``model``; the L2
    norm of the change."""
    from harness.engine import gathered_parameters

    with gathered_parameters(policy.module) as named:
        return copy_weights(model, named)


class HFRollout:
    """transformers ``generate`` on CPU (or a single GPU), batched, on a plain copy of the
    policy (``plain_model``) that ``sync`` keeps equal to the trained weights."""

    capabilities = frozenset()

    def __init__(self, model, tokenizer, device: torch.device | str = "cpu",
                 share_prefill: bool = True) -> None:
        self.model = model.eval()
        self.share_prefill = share_prefill  # the default of generate's share_prefill
        self.plain_model = self.model
        self.tokenizer = tokenizer
        self.device = torch.device(device)
        self.eos_ids = eos_token_ids(model.generation_config.eos_token_id, tokenizer)
        # A checkpoint's generation_config.json may set repetition_penalty (Qwen2.5-Instruct
        # does) or other knobs that generate() would silently apply: rollouts would then not be
        # samples of the policy the loss scores. Keep only the special tokens.
        from transformers import GenerationConfig

        model.generation_config = GenerationConfig(
            bos_token_id=model.generation_config.bos_token_id, eos_token_id=self.eos_ids,
            pad_token_id=tokenizer.pad_token_id)

    def load_weights(self, named_tensors) -> float:
        """Copy ``(name, tensor)`` pairs into the rollout model (weight sync); the L2 norm of
        the change, i.e. of the last optimizer update."""
        return copy_weights(self.model, named_tensors)

    def sync(self, policy) -> dict:
        return {"param_update_norm": sync_plain_copy(self.model, policy)}

    def encode(self, examples: Sequence[Example]) -> list[list[int]]:
        return encode_prompts(self.tokenizer, examples)

    @torch.no_grad()
    def generate(
        self,
        examples: Sequence[Example],
        n: int,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        greedy: bool = False,
        seed: int | None = None,
        prompt_ids: list[list[int]] | None = None,
        share_prefill: bool | None = None,
    ) -> Rollout:
        """``n`` responses per example, all in one ``generate`` call.

        ``share_prefill`` (n > 1): each prompt's key/value cache is computed once and repeated
        for its n samples, instead of n identical prefills (same distributions); None: the
        engine's setting."""
        share_prefill = self.share_prefill if share_prefill is None else share_prefill
        ids = prompt_ids if prompt_ids is not None else self.encode(examples)
        rows = [i for i in range(len(examples)) for _ in range(n)]
        pad = self.tokenizer.pad_token_id
        p_ids, p_mask = left_pad([ids[i] for i in rows], pad)
        width = p_ids.shape[1]
        kwargs = dict(max_new_tokens=max_new_tokens, pad_token_id=pad, eos_token_id=self.eos_ids)
        if greedy:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        else:
            # top_k=0 switches top-k off; None would fall back to the config's default of 50
            kwargs.update(do_sample=True, temperature=temperature, top_p=top_p, top_k=top_k)
        if n > 1 and share_prefill and min(len(ids[i]) for i in range(len(examples))) > 1:
            kwargs["past_key_values"] = self._shared_prefill([ids[i] for i in range(len(examples))],
                                                             n, width, pad)
        if seed is not None:
            torch.manual_seed(seed)
        out = self.model.generate(
            input_ids=p_ids.to(self.device), attention_mask=p_mask.to(self.device), **kwargs
        ).cpu()
        resp = out[:, width:]
        if resp.shape[1] == 0:  # nothing generated at all: keep one pad column for shapes
            resp = torch.full((len(rows), 1), pad, dtype=torch.long)
        mask, texts = decode_responses(self.tokenizer, resp, self.eos_ids)
        return Rollout(p_ids, p_mask, resp, mask, texts, rows)

    def _shared_prefill(self, prompts: list[list[int]], n: int, width: int, pad: int):
        """The cache of every prompt but its last token (generate computes that one and samples
        from its logits), computed once per prompt and repeated for the n samples."""
        from transformers import DynamicCache

        u_ids, u_mask = left_pad(prompts, pad)
        if u_ids.shape[1] != width:  # same left-padding as the repeated rows
            raise RuntimeError("internal: prompt widths differ between prefill and generate")
        ids, mask = u_ids[:, :-1].to(self.device), u_mask[:, :-1].to(self.device)
        cache = DynamicCache(config=self.model.config)
        self.model(input_ids=ids, attention_mask=mask,
                   position_ids=(mask.cumsum(dim=1) - 1).clamp(min=0), past_key_values=cache,
                   use_cache=True, logits_to_keep=1)
        cache.batch_repeat_interleave(n)
        return cache

    def generate_eval(self, examples: Sequence[Example], max_new_tokens: int,
                      batch_size: int, progress=None) -> list[str]:
        """Greedy responses for evaluation, batched by prompt length to limit padding."""
        return greedy_in_batches(self, examples, max_new_tokens, batch_size, progress)
