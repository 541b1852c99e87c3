"""The reference models of ``bench localisation`` through the project's own replay, allocation
and controls, on a batch whose answer is known by construction: a copy model beats the placebo
and fails the order control (it reads tokens, not their sense), and fails the swapped control
where its copied token sits at one position in every response; a position-only model fails
every control."""
import dataclasses

import pytest
import torch

from lab.bench import localisation as loc
from lab.bench.placebo import control_context
from lab.bench.reference_models import POSITION, reference_context
from methods.mrtpo import MrtpoOptions, mrtpo_token_weights, relevance
from tests.test_placebo import WORDS, WordTokenizer, example

class Tokenizer(WordTokenizer):
    """The word tokenizer, skipping the words of the replay's own framing (its header for
    privileged texts), which no response holds."""

    def encode(self, text, add_special_tokens=False):
        return [WORDS.index(w) for w in text.split() if w in WORDS]


OPTIONS = dataclasses.replace(MrtpoOptions(), mrtpo_replay="loo", mrtpo_replay_all=True)


class Batch:
    """Six prompts x four responses of 8 words: ``format`` always first (the format reward's
    token, at one position), the gold word at a place that moves with the response."""

    def __init__(self):
        self.examples, rows = [], []
        for k in range(6):
            for g in range(4):
                self.examples.append(example(k))
                r = [WORDS.index("format"), 1, 2, 3, 1, 2, 3, 1]
                r[1 + (g + k) % 7] = 4 + k
                rows.append(r)
        self.response_ids = torch.tensor(rows)
        self.response_mask = torch.ones_like(self.response_ids)
        self.reward_names = ("name", "format")
        self.signal = torch.ones(len(rows), 2, dtype=torch.bool)
        self.batch_size, self.temperature = 64, 1.0
        self.tokenizer = Tokenizer()


def spans(ctx) -> torch.Tensor:
    """[N, K, T] the tokens each reward's checker reads: the gold word, the format word."""
    ids = ctx.response_ids
    gold = torch.tensor([WORDS.index(e.reference) for e in ctx.examples])
    return torch.stack([ids == gold[:, None], ids == WORDS.index("format")], dim=1)


def ratios(ctx, w) -> torch.Tensor:
    """[N, K] span ratios: the profile's share on the span over the span's token share."""
    span = spans(ctx).float()
    share = (w * span).sum(-1) / w.sum(-1)
    return share / span.mean(-1)


def profile(ctx, model: str, control: str = "") -> torch.Tensor:
    used = control_context(ctx, seed=0, kind=control,
                           source=[" pad", " answer", " is"]) if control in loc.TEXT_CONTROLS \
        else ctx
    d = relevance(reference_context(used, model), OPTIONS)
    w = mrtpo_token_weights(d, ctx.response_mask, 1.0)
    if control == "cross":
        w = torch.roll(w, shifts=1, dims=1)
    if control == "swapped":
        w = loc.swapped(w, ctx.response_mask, [e.id for e in ctx.examples], seed=0)
    return w


def test_the_copy_model_beats_the_placebo_and_fails_the_order_control():
    ctx = Batch()
    real = ratios(ctx, profile(ctx, "copy-model"))
    # all on 1 of 8 tokens (but the allocation's small floor on every token)
    assert real == pytest.approx(torch.full((24, 2), 8.0), rel=2e-3)
    placebo = ratios(ctx, profile(ctx, "copy-model", "placebo"))
    assert placebo == pytest.approx(torch.ones(24, 2))  # it copies nothing: uniform
    order = ratios(ctx, profile(ctx, "copy-model", "order"))
    assert order == pytest.approx(real)  # the same tokens, reordered: the same profile
    # the gold word moves, so another prompt's profile misses it; the format word does not
    swapped = ratios(ctx, profile(ctx, "copy-model", "swapped"))
    assert float(swapped[:, 0].mean()) < 2.0
    assert swapped[:, 1] == pytest.approx(real[:, 1])
    # its name profile is on the gold word, not on the format word (and the other way round)
    cross = ratios(ctx, profile(ctx, "copy-model", "cross"))
    assert float(cross.max()) < 0.01


def test_the_position_model_fails_every_control():
    ctx = Batch()
    w = profile(ctx, "position-model")
    assert w[:, :, POSITION] == pytest.approx(torch.full((24, 2), 8.0), rel=2e-3)
    real = ratios(ctx, w)
    for control in ("placebo", "order", "cross", "swapped"):
        got = ratios(ctx, profile(ctx, "position-model", control))
        assert got == pytest.approx(real), control


def test_an_unknown_reference_model_is_refused():
    with pytest.raises(ValueError, match="copy-model, position-model"):
        reference_context(Batch(), "oracle")
    from lab.bench.localisation_report import reference_variants

    assert reference_variants("copy-model", ["mrtpo", "mrtpo@order"]) == [
        "copy-model", "copy-model@order"]
    assert len(reference_variants("copy-model,position-model", ["mrtpo"])) == 10
    with pytest.raises(ValueError, match="unknown reference model"):
        reference_variants("oracle", [])
