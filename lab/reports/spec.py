"""Table and figure specs: data files (``specs/<name>.toml``), read into frozen dataclasses.

A spec says what the paper's table or figure holds (rows: methods, beta values, ablations;
columns: a task and one of its metrics), which training preset, models and seeds each setting
(``smoke``, ``paper``) uses, and the paper's own numbers for the same cells where its extract
has them. Every name in a spec is checked against the registries when it is loaded, so a spec
that names an unknown method, task, preset or config field fails at once.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.registry import Registry

SPEC_DIR = Path(__file__).resolve().parent / "specs"
KINDS = ("benchmark", "localisation", "methods", "presets", "curves", "diagnostics", "explain")
SETTINGS = ("smoke", "paper")


class SpecError(ValueError):
    """A spec file that does not say what it must; the message names the file."""


@dataclass(frozen=True)
class Row:
    label: str  # as printed in the paper
    method: str  # a method registry name or composition
    base: bool = False  # the starting model, evaluated without RL (``--steps 0``); one seed
    overrides: tuple[tuple[str, Any], ...] = ()  # config fields this row changes (beta, ...)


@dataclass(frozen=True)
class Column:
    label: str
    task: str = ""  # the task whose run stores the metric
    metric: str = ""
    group: str = ""  # the paper's column group (a header spanning columns)
    derived: str = ""  # "mean": the mean of the row's other columns, per seed
    settings: tuple[str, ...] = ()  # only in these settings (empty: every setting)
    # instead of a metric: a per-step training-log key (``diag/format/span_ratio``), each
    # seed's value the mean over its steps; such a column marks no best row
    log: str = ""


@dataclass(frozen=True)
class Setting:
    name: str  # smoke | paper
    preset: str  # the training preset (a task -> preset map in ``presets`` instead, if any)
    models: tuple[str, ...]  # embedded names, or folder names under --model-dir
    seeds: int
    presets: tuple[tuple[str, str], ...] = ()
    smooth: int = 1  # trailing-mean window of the steps-to-threshold statistic
    # config fields every run of this setting pins on top of its preset (the rollout engine its
    # stored seeds were sampled with, say), so a rerun of a missing seed matches them
    overrides: tuple[tuple[str, Any], ...] = ()

    def preset_for(self, task: str) -> str:
        return dict(self.presets).get(task, self.preset)


@dataclass(frozen=True)
class Spec:
    name: str  # table1 ... figure8
    title: str
    caption: str
    kind: str
    path: Path
    rows: tuple[Row, ...] = ()
    columns: tuple[Column, ...] = ()
    settings: tuple[Setting, ...] = ()
    paper: dict = field(default_factory=dict, hash=False, compare=False)
    row_header: str = "Method"
    # the row (benchmark tables) or method (figures) every other is compared against
    reference: str = "GDPO"
    # how many runs each of the paper's "mean ±std" cells averages (its text does not say; each
    # spec says where its number comes from): the n of the intervals on the paper's own gaps
    # (lab.reports.paper_gaps); 0 where its numbers print no std
    paper_n: int = 0
    raw: dict = field(default_factory=dict, hash=False, compare=False)  # kind-specific keys

    def setting(self, name: str) -> Setting:
        for s in self.settings:
            if s.name == name:
                return s
        known = ", ".join(s.name for s in self.settings) or "none"
        raise SpecError(f"{self.name} has no {name!r} setting (it has: {known})")

    def columns_for(self, setting: str) -> tuple[Column, ...]:
        return tuple(c for c in self.columns if not c.settings or setting in c.settings)

    def tasks(self, setting: str) -> tuple[str, ...]:
        """Tasks whose runs this spec reads, in first-use order."""
        if self.kind == "benchmark":
            names = [c.task for c in self.columns_for(setting) if c.task]
        else:
            names = list(self.raw.get("tasks") or [self.raw.get("task")])
        return tuple(dict.fromkeys(n for n in names if n))

    def methods(self) -> tuple[str, ...]:
        if self.rows:
            return tuple(dict.fromkeys(r.method for r in self.rows))
        m = self.raw.get("methods") or [self.raw.get("method")]
        return tuple(x for x in m if x)


def _fail(path: Path, message: str) -> SpecError:
    return SpecError(f"{path}: {message}")


def _settings(path: Path, data: dict) -> tuple[Setting, ...]:
    out = []
    for name, s in (data.get("settings") or {}).items():
        if name not in SETTINGS:
            raise _fail(path, f"unknown setting {name!r}; known: {', '.join(SETTINGS)}")
        presets = tuple(sorted((s.get("presets") or {}).items()))
        if "preset" not in s and not presets:
            raise _fail(path, f"setting {name!r} names no preset")
        out.append(Setting(name=name, preset=s.get("preset", ""), presets=presets,
                           models=tuple(s.get("models") or ()), seeds=int(s.get("seeds", 1)),
                           smooth=int(s.get("smooth", 1)),
                           overrides=tuple(sorted((s.get("overrides") or {}).items()))))
    return tuple(out)


def _printed_stds(value: Any) -> bool:
    """Whether a paper block holds a cell printed with its std ("70.32 ±2.54"), at any depth."""
    if isinstance(value, str):
        return "±" in value
    if isinstance(value, dict):
        return any(_printed_stds(v) for v in value.values())
    if isinstance(value, list):
        return any(_printed_stds(v) for v in value)
    return False


def _paper_n(path: Path, data: dict) -> int:
    """The spec's ``paper_n``: a whole number of runs, 2 or more (a std needs two), required
    where the paper's numbers print a std, since an interval on its gaps needs it."""
    n = data.get("paper_n")
    if n is None:
        if _printed_stds(data.get("paper") or {}):
            raise _fail(path, "its paper numbers print a std (±) but it sets no paper_n: add "
                              "paper_n = <runs per paper cell>, with a comment saying where it "
                              "comes from")
        return 0
    # bool is an int in Python: `paper_n = true` would otherwise read as 1
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise _fail(path, f"paper_n {n!r} is not a whole number of runs, 2 or more")
    return n


