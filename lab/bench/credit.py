"""``bench credit``: a ground-truth credit benchmark. Tool-calling responses are built so that
the tokens that decide each reward are known, and each credit source's per-reward token
profile is read against them. This module builds and checks the responses and computes the
statistics; ``lab.bench.credit_report`` runs the sources on a model and writes the report.

Construction, per training prompt (the tool-calling family's ToolRL rewards ``format`` and
``correctness``): the training set's demonstration of the prompt (its gold output, in the layout
the format reward expects and the warm start learnt) is the correct response, and a group of
four responses differs from it at two known places:

- ``correct``: the gold output as it is (format 1, correctness +3);
- ``format``: the closing think tag ``</think>`` corrupted to ``</thing>``, so the layout check
  finds none (format 0), the call block unchanged (correctness +3);
- ``correctness``: one argument value (drawn per prompt, seeded) replaced by a wrong value of
  the same JSON type (a string's letters and digits each shifted by one, an integer's or a
  float's last digit, a boolean negated), the layout intact (format 1, correctness below +3);
- ``both``: both changes (format 0, correctness below +3).

The task's own rewards score every response; a prompt whose group does not get the rewards it
was built for is dropped (counted, with the reason). A response's tokens are its text's, then
the end-of-turn token (as the warm start encodes demonstrations and a finished rollout ends);
the pass context is built from them as from a sampled batch (``harness.train.passes.context``).
The **deciding tokens** of reward k in a response: the tokens (``methods.mrtpo.diagnostics.
token_char_spans``) overlapping the characters changed for k's failure (first to last that
differs); where k's place is intact, those at the same characters of the unchanged text.

Per source and reward, over the responses whose advantage for the reward is nonzero (here every
one): the **mass ratio**, the profile's share on the deciding tokens over their share of the T
tokens (1 = uniform, T/k at most); **precision at k**, the share of the profile's k largest
tokens that are deciding tokens (k: their number; ties shared in expectation), against chance
k/T (``gain``: precision - chance); ``:failed`` / ``:passed``: over the responses where the
reward failed (its changed tokens) or passed. Intervals resample prompts
(``localisation.interval``). Precision is rare-event counting at k = 1 (the format's one token
in ~90: no hit in 64 responses is likely at chance), which a bootstrap of prompt means cannot
see, so its verdict is :func:`chance_test`, the same statistic against random rankings.

Sources: the allocation profiles ``lab.bench.localisation.profile_of`` gives (MRTPO loo, single,
joint; P2T loo, single; TCRM; reference models copy-model and position-model), and baselines
with a known answer: ``uniform`` (mass ratio 1, precision at chance) and ``random`` (a seeded
uniform-random profile: the same in expectation).

Seeds: seed i takes the i-th block of P prompts of one seeded shuffle of the training set (no
prompt in two seeds); the changed argument and the random profile are seeded per seed.
Different prompts rather than the same again, because every source but ``random`` is a
deterministic function of the prompt and its responses (TCRM's value model is seeded): a
repeated prompt would repeat its numbers and count twice among the (seed, prompt) clusters,
narrowing the intervals without new evidence.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Mapping, Sequence

from tasks.base import Example

KINDS = ("correct", "format", "correctness", "both")
BROKEN = {"correct": (), "format": ("format",), "correctness": ("correctness",),
          "both": ("format", "correctness")}
REWARDS = ("format", "correctness")
FORMAT_SITE = ("</think>", "</thing>")  # the closing think tag and its corruption
BASELINES = ("uniform", "random")
DEFAULT_SOURCES = ("uniform,random,copy-model,position-model,mrtpo,mrtpo@single,mrtpo@joint,"
                   "p2t,p2t@single,tcrm")
STATS = ("mass_ratio", "precision", "chance", "gain", "k", "T")
SIDE_STATS = ("mass_ratio", "gain")  # also split by whether the reward failed or passed


class Dropped(ValueError):
    """A prompt the construction cannot use; the message says why."""


@dataclass(frozen=True)
class Edit:
    """Characters [start, end) of the correct response (``old``) become ``new`` where the
    response is built to fail ``reward``."""

    reward: str
    start: int
    end: int
    old: str
    new: str
    what: str  # where, in words: "closing think tag", "call 1, argument 'city'"


@dataclass(frozen=True)
class Response:
    """One constructed response and, per reward, the characters that decide it."""

    kind: str  # one of KINDS
    text: str
    deciding: Mapping[str, tuple[int, int]]  # reward -> the characters that decide it


@dataclass(frozen=True)
class Group:
    """A prompt's four responses (``KINDS``) and the two edits they are made of."""

    example: Example
    edits: tuple[Edit, ...]
    responses: tuple[Response, ...]  # in KINDS order


