"""The text controls of ``bench localisation``: replays whose verifier texts are replaced, the
responses kept as sampled, so that the same statistic on the same tokens compares the real
text's credit with a control's.

- ``placebo`` (specificity): each verifier text replaced by text of the same token length
  made only of tokens that occur in no verifier text of the batch (of any reward): a neutral
  passage (``NEUTRAL``) without the words that hold such a token, from a seeded offset. It carries none of
  the verifier's words, its format's delimiters or another prompt's gold answer (a gold query
  on the same database, say), so credit that follows it is credit for *some* text standing
  there, not for the verifier's information. Its token overlap with the verifier texts is
  measured after the text is encoded again (``overlap``) and is 0 by construction.
- ``order`` (an order control): each verifier text's own words in a seeded random order: the
  same words, no sentence. It keeps every token of the verifier after the text is encoded
  again (``reordered``: on a BPE tokenizer a word moved next to another can merge into other
  tokens, so orders are built join by join and one whose encoding has the same tokens is
  sought; the report gives the share kept, ``order_share``), so it measures what the words'
  order adds, not whether the verifier's information matters.

A specific profile's span ratio is above 1 with the real text and covers 1 with the placebo.
"""
from __future__ import annotations

import copy
import dataclasses
import random
from collections import Counter
from typing import Sequence

from tasks.base import Example

KINDS = ("placebo", "order")
# Written for this control: no task's vocabulary, no markup, no code.
NEUTRAL = (
    "The river bends twice before it reaches the mill, and in late summer the water runs low "
    "enough to show the flat grey stones along its bed. Farmers on the eastern bank plant "
    "barley in long rows, while the western fields are left to clover and wild grass for the "
    "sheep. Most mornings a light mist lifts from the meadow by nine, and swallows follow the "
    "cattle as they walk down to drink. In autumn the orchards turn yellow, the lanes fill "
    "with fallen leaves, and the village bakery sells pear bread until the first frost. "
    "Children cross the old stone bridge on their way to school, counting the ducks beneath "
    "it, while the church clock strikes each quarter hour a little late.")
RETRIES = 8  # offsets tried where a cut last word encodes into a banned token
ORDER_TRIES = 64  # orders tried for one text before the one keeping most of its tokens is taken


def same_length(source: list[int], length: int) -> list[int]:
    """``source``'s tokens repeated or cut to ``length`` tokens."""
    if not source or length <= 0:
        return []
    return [source[i % len(source)] for i in range(length)]


def verifier_tokens(examples: Sequence[Example], tokenizer) -> set[int]:
    """Every token of every verifier text of the batch (all rewards)."""
    out: set[int] = set()
    for ex in {ex.id: ex for ex in examples}.values():
        for info in ex.verifier_info:
            out |= set(tokenizer.encode(info.text, add_special_tokens=False))
    return out


