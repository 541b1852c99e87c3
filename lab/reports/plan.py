"""Which runs a spec needs, which of them are stored, which cannot run here, and what the rest
would cost.

A run is (task, method, model, setting, seed); its config comes from the spec's training preset
with the row's overrides, exactly as ``harness run`` would build it, so a stored seed is found
under the same folder and checked against the same identity fields.
"""
from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness import config as cfg
from lab.reports.spec import Row, Setting, Spec


@dataclass(frozen=True)
class Job:
    """One (row, model, task) of a spec: a config and the seeds it should have."""

    row: Row
    model_label: str  # as the spec names it
    task: str
    config: cfg.RunConfig  # seed 0's; seed k is replace(config, seed=k)
    seeds: tuple[int, ...]
    stored: tuple[int, ...] = ()
    blocked: str = ""  # why it cannot run here (missing model or data); "" if it can
    # stored seeds made by other code than this tree's (another fingerprint); with
    # --rerun-stale they are not in ``stored`` but in ``missing``
    stale: tuple[int, ...] = ()
    run: Any = None  # its harness.run.Run (of ``seeds``): names looked up, folders named once

    @property
    def missing(self) -> tuple[int, ...]:
        return tuple(s for s in self.seeds if s not in self.stored)

    def seed_config(self, seed: int) -> cfg.RunConfig:
        return replace(self.config, seed=seed)

    def seed_run(self, seed: int):
        """Seed ``seed``'s files (harness.seedrun.SeedRun: the one source of a seed's paths)."""
        if self.run is not None and seed in self.seeds:  # named when the plan resolved it
            return self.run.seed_runs()[self.seeds.index(seed)]
        from harness.seedrun import SeedRun

        return SeedRun.of_seed(self.config, seed)  # a job made by hand


@dataclass
class Plan:
    spec: Spec
    setting: Setting
    jobs: list[Job] = field(default_factory=list)
    allow_mixed_code: bool = False  # pool seeds of several code versions (footnoted)
    # result path -> the validated result: each stored seed is read once per plan, however many
    # columns, figures and checks read it
    loaded: dict[Path, dict] = field(default_factory=dict, repr=False)

    def result(self, job: Job, seed: int) -> dict:
        """A stored seed's result (read once)."""
        from harness.results import load_result

        path = job.seed_run(seed).result
        if path not in self.loaded:
            self.loaded[path] = load_result(path)
        return self.loaded[path]

    def stored_results(self, job: Job) -> tuple[list[tuple[int, dict]], str]:
        """(seed, result) of a job's stored seeds, and the footnote when they pool several code
        versions (a ValueError naming them unless ``allow_mixed_code``) or several kinds of
        machine."""
        from lab.reports.aggregate import check_same_code, machine_note

        results = [self.result(job, s) for s in job.stored]
        note = check_same_code([job.seed_run(s).result for s in job.stored], results,
                               self.allow_mixed_code)
        note = "; ".join(x for x in (note, machine_note(job.stored, results)) if x)
        return list(zip(job.stored, results)), note

    def machines(self, job: Job) -> tuple[tuple[int, str | None], ...]:
        """(seed, the kind of machine that made it, None: not recorded) of a job's stored
        seeds."""
        from harness.provenance import machine_of_result

        return tuple((s, machine_of_result(self.result(job, s))) for s in job.stored)

    @property
    def blocked(self) -> dict[str, str]:
        """What cannot run here -> why, once per reason's subject."""
        return {f"{j.task} ({j.model_label})": j.blocked for j in self.jobs if j.blocked}

    def to_run(self) -> list[tuple[Job, int]]:
        return [(j, s) for j in self.jobs if not j.blocked for s in j.missing]

    def trainings(self) -> list[tuple[cfg.RunConfig, tuple[int, ...], list[Job]]]:
        """The runs to do, one training per group: jobs that differ only in the benchmark
        (same family, training set and missing seeds) train once and evaluate each benchmark
        (``--task A,B``); each: (config, seeds, its jobs)."""
        groups: dict[tuple, list[Job]] = {}
        for job in self.jobs:
            if job.blocked or not job.missing:
                continue
            c, run = job.config, job.run
            key = (c, job.missing) if run.train_problem else (  # the preflight names it
                replace(c, task=replace(c.task, task="")), run.task.family, run.train_set.name,
                job.missing)
            groups.setdefault(key, []).append(job)
        out = []
        for jobs in groups.values():
            first = jobs[0].config
            config = replace(first, task=replace(first.task, also_evaluate=",".join(
                j.task for j in jobs[1:])))
            out.append((config, jobs[0].missing, jobs))
        return out