def changed(old: str, new: str) -> tuple[int, int, int]:
    """(start, end in ``old``, end in ``new``) of the characters that differ: the common
    prefix and suffix left out (the whole of both where that leaves either side empty)."""
    p = 0
    while p < min(len(old), len(new)) and old[p] == new[p]:
        p += 1
    q = 0
    while q < min(len(old), len(new)) - p and old[-1 - q] == new[-1 - q]:
        q += 1
    if p >= len(old) - q or p >= len(new) - q:
        return 0, len(old), len(new)
    return p, len(old) - q, len(new) - q


def render(text: str, edits: Sequence[Edit], broken: Sequence[str]
           ) -> tuple[str, dict[str, tuple[int, int]]]:
    """``text`` with the edits of the ``broken`` rewards applied, and each edit's changed
    characters in the result (the new ones where applied, the old ones where not)."""
    out, spans, pos, shift = [], {}, 0, 0
    for e in sorted(edits, key=lambda e: e.start):
        p, old_end, new_end = changed(e.old, e.new)
        piece, end = (e.new, new_end) if e.reward in broken else (e.old, old_end)
        out += [text[pos:e.start], piece]
        spans[e.reward] = (e.start + shift + p, e.start + shift + end)
        shift += len(piece) - (e.end - e.start)
        pos = e.end
    return "".join(out + [text[pos:]]), spans


def _shift(c: str) -> str:
    for first, size in (("a", 26), ("A", 26), ("0", 10)):
        if first <= c <= chr(ord(first) + size - 1):
            return chr(ord(first) + (ord(c) - ord(first) + 1) % size)
    return c


def wrong_value(value):
    """A different value of the same JSON type, or None where this makes none (null, lists,
    objects, a string without letters or digits, a float without a digit)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        s = str(value)
        return int(s[:-1] + _shift(s[-1]))
    if isinstance(value, float):
        s = json.dumps(value)
        last = max((i for i, c in enumerate(s) if c.isdigit()), default=None)
        if last is None:
            return None
        w = float(s[:last] + _shift(s[last]) + s[last + 1:])
        return w if w != value else None
    if isinstance(value, str):
        w = "".join(_shift(c) for c in value)
        return w if w != value else None
    return None


def argument_sites(text: str, start: int, end: int) -> list[tuple[int, str, object, int, int]]:
    """(call index, argument, value, start, end) of every argument value in the call block
    ``text[start:end]``, located by the span helper the diagnostics use
    (``tasks.tools.spans.call_values``) and checked to decode to the value the line holds."""
    from tasks.tools.spans import call_values

    try:
        spans = call_values(text, start, end)
        calls = [json.loads(line) for line in text[start:end].split("\n") if line.strip()]
    except ValueError:
        raise Dropped("the gold call block is not JSON lines") from None
    out, i = [], 0
    for c, call in enumerate(calls):
        if not (isinstance(call, dict) and isinstance(call.get("parameters"), dict)):
            raise Dropped("a line of the gold call block is not a call object")
        expected = [call.get("name"), *call["parameters"].values()]
        found = spans[i:i + len(expected)]
        i += len(expected)
        if len(found) < len(expected) or any(_decoded(text[s:e]) != v
                                             for (s, e), v in zip(found, expected)):
            raise Dropped("the gold call block's values could not be located in its text")
        out += [(c, key, value, s, e)
                for key, value, (s, e) in zip(call["parameters"], expected[1:], found[1:])]
    return out


def _decoded(literal: str):
    try:
        return json.loads(literal)
    except ValueError:
        return Dropped  # equal to no JSON value


def construct(example: Example, gold: str, seed: int) -> Group:
    """The four responses of ``example`` (module doc); ``gold``: its correct response. Raises
    :class:`Dropped` with the reason when the gold output does not allow it."""
    from tasks.tools.prompt import CALL_CLOSE, CALL_OPEN

    tag, bad = FORMAT_SITE
    at = gold.find(tag)
    if at < 0:
        raise Dropped("no closing think tag in the gold output")
    opened = gold.find(CALL_OPEN, at)
    closed = gold.find(CALL_CLOSE, opened + 1)
    if opened < 0 or closed < 0:
        raise Dropped("the gold output makes no tool call (correctness is 0 for any response)")
    sites = [(c, key, v, s, e) for c, key, v, s, e in
             argument_sites(gold, opened + len(CALL_OPEN), closed)
             if wrong_value(v) is not None and gold[s:e] == json.dumps(v, ensure_ascii=False)]
    if not sites:
        raise Dropped("no argument with a single value to make wrong (string, number, bool)")
    c, key, value, s, e = random.Random(f"credit:{seed}:{example.id}").choice(sites)
    edits = (Edit("format", at, at + len(tag), tag, bad, "closing think tag"),
             Edit("correctness", s, e, gold[s:e], json.dumps(wrong_value(value),
                                                             ensure_ascii=False),
                  f"call {c + 1}, argument {key!r}"))
    responses = tuple(Response(kind, *render(gold, edits, BROKEN[kind])) for kind in KINDS)
    return Group(example, edits, responses)


def unexpected(group: Group, values: Sequence[Sequence[float]], rewards) -> str | None:
    """Why the group's rewards (``values``: one row per response, in ``rewards``' order) are
    not what it was built for, or None: a broken reward below its maximum, an intact one at
    it."""
    for response, row in zip(group.responses, values):
        for reward, v in zip(rewards, row):
            broken = reward.name in BROKEN[response.kind]
            if not (v < reward.hi if broken else v == reward.hi):
                return (f"the {response.kind} response scored {reward.name} {v:g}, built to "
                        f"{'fail' if broken else 'pass'}")
    return None


def encode(tokenizer, text: str) -> list[int]:
    """A response's tokens: its text's, then the end-of-turn token (the warm start's
    demonstrations; a finished rollout)."""
    return tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]


def deciding_tokens(tokenizer, ids: Sequence[int], text: str, span: tuple[int, int]):
    """[T] bool: the tokens of ``ids`` whose characters overlap ``span`` of ``text``, mapped
    as the diagnostics map spans (``token_char_spans``); :class:`Dropped` where the tokens do
    not decode back to the text."""
    from methods.mrtpo.diagnostics import token_char_spans, token_mask

    joined, ranges = token_char_spans(tokenizer, ids)
    if not joined.startswith(text):
        raise Dropped("the response's tokens do not decode back to its text")
    return token_mask(ranges, [span])


@dataclass
class Batch:
    """One seed's constructed groups, ready to score as a sampled batch."""

    groups: list[Group]
    ids: list[list[int]]  # per response, KINDS order within each group
    texts: list[str]  # as the rollout engine decodes them (special tokens dropped)
    rewards: list[list[float]]
    deciding: list[dict[str, list[int]]]  # per response: reward -> deciding token indices
    dropped: list[tuple[str, str]]  # (example id, why)


