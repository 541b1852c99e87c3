"""Forwards of the policy on its own responses: the sampled tokens' log-probabilities, and the
gradient norm for engines that report none."""
from __future__ import annotations

import torch

from harness.loss import token_logprobs
from harness.rollouts import Rollout, with_response


def sequence_logprobs(model, ro: Rollout, rows: list[int], temperature: float,
                      return_logits: bool = False, pack: bool = False, pad_id: int = 0):
    """[len(rows), T] log-probs of the sampled response tokens under ``model`` (and, if asked,
    the [len(rows), T, V] logits that predict them). ``pack``: rows that answer the same prompt
    share one forward of it (harness.packed: same values, fewer FLOPs)."""
    r_ids, r_mask = ro.response_ids[rows], ro.response_mask[rows]
    device = next(model.parameters()).device
    t = r_ids.shape[1]
    if pack:
        from harness.packed import pack as pack_rows
        from harness.packed import packed_forward

        dtype = next(model.parameters()).dtype
        packed = pack_rows(ro.prompt_ids[rows], ro.prompt_mask[rows], r_ids, r_mask,
                           [ro.example_index[i] for i in rows], pad_id,
                           dtype if dtype.is_floating_point else torch.float32)
        logits = packed_forward(model, packed, t)
    else:
        p_ids, p_mask = ro.prompt_ids[rows], ro.prompt_mask[rows]
        keep = p_mask.any(dim=0).nonzero()  # drop left-padding columns no row of this slice needs
        start = int(keep[0]) if len(keep) else 0
        p_ids, p_mask = p_ids[:, start:], p_mask[:, start:]
        ids, attn, pos = with_response(p_ids, p_mask, r_ids, r_mask)
        out = model(input_ids=ids.to(device), attention_mask=attn.to(device),
                    position_ids=pos.to(device), logits_to_keep=t + 1, use_cache=False)
        logits = out.logits[:, :-1]  # logits at position i predict token i+1
    logp = token_logprobs(logits, r_ids.to(device), temperature).cpu()
    return (logp, logits) if return_logits else logp


def grad_norm(module) -> float:
    """L2 norm of the accumulated gradients (before clipping), for engines without ZeRO,
    whose ``get_global_grad_norm`` is None."""
    norms = [p.grad.detach().float().norm() for p in module.parameters() if p.grad is not None]
    return float(torch.stack(norms).norm()) if norms else 0.0