def model_for(name: str, model_dir: str | None) -> tuple[str, str]:
    """(what --model takes, why it is missing or ""): embedded names as they are, paper models
    as folders under --model-dir."""
    from harness.models import EMBEDDED

    if name in EMBEDDED:
        return name, ""
    if not model_dir:
        return name, f"model {name}: pass --model-dir, a folder holding {name}/ (an HF model)"
    folder = Path(model_dir).expanduser().resolve() / name
    if not (folder / "config.json").is_file():
        return str(folder), f"model {name}: {folder} holds no HF model (config.json)"
    return str(folder), ""


def run_config(spec: Spec, setting: Setting, row: Row, model: str, task: str,
               results_dir: str, data_dir: str | None) -> cfg.RunConfig:
    overrides = {"task": task, "method": row.method, "model": model,
                 "results_dir": str(Path(results_dir).resolve()), **dict(setting.overrides),
                 **dict(row.overrides)}
    if data_dir:
        overrides["data_dir"] = str(Path(data_dir).expanduser().resolve())
    if row.base:
        overrides["steps"] = 0
    return cfg.resolve(setting.preset_for(task), overrides)


_DATA_CHECKED: dict[tuple, str] = {}


def data_problem(run) -> str:
    """Why this task cannot be trained and evaluated here ("" if it can); checked once per
    (task, data dir, training set) by loading its training set and benchmark."""
    from harness.data import load_eval, load_train

    config = run.config
    key = (config.task.task, config.task.data_dir, config.task.train_data)
    if key not in _DATA_CHECKED and run.train_problem:
        _DATA_CHECKED[key] = run.train_problem.removeprefix("training set: ").splitlines()[0]
    if key not in _DATA_CHECKED:
        try:
            load_train(run)
            load_eval(run.task, config)
            _DATA_CHECKED[key] = ""
        except (FileNotFoundError, ValueError) as exc:
            _DATA_CHECKED[key] = str(exc).splitlines()[0]
    return _DATA_CHECKED[key]


def make_plan(spec: Spec, setting_name: str, seeds: int | None = None,
              results_dir: str = "results", data_dir: str | None = None,
              model_dir: str | None = None, allow_mixed_code: bool = False,
              rerun_stale: bool = False) -> Plan:
    """``rerun_stale``: stored seeds made by other code than this tree's count as missing."""
    from harness import provenance
    from harness.launch import pending_seeds
    from harness.run import of_config

    setting = spec.setting(setting_name)
    n_seeds = seeds or setting.seeds
    plan = Plan(spec, setting, allow_mixed_code=allow_mixed_code)
    here = provenance.fingerprint()
    for model_label in setting.models:
        model, model_missing = model_for(model_label, model_dir)
        for task in spec.tasks(setting_name):
            for row in spec_rows(spec):
                config = run_config(spec, setting, row, model, task, results_dir, data_dir)
                want = (0,) if row.base else tuple(range(n_seeds))
                # a stored seed made with other settings stops the plan: it is never pooled
                run = of_config(config, want)
                todo = pending_seeds(run)
                have = tuple(s for s in want if s not in todo)
                job = Job(row, model_label, task, config, want, have, run=run)
                stale = tuple(s for s in have if provenance.of_result(
                    plan.result(job, s))["fingerprint"] != here)
                if rerun_stale:
                    have = tuple(s for s in have if s not in stale)
                blocked = model_missing or ("" if len(have) == len(want)
                                            else data_problem(run))
                plan.jobs.append(replace(job, stored=have, blocked=blocked, stale=stale))
    return plan