def overlap(text: str, banned: set[int], tokenizer) -> float:
    """The share of ``text``'s tokens (encoded again) that are among ``banned``."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    return sum(i in banned for i in ids) / len(ids) if ids else 0.0


def allowed_words(words: Sequence[str], banned: set[int], tokenizer) -> list[str]:
    """The ``words`` none of whose tokens is ``banned``."""
    return [w for w in words if not set(tokenizer.encode(w, add_special_tokens=False)) & banned]


def disjoint_text(length: int, banned: set[int], tokenizer, rng: random.Random,
                  kept: Sequence[str]) -> str:
    """``length`` tokens of the ``kept`` words (``allowed_words``; from a random offset,
    cycled), checked again after decoding and encoding (a cut last word can encode otherwise:
    then another offset)."""
    if kept and length > 0:
        for _ in range(RETRIES):
            k, ids = rng.randrange(len(kept)), []
            while len(ids) < length:
                ids += tokenizer.encode(kept[k % len(kept)], add_special_tokens=False)
                k += 1
            text = tokenizer.decode(ids[:length])
            if not set(tokenizer.encode(text, add_special_tokens=False)) & banned:
                return text
    raise ValueError("the neutral passage has no words left outside the batch's verifier "
                     "texts; the placebo cannot be made without their words")


def word_units(ids: list[int], tokenizer) -> list[list[int]]:
    """``ids`` cut into words: a word starts at a token whose text starts with white space
    (or at the first token), so that a word keeps the tokens it has inside a sentence."""
    units: list[list[int]] = []
    for i in ids:
        piece = tokenizer.decode([i])
        if not units or piece[:1].isspace():
            units.append([i])
        else:
            units[-1].append(i)
    return units


def kept_share(ids: list[int], own: list[int]) -> float:
    """The share of ``own``'s tokens that ``ids`` has (as a multiset; 1 only for the same
    tokens, each as often)."""
    return (sum((Counter(ids) & Counter(own)).values()) / max(len(ids), len(own))
            if own else 1.0)


def _chained(units: list[list[int]], tokenizer, rng: random.Random) -> list[list[int]]:
    """``units`` in a random order built word by word: each next word the first (in a shuffled
    order) whose text after the last word's encodes into the two words' own tokens (a BPE
    tokenizer merges across some joins, a space run with a newline, say); any word where none
    does."""
    pool, out = rng.sample(units, len(units)), []
    while pool:
        pick = 0
        if out:
            for k, u in enumerate(pool):
                if tokenizer.encode(tokenizer.decode(out[-1] + u),
                                    add_special_tokens=False) == out[-1] + u:
                    pick = k
                    break
        out.append(pool.pop(pick))
    return out


def reordered(own: list[int], tokenizer, rng: random.Random, tries: int = ORDER_TRIES) -> str:
    """``own``'s words in a random order whose text differs from its own and, encoded again,
    has exactly ``own``'s tokens (``_chained``); words first, then single tokens where no order
    of the words keeps them (a text of one word, tags that merge across a join); where no order
    tried keeps every token, the one keeping most; where no other text can be had (one token,
    or tokens whose every order reads the same), the text itself, which ``order_share`` scores
    0 (the report gives the shares)."""
    same = tokenizer.decode(own)
    best, best_share = None, -1.0
    for units in (word_units(own, tokenizer), [[i] for i in own]):
        if len({tuple(u) for u in units}) < 2:
            continue  # one word, or one word repeated: no other order of these
        for _ in range(tries):
            text = tokenizer.decode([i for u in _chained(units, tokenizer, rng) for i in u])
            if text == same:
                continue  # the text itself is no control
            share = kept_share(tokenizer.encode(text, add_special_tokens=False), own)
            if share == 1.0:
                return text
            if share > best_share:
                best, best_share = text, share
    return best if best is not None else same


def order_share(fake: str, real: str, tokenizer) -> float:
    """An order text's quality: the share of its verifier text's tokens it keeps (encoded
    again, each as often), 0 where it is the verifier text itself (no other order)."""
    if fake == real:
        return 0.0
    return kept_share(tokenizer.encode(fake, add_special_tokens=False),
                      tokenizer.encode(real, add_special_tokens=False))


def neutral_words() -> list[str]:
    """``NEUTRAL``'s words, each with the space before it (so that a word's tokens are the
    ones it has inside a sentence)."""
    return [" " + w for w in NEUTRAL.split()]


def placebo_texts(examples: Sequence[Example], tokenizer, seed: int = 0, kind: str = "placebo",
                  source: Sequence[str] | None = None, banned: set[int] | None = None
                  ) -> dict[tuple, str]:
    """(example id, verifier text) -> its control text (``kind``: ``placebo`` or ``order``,
    the module's docstring) at this text's token length; ``source``: the words the placebo is
    drawn from (default: ``neutral_words()``); ``banned``: the batch's verifier tokens (made
    here when not given). A text two rewards share gets one control."""
    if kind not in KINDS:
        raise ValueError(f"unknown text control {kind!r}: one of {', '.join(KINDS)}")
    rng = random.Random(seed)
    banned = verifier_tokens(examples, tokenizer) if banned is None else banned
    kept = allowed_words(neutral_words() if source is None else source, banned, tokenizer) \
        if kind == "placebo" else []
    out: dict[tuple, str] = {}
    for ex in {ex.id: ex for ex in examples}.values():
        for info in ex.verifier_info:
            if (ex.id, info.text) in out:
                continue
            own = tokenizer.encode(info.text, add_special_tokens=False)
            out[(ex.id, info.text)] = (
                reordered(own, tokenizer, rng) if kind == "order"
                else disjoint_text(len(own), banned, tokenizer, rng, kept))
    return out


def control_examples(examples: Sequence[Example], tokenizer, seed: int = 0,
                     kind: str = "placebo", source: Sequence[str] | None = None
                     ) -> tuple[list[Example], dict[str, float]]:
    """The examples with every verifier text replaced by its control text (in the prompt too,
    where the text is in the prompt), one per response as given; and per reward, the mean
    token overlap of its control texts with the batch's verifier texts (``order``: the share of
    its own text's tokens each order text keeps in another order, ``order_share``)."""
    banned = verifier_tokens(examples, tokenizer)
    texts = placebo_texts(examples, tokenizer, seed, kind, source, banned)
    made: dict[str, Example] = {}
    shares: dict[str, list[float]] = {}
    for ex in {ex.id: ex for ex in examples}.values():
        messages = [dict(m) for m in ex.messages]
        done: set[str] = set()
        for info in ex.verifier_info:
            fake = texts[(ex.id, info.text)]
            shares.setdefault(info.reward, []).append(  # order: its own tokens, each as often
                order_share(fake, info.text, tokenizer) if kind == "order"
                else overlap(fake, banned, tokenizer))
            if info.privileged or info.text in done:
                continue
            for m in messages:
                if info.text in m["content"]:
                    m["content"] = m["content"].replace(info.text, texts[(ex.id, info.text)], 1)
                    break
            done.add(info.text)
        made[ex.id] = dataclasses.replace(ex, messages=tuple(messages), verifier_info=tuple(
            dataclasses.replace(i, text=texts[(ex.id, i.text)]) for i in ex.verifier_info))
    return ([made[ex.id] for ex in examples],
            {r: sum(v) / len(v) for r, v in shares.items()})


def control_context(ctx, seed: int, kind: str = "placebo", source: Sequence[str] | None = None):
    """``ctx`` with every example's verifier texts replaced by ``kind``'s control texts: the
    same responses, other replay contexts; ``.overlap``: per reward, the control texts' token
    overlap with the verifier texts."""
    out = copy.copy(ctx)
    out.examples, out.overlap = control_examples(ctx.examples, ctx.tokenizer, seed, kind, source)
    return out
