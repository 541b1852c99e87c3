"""The placebo control of ``bench localisation``: verifier texts of the same length that say
nothing about the response.

A replay variant localises *specifically* when its credit follows the information of the
reward's own verifier, not merely the presence of some text where that verifier's text stands.
The placebo replaces each reward's verifier text with one of the same token length taken from
another prompt of the batch (the same reward's text there, its tokens repeated or cut to this
length), and, where every prompt shares one text (a format spec), with this text's own tokens in
a seeded random order. The responses stay as sampled; only the replay contexts change, so the
same statistic on the same tokens compares the real text's credit with a placebo's. A
specific profile's span ratio is above 1 with the real text and covers 1 with the placebo.
"""
from __future__ import annotations

import dataclasses
import random
from typing import Sequence

from tasks.base import Example


def same_length(source: list[int], length: int) -> list[int]:
    """``source``'s tokens repeated or cut to ``length`` tokens."""
    if not source or length <= 0:
        return []
    return [source[i % len(source)] for i in range(length)]


def placebo_texts(examples: Sequence[Example], tokenizer, seed: int = 0) -> dict[tuple, str]:
    """(example id, verifier text) -> its placebo: another prompt's text for the same reward
    at this text's token length; this text scrambled where no other prompt of the batch has a
    different one. A text two rewards share gets one placebo."""
    rng = random.Random(seed)
    unique = list({ex.id: ex for ex in examples}.values())  # a group shares its example
    by_reward: dict[str, list[tuple[str, str]]] = {}
    for ex in unique:
        for info in ex.verifier_info:
            by_reward.setdefault(info.reward, []).append((ex.id, info.text))
    out: dict[tuple, str] = {}
    for reward, texts in by_reward.items():
        for j, (eid, text) in enumerate(texts):
            if (eid, text) in out:
                continue
            own = tokenizer.encode(text, add_special_tokens=False)
            # the next prompt (in batch order) whose text differs: a derangement, seeded only
            # where the text has to be scrambled
            others = [t for _, t in texts[j + 1:] + texts[:j] if t != text]
            if others:
                tokens = same_length(tokenizer.encode(others[0], add_special_tokens=False),
                                     len(own))
            else:
                tokens = rng.sample(own, len(own))
            out[(eid, text)] = tokenizer.decode(tokens)
    return out


def placebo_examples(examples: Sequence[Example], tokenizer, seed: int = 0) -> list[Example]:
    """The examples with every verifier text replaced by its placebo (in the prompt too, where
    the text is in the prompt), one per response as given."""
    texts = placebo_texts(examples, tokenizer, seed)
    made: dict[str, Example] = {}
    for ex in {ex.id: ex for ex in examples}.values():
        messages = [dict(m) for m in ex.messages]
        done: set[str] = set()
        for info in ex.verifier_info:
            if info.privileged or info.text in done:
                continue
            for m in messages:
                if info.text in m["content"]:
                    m["content"] = m["content"].replace(info.text, texts[(ex.id, info.text)], 1)
                    break
            done.add(info.text)
        made[ex.id] = dataclasses.replace(ex, messages=tuple(messages), verifier_info=tuple(
            dataclasses.replace(i, text=texts[(ex.id, i.text)]) for i in ex.verifier_info))
    return [made[ex.id] for ex in examples]
