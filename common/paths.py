"""Whether a folder can be written, proven rather than guessed from permission bits: shared by
the harness's one check (its outputs) and the methods' own option checks (a folder an option
names for writing)."""
from __future__ import annotations

import os
from pathlib import Path


def folder_problem(path: str | Path, flag: str) -> str | None:
    """Why the folder ``path`` could not be created or written (None: it can). The nearest
    existing ancestor must be a folder in which a probe file can be created (it is removed at
    once; nothing else is made): permission bits say nothing for root or on a read-only or
    virtual file system (/proc)."""
    import tempfile

    if str(path).strip() == "":
        return f"{flag} is empty; give a folder"
    p = Path(path).expanduser().absolute()
    probe = p
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe == p and not p.is_dir():
        return f"{flag} {path}: exists and is not a folder; give a folder"
    if not probe.is_dir():
        return f"{flag} {path}: {probe} is a file, so the folder cannot be created; give another"
    where = "" if probe == p else f" ({probe} is the nearest existing folder)"
    try:
        fd, name = tempfile.mkstemp(dir=probe, prefix=".harness-probe-")
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        return (f"{flag} {path}: cannot be written{where}: {exc.strerror or exc}; give a folder "
                "you can write to")
    return None