def spec_rows(spec: Spec) -> tuple[Row, ...]:
    """Benchmark specs have rows; curve, diagnostic and explain specs name methods."""
    if spec.rows:
        return spec.rows
    return tuple(Row(label=m, method=m) for m in spec.methods())


def estimate_seconds(plan: Plan, results_dir: str) -> tuple[float, int]:
    """(estimated seconds of the missing runs, how many had nothing to estimate from): each
    missing seed as ``estimate_run`` says."""
    stored = stored_costs(results_dir)
    total, unknown = 0.0, 0
    for _, seeds, jobs in plan.trainings():
        for k, job in enumerate(jobs):
            # one training per group: the benchmarks after the first add their evaluation
            one = estimate_run(job.config, stored, with_training=k == 0,
                               folder=job.seed_run(job.seeds[0]).folder)
            if one is None:
                unknown += len(seeds)
            else:
                total += one * len(seeds)
    return total, unknown


def stored_costs(results_dir: str) -> list[tuple]:
    """What every stored seed under ``results_dir`` cost: (task, method, preset, steps, wall
    seconds, seconds per step, eval_limit, run folder)."""
    from harness.results import load_result

    stored = []
    for p in Path(results_dir).glob("*/*/*/*/seed*.json"):
        try:
            r = load_result(p)
            c = r["config"]
            stored.append((c["task"]["task"], c["method"]["method"], c["preset"],
                           c["training"]["steps"], float(r["wall_seconds"]),
                           float(r.get("train", {}).get("time/step/mean", 0.0)),
                           c["task"].get("eval_limit", 0), p.parent.resolve()))
        except (ValueError, KeyError, TypeError):
            continue  # not a result file of this version: nothing to estimate from
    return stored


def estimate_run(config, stored: list[tuple], with_training: bool = True,
                 folder: Path | None = None) -> float | None:
    """Seconds one seed of ``config`` would take (None: nothing stored to estimate from);
    ``with_training=False``: its start-up and evaluation only.

    It is estimated from the stored seeds closest to it: its own run folder's (the same
    settings: the best guess of its cost), else the same task, method and preset, else the
    same task and preset, else the same task and method, else the same task: their start-up
    and evaluation time (``wall_seconds`` less their steps) plus its own step count times their
    median seconds per step. Within a match, seeds that evaluated the same subset
    (``eval_limit``) are preferred: a full benchmark takes many times a smoke subset."""
    from harness.seedrun import SeedRun

    c = config
    near = []
    folder = (folder or SeedRun.of(c).folder).resolve()  # ``folder``: its run folder, if known
    for match in (lambda s: s[7] == folder,
                  lambda s: s[:3] == (c.task.task, c.method.method, c.preset),
                  lambda s: (s[0], s[2]) == (c.task.task, c.preset),
                  lambda s: s[:2] == (c.task.task, c.method.method),
                  lambda s: s[0] == c.task.task):
        near = [s for s in stored if match(s)]
        if near:
            same_subset = [s for s in near if s[6] == c.task.eval_limit]
            near = same_subset or near
            break
    if not near:
        return None
    # wall = fixed (start-up + evaluation) + steps * s/step
    fixed = statistics.median(max(0.0, w - n * sps) for _, _, _, n, w, sps, *_ in near)
    per_step = statistics.median(s[5] for s in near if s[5] > 0) if any(
        s[5] > 0 for s in near) else 0.0
    return fixed + (c.training.steps * per_step if with_training else 0.0)


def needs_text(reason: str) -> str:
    """The short form a table cell shows for a run that cannot be made here."""
    m = re.search(r"DATA_DIR/[\w.\-]+", reason)
    if reason.startswith("model "):
        return "needs --model-dir"
    return f"needs {m.group(0)}" if m else "needs --data-dir"
