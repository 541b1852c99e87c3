"""A test plugin: GDPO with each response's advantage on its last N tokens only (N an option of
its own, ``--tail-tokens``), registered without any edit of the harness."""
from dataclasses import dataclass

from methods import add
from methods.base import option
from methods.compose import ALLOCATIONS


@dataclass(frozen=True)
class TailOptions:
    tail_tokens: int = option(2, "tail: the advantage goes on each response's last N tokens")

    def problems(self):
        return [] if self.tail_tokens >= 1 else ["tail_tokens must be 1 or more"]


def tail(batch, norm, options):
    """[N, T]: the response's advantage on its last ``tail_tokens`` valid tokens, 0 elsewhere."""
    mask = batch.response_mask
    from_end = mask.flip(1).cumsum(1).flip(1)  # 1 on the last valid token, 2 before it, ...
    keep = (from_end <= options.tail_tokens) * mask
    return norm.per_response[:, None] * keep, {}


ALLOCATIONS.add("tail", tail)
add("tail", "GDPO on each response's last N tokens", "a test plugin", options=(TailOptions,),
    normaliser="gdpo", allocation="tail", reference="gdpo")