def build(examples: Sequence[Example], task, tokenizer, gold, seed: int) -> Batch:
    """The groups of ``examples`` (``gold(example)``: its correct response), each scored with
    the task's rewards and checked; a prompt that fails a check is dropped with its reason."""
    if tuple(r.name for r in task.rewards) != REWARDS:
        raise ValueError(f"bench credit builds tool-calling responses for the rewards "
                         f"{', '.join(REWARDS)}; task {task.name!r} has "
                         f"{', '.join(r.name for r in task.rewards)} (use --task bfcl)")
    out = Batch([], [], [], [], [], [])
    for ex in examples:
        try:
            group = construct(ex, gold(ex), seed)
            ids = [encode(tokenizer, r.text) for r in group.responses]
            texts = tokenizer.batch_decode(ids, skip_special_tokens=True)
            if texts != [r.text for r in group.responses]:
                raise Dropped("a response does not decode back to its text")
            deciding = [{k: deciding_tokens(tokenizer, i, r.text, r.deciding[k]).nonzero()
                         .squeeze(1).tolist() for k in REWARDS}
                        for i, r in zip(ids, group.responses)]
            values = task.compute_rewards([ex] * len(texts), texts)
            why = unexpected(group, values, task.rewards)
            if why:
                raise Dropped(why)
        except Dropped as exc:
            out.dropped.append((ex.id, str(exc)))
            continue
        out.groups.append(group)
        out.ids += ids
        out.texts += texts
        out.rewards += [list(v) for v in values]
        out.deciding += deciding
    return out


def mass_ratio(w, deciding) -> float:
    """The profile's share on the deciding tokens over their token share (1 = uniform).
    ``w`` [T] >= 0, ``deciding`` [T] bool."""
    t, k = len(w), int(deciding.sum())
    return (float(w[deciding].sum()) / float(w.sum())) / (k / t)


def precision_at_k(w, deciding) -> float:
    """The expected share of deciding tokens among the profile's k largest (k = the number
    of deciding tokens), ties at the k-th value broken uniformly at random: uniform weights
    give exactly the chance level k/T."""
    k = int(deciding.sum())
    kth = float(w.sort(descending=True).values[k - 1])
    above, tied = w > kth, w == kth
    hits = float((above & deciding).sum())
    share_tied = float((tied & deciding).sum()) / float(tied.sum())
    return (hits + (k - int(above.sum())) * share_tied) / k


