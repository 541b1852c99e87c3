"""A prefix-viability oracle for the tool-calling format reward (``tasks.tools.rewards.
format_score``): for a response, the first token after which no continuation can pass the
layout check, so that a credit profile can be read against the token that decided a failure on
the policy's own responses (``lab.bench.credit_policy``).

A prefix's state is certified, never guessed:

- ``dead``: no continuation passes. Certificates: a tag that must occur once already occurs
  twice (counts only grow), or no extension of the prefix can match the layout regex with
  every free part free of those tags (the ``regex`` module's partial matching; the text
  stripped as the checker strips it, a whitespace-only continuation tried on its own);
- ``viable``: a continuation passes the checker itself (witnesses: the rest of a canonical
  response of the layout from each of its characters, with or without one filler character
  before it, and the empty continuation);
- ``unknown``: neither (counted; the report says how many; none expected).

Both at once is a contradiction and raises. The text is the model's: the prefix joined with
its continuation holds no chat template marker (a response ends at its end-of-turn token, a
special token the decoding drops; the checker cuts at markers, so a text holding one as plain
text could restart the response: such a prefix is ``unknown``, a witness that would complete
one is not tried, and ``lab.bench.credit_policy`` does not read a response holding one). A
failed response whose every prefix is viable was decided at its end: by stopping before the
layout was complete.
"""
from __future__ import annotations

import functools
from typing import Sequence

MARKERS = ("<|im_start|>", "<|im_end|>")
FILLER = "x"  # one character of free text: no tag starts with it


@functools.lru_cache(maxsize=None)
def _layout(gold_tags: tuple[bool, bool]):
    """(the checker's compiled regex, the tags that occur once, the free-part-tempered body
    for partial matching, a canonical passing response) for a gold answer's tag set."""
    import regex

    from tasks.tools.prompt import CALL_OPEN
    from tasks.tools.rewards import format_layout

    gold = (CALL_OPEN if gold_tags[0] else "") + ("<response>" if gold_tags[1] else "")
    pattern, once = format_layout(gold)
    body = pattern.pattern
    if not (body.startswith("^") and body.endswith("$") and "(" not in body):
        raise ValueError(f"the format regex changed shape ({body!r}): the oracle reads "
                         "^...$ with free parts .*? and literal text between them")
    body = body[1:-1]
    free = "(?:(?!" + "|".join(regex.escape(t) for t in once) + ").)*?" if once else ".*?"
    tempered = regex.compile(body.replace(".*?", free), regex.DOTALL)
    canonical = body.replace(".*?", FILLER).replace("\\n", "\n")
    if "\\" in canonical:
        raise ValueError(f"the format regex has an escape the oracle does not read: {body!r}")
    return pattern, once, tempered, canonical


def layout(gold: str):
    from tasks.tools.prompt import CALL_OPEN

    return _layout((CALL_OPEN in gold, "<response>" in gold))


def witnesses(canonical: str) -> list[str]:
    """Continuations tried for a viable certificate: '' and every suffix of the canonical
    response, each also after one filler character."""
    tails = [canonical[j:] for j in range(len(canonical) + 1)]
    return [""] + tails + [FILLER + t for t in tails]


def passes(gold: str, text: str) -> bool:
    from tasks.tools.rewards import FORMAT_HI, format_score

    return format_score(gold, text) == FORMAT_HI


def has_marker(text: str) -> bool:
    return any(m in text for m in MARKERS)


def dead(gold: str, prefix: str) -> bool:
    """Certified: no continuation of ``prefix`` passes whose joined text holds no chat marker
    (``prefix`` itself holding none: ``state`` checks)."""
    _, once, tempered, _ = layout(gold)
    text = prefix.lstrip()
    if any(text.count(t) > 1 for t in once):
        return True
    if tempered.fullmatch(text, partial=True) is not None:
        return False
    return not passes(gold, prefix)  # a whitespace-only continuation leaves prefix.strip()


def state(gold: str, prefix: str) -> str:
    """``dead``, ``viable`` or ``unknown`` (the module's docstring)."""
    if has_marker(prefix):
        return "unknown"
    is_dead = dead(gold, prefix)
    found = any(passes(gold, prefix + s) for s in witnesses(layout(gold)[3])
                if not has_marker(prefix + s))
    if is_dead and found:
        raise AssertionError(f"format oracle contradiction on {prefix!r}: a dead certificate "
                             "and a passing continuation")
    return "dead" if is_dead else "viable" if found else "unknown"


def decided_at(gold: str, pieces: Sequence[str], passed: bool) -> dict:
    """For a response given as its tokens' texts (``pieces``, joined = the response's text)
    and the checker's outcome on it: ``index``, the first token whose prefix is dead (None if
    none), ``where`` (``passed``, ``early``: dead before the response's end, ``end``: every
    prefix viable, the failure decided by stopping), ``unknown``: prefixes neither certified.
    Raises where the oracle and the checker disagree (a passing response with a dead prefix,
    a failing one whose whole text is viable-certified by the empty continuation)."""
    text, prefixes = "", []
    for p in pieces:
        text += p
        prefixes.append(text)
    if has_marker(text):
        raise ValueError("the response holds a chat marker as plain text: the checker cuts "
                         "there, so its prefixes are not the response the checker read")
    states = [state(gold, p) for p in prefixes]
    if passes(gold, text) != passed:
        raise AssertionError("the given outcome is not the checker's on the joined text")
    first = next((i for i, s in enumerate(states) if s == "dead"), None)
    if passed and first is not None:
        raise AssertionError(f"a passing response has a dead prefix at token {first}")
    if first is not None and any(s == "viable" for s in states[first:]):
        raise AssertionError(f"a dead prefix at token {first} becomes viable later")
    where = "passed" if passed else "early" if first is not None else "end"
    return {"index": first, "where": where, "unknown": sum(s == "unknown" for s in states)}
