"""A seeded generator of RLLA-format tool-calling training examples (offline, no data needed).

Four kinds, as BFCL names them, cycled in order so every prefix of the output is balanced:

* ``single``: one tool offered, one call;
* ``multiple``: two or three tools offered, one of them called;
* ``parallel``: one tool offered, called two or three times with different arguments;
* ``parallel_multiple``: two or three tools offered, two or three calls using at least two tools.

Example ``i`` of seed ``s`` depends only on ``(s, i)``, so ``generate(n, s)`` is a prefix of
``generate(m, s)`` for ``n <= m``. Prompts are short on purpose (1-3 tools, one-line schemas).
"""
from __future__ import annotations

import random

from tasks.base import Example
from tasks.tools.prompt import build_messages, render_output
from tasks.tools.rewards import verifier_info
from tasks.tools.toolbox import TOOLS, Tool

KINDS = ("single", "multiple", "parallel", "parallel_multiple")

_SINGLE = ("{C}.", "Could you {c}?", "Please {c}.", "Can you {c} for me?", "I need you to {c}.")
_TWO = ("{C} and {c2}.", "Could you {c} and also {c2}?", "Please {c}, then {c2}.",
        "I need two things: {c}, and {c2}.")
_THREE = ("{C}, {c2}, and {c3}.", "Could you {c}, {c2}, and {c3}?",
          "Please do three things: {c}; {c2}; and {c3}.")


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _request(rng: random.Random, clauses: list[str]) -> str:
    """Join one to three request clauses into a natural user message."""
    template = rng.choice({1: _SINGLE, 2: _TWO, 3: _THREE}[len(clauses)])
    fields = {"c": clauses[0], "C": _cap(clauses[0])}
    fields.update({f"c{k}": c for k, c in enumerate(clauses[1:], start=2)})
    return template.format(**fields)


def _distinct_calls(rng: random.Random, tool: Tool, count: int) -> list[tuple[dict, str]]:
    """``count`` samples of one tool with pairwise different arguments."""
    out: list[tuple[dict, str]] = []
    for _ in range(100 * count):  # the pools are large enough; the bound only guards a bad tool
        args, clause = tool.phrase(rng)
        if all(args != prev for prev, _ in out):
            out.append((args, clause))
            if len(out) == count:
                return out
    raise RuntimeError(f"tool {tool.name!r} cannot produce {count} distinct calls")


def _think(kind: str, names: list[str]) -> str:
    """A short, truthful reasoning line for the gold output."""
    if kind == "single":
        return f"The request matches {names[0]}; I will call it with the given values."
    if kind == "multiple":
        return f"Among the tools, {names[0]} fits this request, so I will call it."
    if kind == "parallel":
        return f"The user asks for {len(names)} separate items, so I will call {names[0]} " \
               f"{len(names)} times."
    unique = list(dict.fromkeys(names))
    return f"The request has {len(names)} parts; I will call {' and '.join(unique)}."


def make_example(seed: int, index: int) -> Example:
    """Example ``index`` of the stream for ``seed`` (see module doc)."""
    rng = random.Random(f"tools-synth:{seed}:{index}")
    kind = KINDS[index % len(KINDS)]
    if kind == "single":
        offered = [rng.choice(TOOLS)]
        calls = [(offered[0], *_distinct_calls(rng, offered[0], 1)[0])]
    elif kind == "multiple":
        offered = rng.sample(TOOLS, rng.randint(2, 3))
        target = rng.choice(offered)
        calls = [(target, *_distinct_calls(rng, target, 1)[0])]
    elif kind == "parallel":
        offered = [rng.choice(TOOLS)]
        calls = [(offered[0], a, c) for a, c in _distinct_calls(rng, offered[0], rng.randint(2, 3))]
    else:
        offered = rng.sample(TOOLS, rng.randint(2, 3))
        n_calls = rng.randint(2, 3)
        # At least two different tools; a third call may repeat one of them.
        chosen = rng.sample(offered, 2) + ([rng.choice(offered)] if n_calls == 3 else [])
        calls = []
        for tool in chosen:
            taken = [a for t, a, _ in calls if t is tool]
            for args, clause in _distinct_calls(rng, tool, len(taken) + 1):
                if args not in taken:
                    calls.append((tool, args, clause))
                    break
    user_text = _request(rng, [clause for _, _, clause in calls])
    call_dicts = [{"name": tool.name, "parameters": args} for tool, args, _ in calls]
    gold = render_output(_think(kind, [c["name"] for c in call_dicts]), call_dicts)
    return Example(
        id=f"tools-synth-{seed}-{index}",
        messages=build_messages([tool.schema() for tool in offered], user_text),
        reference=gold,
        verifier_info=verifier_info(gold),
        metadata={"kind": kind, "source": "tools-synth", "n_calls": len(call_dicts)},
    )


def generate(n: int, seed: int) -> list[Example]:
    """``n`` examples for ``seed``; deterministic, balanced over :data:`KINDS`."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return [make_example(seed, i) for i in range(n)]
