"""A test plugin: tasks whose steps may carry no reward signal, so that a run has steps that
skip their update (and the weight sync) on tiny-random.

``toy-silent``: every reward is the same for every response: no step has signal.
``toy-quiet``: the prompts with an even number carry the parity reward's signal, the odd ones
none; with one prompt per step, some steps train and some skip.
"""
from tasks import TASKS, TRAIN_SETS
from tasks.base import Example, Reward, Task, TrainSet, VerifierInfo

PARITY = "Use an even number of characters."


def _example(i: int) -> Example:
    return Example(id=f"quiet-{i}", messages=({"role": "user",
                                               "content": f"Count to {i}. {PARITY}"},),
                   reference=str(i), verifier_info=(VerifierInfo("parity", PARITY, False),
                                                    VerifierInfo("flat", "Nothing.", False)))


def _loud(ex: Example) -> bool:
    return int(ex.reference) % 2 == 0


def _score(examples, responses):
    ok = [len(r) % 2 == 0 for r in responses]
    return {"metrics": {"even_rate": 100.0 * sum(ok) / len(ok)},
            "items": [{"id": e.id, "valid": v} for e, v in zip(examples, ok)]}


SILENT = (Reward("parity", 0, 1, lambda ex, r: 1.0, "always 1"),
          Reward("flat", 0, 1, lambda ex, r: 0.0, "always 0"))
QUIET = (Reward("parity", 0, 1, lambda ex, r: float(len(r) % 2 == 0) if _loud(ex) else 1.0,
                "even character count (even-numbered prompts only)"),
         Reward("flat", 0, 1, lambda ex, r: 0.0, "always 0"))


def _eval(data_dir):
    return [_example(i) for i in range(100, 106)]


for name, rewards in (("toy-silent", SILENT), ("toy-quiet", QUIET)):
    if name not in TASKS:
        TRAIN_SETS.add(f"{name}-train", TrainSet(
            f"{name}-train", name, "10 counting prompts",
            lambda data_dir, seed: [_example(i) for i in range(10)],
            demonstration=lambda ex: f"{ex.reference} done"))
        TASKS.add(name, Task(name, name, "a test task", rewards, (f"{name}-train",), _eval,
                             _score, ("even_rate",)))
