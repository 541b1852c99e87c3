"""Config fields as command-line flags: one flag per field (``rollout.group_size`` ->
``--group-size``), and the parsed flags back as config overrides."""
from __future__ import annotations

import argparse
from pathlib import Path

from harness import config as cfg

_TYPES = {"int": int, "float": float, "str": str, "Optional[str]": str, "Optional[float]": float}
_NOT_FLAGS = {"seed", "preset"}  # --seeds and --preset are handled by the command itself
_FAMILY_OPTIONS = cfg.FAMILY_FIELDS  # task-family options that `score` accepts too


def add_config_flags(parser: argparse.ArgumentParser, only: tuple[str, ...] = ()) -> None:
    """One flag per config field (``only``: just the fields with these name prefixes)."""
    for name, (section, f) in cfg.all_fields().items():
        if name in _NOT_FLAGS or (only and not name.startswith(only)):
            continue
        flag = "--" + name.replace("_", "-")
        help_text = f.metadata.get("help", "")
        if f.type == "tuple[str, ...]":
            parser.add_argument(flag.rstrip("s"), dest=name, action="append",
                                default=argparse.SUPPRESS, metavar="PATH_OR_MODULE",
                                help=help_text)
        elif f.type == "bool":
            parser.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction,
                                default=argparse.SUPPRESS, help=help_text)
        else:
            parser.add_argument(flag, dest=name, type=_TYPES[str(f.type)],
                                default=argparse.SUPPRESS, metavar=name.upper(), help=help_text)


def overrides_from(args: argparse.Namespace) -> dict:
    known = cfg.all_fields()
    out = {k: v for k, v in vars(args).items() if k in known}
    if "plugins" in out:
        out["plugins"] = tuple(str(Path(p).resolve()) if p.endswith(".py") else p
                               for p in out["plugins"])
    return out
