"""Where ``bench localisation``'s profiles sit by position: the index they peak on most often,
and the swapped control, which keeps the profiles' positional habits and loses only which
response each was computed on."""
from __future__ import annotations

import math
from typing import Sequence


def modal_tops(w, mask) -> list[tuple[int | None, float]]:
    """Per reward: (the response token index its profiles peak on most often, the share of
    responses peaking there); responses without a profile (NaN) are not counted. A profile
    that follows the verifier's span peaks in many places; one that follows a position peaks
    at one."""
    import torch

    out = []
    for k in range(w.shape[1]):
        keep = ~torch.isnan(w[:, k]).any(dim=-1) & (mask.sum(dim=-1) > 0)
        if not bool(keep.any()):
            out.append((None, math.nan))
            continue
        top = torch.nan_to_num(w[keep, k]).masked_fill(~mask[keep].bool(), -1.0).argmax(dim=-1)
        mode = int(torch.mode(top).values)
        out.append((mode, float((top == mode).float().mean())))
    return out


def swapped(w, mask, prompts: Sequence[str], seed: int = 0):
    """The swapped control, [N, K, T]: per reward, each response's profile replaced by that of
    a response to another prompt (seeded; drawn among the responses that have a profile for
    the reward), its first tokens up to this response's length and nothing past that response's
    own length (a longer response is not given mass the other profile never had: a profile
    that is a position stays that position), then scaled to mean 1 over this response's tokens
    as the profiles are; where none of the other profile's mass falls inside this response,
    the uniform profile. A response with no other prompt's profile to take keeps none (NaN)."""
    import random

    import torch

    out = torch.full_like(w, float("nan"))
    length = mask.sum(dim=-1).tolist()
    rng = random.Random(seed)
    for k in range(w.shape[1]):
        have = [n for n in range(w.shape[0])
                if length[n] > 0 and not bool(torch.isnan(w[n, k, :length[n]]).any())]
        for n in have:
            others = [m for m in have if prompts[m] != prompts[n]]
            if not others:
                continue
            m = rng.choice(others)
            v = torch.zeros(w.shape[-1], dtype=w.dtype)
            cut = min(length[n], length[m])
            v[:cut] = w[m, k, :cut]
            total = float(v.sum())
            if total <= 0:  # all of its mass lay past this response's end
                v[:length[n]], total = 1.0, float(length[n])
            out[n, k] = v * (length[n] / total)
    return out