def chance_test(precision: Sequence[float], k: Sequence[float], t: Sequence[float],
                clusters: Sequence, draws: int = 20000, seed: int = 0) -> dict:
    """The table's statistic, the mean of the prompts' mean precision at k, against its
    distribution when a profile ranks each response's tokens at random (hits among the top k
    hypergeometric: T tokens, k deciding, k drawn; independent responses), from ``draws``
    seeded draws. ``low`` / ``high``: the probabilities of a value as low / as high at chance
    (one-sided, each draw's share with one added above and below)."""
    import numpy as np

    kk, tt = np.asarray(k, dtype=np.int64), np.asarray(t, dtype=np.int64)
    size = {c: list(clusters).count(c) for c in set(clusters)}
    weight = np.array([1.0 / (size[c] * len(size)) for c in clusters])  # mean of prompt means
    null = (np.random.default_rng(seed).hypergeometric(kk, tt - kk, kk, size=(draws, len(kk)))
            / kk) @ weight
    seen = float(np.asarray(precision) @ weight)
    return {"observed": seen, "chance": float(null.mean()),
            "low": float((np.sum(null <= seen + 1e-12) + 1) / (draws + 1)),
            "high": float((np.sum(null >= seen - 1e-12) + 1) / (draws + 1))}


def records(w, mask, deciding, rewards, group, names: Sequence[str], failed) -> list[dict]:
    """Per response, ``<reward>/<stat>`` (and ``<reward>:failed`` / ``:passed``) over the
    rewards whose advantage is nonzero there. ``w`` [N, K, T] profiles (NaN: none),
    ``deciding`` [N, K, T] bool, ``rewards`` [N, K], ``group`` [N], ``failed`` [N, K] bool:
    the response was built to fail the reward."""
    import torch

    means = torch.stack([torch.nanmean(rewards[group == g], dim=0) for g in group.tolist()])
    out = []
    for n in range(w.shape[0]):
        t, rec = int(mask[n].sum()), {}
        for k, name in enumerate(names):
            d, wk = deciding[n, k, :t], w[n, k, :t]
            if bool(torch.isnan(rewards[n, k])) or float(rewards[n, k] - means[n, k]) == 0.0 \
                    or not 0 < int(d.sum()) < t or bool(torch.isnan(wk).any()) \
                    or not float(wk.sum()) > 0:
                continue
            p = precision_at_k(wk, d)
            stats = {"mass_ratio": mass_ratio(wk, d), "precision": p,
                     "chance": int(d.sum()) / t, "gain": p - int(d.sum()) / t,
                     "k": float(d.sum()), "T": float(t)}
            side = "failed" if bool(failed[n, k]) else "passed"
            rec.update({f"{name}/{s}": v for s, v in stats.items()})
            rec.update({f"{name}:{side}/{s}": stats[s] for s in SIDE_STATS})
        out.append(rec)
    return out


def summarise(recs: list[dict], prompts: Sequence[str], seed: int = 0) -> dict[str, dict]:
    """{key: {n, prompts, mean, low, high, values, clusters, rows}}: each statistic over the
    responses that have it, its interval resampling prompts (``localisation.interval``), in
    the form ``localisation.pool`` pools over seeds."""
    from lab.bench.localisation import interval

    out = {}
    for key in sorted({k for r in recs for k in r}):
        kept = [(r[key], c, n) for n, (r, c) in enumerate(zip(recs, prompts)) if key in r]
        vals, clusters = [v for v, _, _ in kept], [c for _, c, _ in kept]
        mean, low, high = interval(vals, seed, clusters=clusters)
        out[key] = {"n": len(vals), "prompts": len(set(clusters)), "mean": mean, "low": low,
                    "high": high, "values": vals, "clusters": clusters,
                    "rows": [n for *_, n in kept]}
    return out


def parse_sources(text: str) -> list[str]:
    """The comma-separated sources, checked before any model loads: a baseline, or a plain
    profile ``bench localisation`` names (no control, no dtype suffix)."""
    from lab.bench.localisation import parse_variant

    out = [s.strip() for s in text.split(",") if s.strip()]
    if not out:
        raise ValueError("--sources is empty: give one or more of " + DEFAULT_SOURCES)
    for spec in out:
        if spec in BASELINES:
            continue
        if ":" in spec or parse_variant(spec)[2]:
            raise ValueError(f"bench credit reads plain profiles; {spec!r} is a control or a "
                             "dtype variant (bench localisation runs those); one of "
                             + DEFAULT_SOURCES)
    return out
