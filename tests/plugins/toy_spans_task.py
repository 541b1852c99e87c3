"""A test plugin: the toy task with checked spans (``parity``: the response's first half;
``vowels``: its vowels; ``parity:tail``: its last three characters), so that the localisation
probe and the diagnostics have spans to measure on a tiny-random model's output."""
from tasks import TASKS, TRAIN_SETS
from tasks.base import Example, Reward, Task, TrainSet, VerifierInfo

PARITY = "Use an even number of characters."
VOWELS = "Vowels score: a, e, i, o, u."


def _example(i: int) -> Example:
    return Example(id=f"toy-spans-{i}", reference=str(i),
                   messages=({"role": "user", "content": f"Count to {i}. {PARITY} {VOWELS}"},),
                   verifier_info=(VerifierInfo("parity", PARITY, False),
                                  VerifierInfo("vowels", VOWELS, False)))


def _score(examples, responses):
    ok = [len(r) % 2 == 0 for r in responses]
    return {"metrics": {"even_rate": 100.0 * sum(ok) / len(ok)},
            "items": [{"id": e.id, "valid": v} for e, v in zip(examples, ok)]}


def _spans(example, response):
    n = len(response)
    return {"parity": [(0, n // 2)] if n > 1 else [],
            "vowels": [(i, i + 1) for i, c in enumerate(response) if c in "aeiou"],
            "parity:tail": [(max(0, n - 3), n)] if n > 3 else []}


REWARDS = (
    Reward("parity", 0, 1, lambda ex, r: float(len(r) % 2 == 0), "even character count"),
    Reward("vowels", 0, 1, lambda ex, r: min(1.0, sum(c in "aeiou" for c in r) / 10)),
)
if "toy-spans" not in TASKS:
    TRAIN_SETS.add("toy-spans-train", TrainSet("toy-spans-train", "toy-spans", "20 prompts",
                                               lambda data_dir, seed: [_example(i)
                                                                       for i in range(20)],
                                               demonstration=lambda ex: f"{ex.reference}"))
    TASKS.add("toy-spans", Task("toy-spans", "toy-spans", "a test task with spans", REWARDS,
                                ("toy-spans-train",),
                                lambda data_dir: [_example(i) for i in range(100, 104)], _score,
                                ("even_rate",), spans=_spans))
