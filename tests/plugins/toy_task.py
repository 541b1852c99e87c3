"""A test plugin: a task whose rewards vary even for a random model's output, so that the
loop's advantages (and so its gradients) are non-zero on tiny-random."""
from tasks import TASKS, TRAIN_SETS
from tasks.base import Example, Reward, Task, TrainSet, VerifierInfo


PARITY = "Use an even number of characters."
VOWELS = "Vowels score: a, e, i, o, u."


def _example(i: int) -> Example:
    return Example(id=f"toy-{i}", messages=({"role": "user", "content": f"Count to {i}. {PARITY}"},),
                   reference=str(i),
                   verifier_info=(VerifierInfo("parity", PARITY, False),
                                  VerifierInfo("vowels", VOWELS, True)),
                   metadata={"category": "odd" if i % 2 else "even"})


def _score(examples, responses):
    ok = [len(r) % 2 == 0 for r in responses]
    return {"metrics": {"even_rate": 100.0 * sum(ok) / len(ok)},
            "items": [{"id": e.id, "valid": v} for e, v in zip(examples, ok)]}


REWARDS = (
    Reward("parity", 0, 1, lambda ex, r: float(len(r) % 2 == 0), "even character count"),
    Reward("vowels", 0, 1, lambda ex, r: min(1.0, sum(c in "aeiou" for c in r) / 10)),
)
if "toy" not in TASKS:
    TRAIN_SETS.add("toy-train", TrainSet("toy-train", "toy", "20 counting prompts",
                                         lambda data_dir, seed: [_example(i) for i in range(20)],
                                         demonstration=lambda ex: f"{ex.reference} done"))
    TASKS.add("toy", Task("toy", "toy", "a test task", REWARDS, ("toy-train",),
                          lambda data_dir: [_example(i) for i in range(100, 112)], _score,
                          ("even_rate",)))