def parse(path: Path) -> Spec:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise _fail(path, f"not valid TOML ({exc})") from None
    kind = data.get("kind")
    if kind not in KINDS:
        raise _fail(path, f"kind {kind!r} is not one of {', '.join(KINDS)}")
    rows = []
    for i, r in enumerate(data.get("rows") or ()):
        if "label" not in r or "method" not in r:
            raise _fail(path, f"row {i} needs a label and a method")
        rows.append(Row(label=r["label"], method=r["method"], base=bool(r.get("base", False)),
                        overrides=tuple(sorted((r.get("overrides") or {}).items()))))
    columns = []
    for i, c in enumerate(data.get("columns") or ()):
        if "label" not in c or not (c.get("derived") or (c.get("task") and (c.get("metric")
                                                                            or c.get("log")))):
            raise _fail(path, f"column {i} needs a label and a task + metric (or + log, or "
                              "derived)")
        if c.get("derived") not in (None, "mean"):
            raise _fail(path, f"column {i}: derived {c['derived']!r} is not 'mean'")
        columns.append(Column(label=c["label"], task=c.get("task", ""),
                              metric=c.get("metric", ""), group=c.get("group", ""),
                              derived=c.get("derived", ""), log=c.get("log", ""),
                              settings=tuple(c.get("settings") or ())))
    known = {"title", "caption", "kind", "rows", "columns", "settings", "paper", "row_header",
             "reference", "paper_n"}
    return Spec(name=path.stem, title=data.get("title", path.stem),
                caption=data.get("caption", ""), kind=kind, path=path, rows=tuple(rows),
                columns=tuple(columns), settings=_settings(path, data),
                paper=data.get("paper") or {}, row_header=data.get("row_header", "Method"),
                reference=data.get("reference", "GDPO"), paper_n=_paper_n(path, data),
                raw={k: v for k, v in data.items() if k not in known})


def check(spec: Spec) -> None:
    """Every name the spec uses exists: methods, tasks, presets, config fields, metrics count."""
    import methods
    from harness.config import PRESETS, all_fields
    from tasks import TASKS

    where = spec.path
    try:
        for m in spec.methods():
            methods.get(m)
        for s in spec.settings:
            for p in {s.preset, *dict(s.presets).values()} - {""}:
                PRESETS.get(p)
            for t in spec.tasks(s.name):
                TASKS.get(t)
        fields = all_fields()
        for s in spec.settings:
            for name, _ in s.overrides:
                if name not in fields:
                    raise SpecError(f"setting {s.name!r} overrides unknown config field {name!r}")
        for r in spec.rows:
            for name, _ in r.overrides:
                if name not in fields:
                    raise SpecError(f"row {r.label!r} overrides unknown config field {name!r}")
        if spec.kind == "presets":
            for p in spec.raw.get("presets", ()):
                PRESETS.get(p)
    except (KeyError, SpecError) as exc:
        raise _fail(where, str(exc)) from None
    if spec.kind == "benchmark":
        if spec.reference not in {r.label for r in spec.rows}:
            raise _fail(where, f"reference row {spec.reference!r} is not one of its rows; set "
                               "reference = \"<row label>\"")
        n_paper = len([c for c in spec.columns if "smoke" not in c.settings or
                       "paper" in c.settings])
        for model, rows in spec.paper.items():
            for label, cells in rows.items():
                if label not in {r.label for r in spec.rows}:
                    raise _fail(where, f"paper numbers for unknown row {label!r} ({model})")
                if len(cells) != n_paper:
                    raise _fail(where, f"paper row {label!r} ({model}) has {len(cells)} cells; "
                                       f"the paper's columns are {n_paper}")


def _load_all() -> Registry[Spec]:
    reg: Registry[Spec] = Registry("table or figure")
    for path in sorted(SPEC_DIR.glob("*.toml")):
        reg.add(path.stem, parse(path))
    return reg


SPECS = _load_all()


def get(name: str) -> Spec:
    spec = SPECS.get(name)
    check(spec)
    return spec


def paper_cell(text: str) -> tuple[float, float] | None:
    """``"74.24 ±1.26"`` -> (74.24, 1.26); ``"62.38"`` -> (62.38, nan); ``"–"`` -> None."""
    text = text.strip()
    if text in ("", "-", "–"):
        return None
    mean, _, std = text.partition("±")
    return float(mean), float(std) if std.strip() else float("nan")
