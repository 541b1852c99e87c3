"""The null token of P2T's replacement, as a distribution over the vocabulary and as the
embedding it averages (shared by both variants)."""
from __future__ import annotations

from common.lazy import lazy

from methods.base import no_grad

torch = lazy("torch", globals())  # imported on first use: common/lazy.py


def null_distribution(kind: str, vocab: int, tokenizer) -> torch.Tensor:
    """[V] the null token as a distribution over the vocabulary: one-hot at the pad or unk
    token, or uniform (whose embedding is the mean embedding)."""
    if kind == "mean":
        return torch.full((vocab,), 1.0 / vocab)
    token = tokenizer.pad_token_id if kind == "pad" else tokenizer.unk_token_id
    if token is None:
        raise ValueError(f"the tokenizer has no {kind} token; use --p2t-null "
                         f"{'unk' if kind == 'pad' else 'pad'} or mean")
    q = torch.zeros(vocab)
    q[token] = 1.0
    return q


@no_grad
def null_embedding(embed: torch.nn.Module, q: torch.Tensor, chunk: int = 4096) -> torch.Tensor:
    """[H] ``sum_v q_v e_v`` through the embedding module (a ZeRO-3 partition gathers it)."""
    idx = q.nonzero().squeeze(1)
    out = None
    for s in range(0, len(idx), chunk):
        ids = idx[s:s + chunk]
        device = next(embed.parameters()).device
        part = (embed(ids.to(device)).float() * q[ids].to(device)[:, None]).sum(dim=0)
        out = part if out is None else out + part
    return out.cpu()
