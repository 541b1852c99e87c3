"""``reproduce NAME --recheck``: make stored seeds of other code current by an equivalence check
instead of a remake.

The fingerprint (``harness.provenance``) is exact and conservative: any edit of the
result-determining sources makes every stored seed "other code", even an edit that changes no
number. Remaking a table costs hours; this check costs one seed per cell. It reruns the cell's
lowest stale seed on this tree, with the stored seed's own settings, into
``<results-dir>/checks/recheck/<this fingerprint>/`` (beside the stored seed, never over it), and
compares what the two runs computed:

- the final parameters (the SHA-256 every run stores),
- every step's logged metrics except wall-clock times (``time/*``),
- the evaluation: the result's metrics, item count and data hashes, and every prediction
  line; and the settings, as this code reads both configs.

When all are identical, this code computes what the old code did on the cell's settings, so
each seed of the cell made by that same old code is re-stamped: its provenance's fingerprint
becomes this tree's, and ``recheck`` in it keeps the old fingerprint and commit, the checked
seed and the check's record (``seed<k>.recheck.json`` beside the rerun: both fingerprints, the
rerun's files, what was compared and found). When anything differs nothing is re-stamped; the
record lists the differences, and ``--rerun-stale`` remakes the cell.

Two things would make an identical rerun say nothing about the code, and are ruled out first:
- a seed made on another kind of machine (with or without bf16 kernels, as recorded or
  inferred; another instruction set, AMX or not, other GPUs) or at another torch thread count
  computes its sums in another order, so this code cannot reproduce it bit for bit: a rerun
  here would differ whatever the code, so it is not made, and the cell is listed as not
  checked, with the reason and the two ways on: ``--rerun-stale`` remakes it here (another
  sample, which the table then footnotes as made on another kind), or ``--recheck`` on its
  kind of machine at its thread count. Checking another sample against the stored cell's
  interval instead would pass a changed computation whose change is smaller than the seeds'
  spread, which is the change a recheck exists to catch;
- a warm start cached by other code would feed the rerun the old code's model: such a cache is
  moved aside (to ``<folder>.other-code-<n>``, nothing is deleted) so this code trains its own.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from lab.reports.plan import Job, Plan

TIMES = "time/"  # wall-clock entries: never identical between two runs
RECORD_SUFFIX = ".recheck.json"
SHOWN = 8  # differences listed per check


@dataclass
class Outcome:
    """One cell's check: the seed rerun, the record written, the seeds re-stamped, or why it
    was not checked."""

    job: Job
    seed: int
    record: Path | None = None
    differences: list[str] = field(default_factory=list)
    restamped: list[int] = field(default_factory=list)
    skipped: str = ""


def _bf16(machine: dict | None):
    return None if not isinstance(machine, dict) else machine.get("bf16")


def machine_problem(stored: dict, here: dict, threads: int | None = None) -> str:
    """'' when a rerun here can reproduce the stored seed bit for bit; else why not.
    ``threads``: the torch threads the rerun's workers would compute with."""
    from harness.provenance import of_result

    theirs, ours = of_result(stored).get("machine"), here
    if theirs is None:
        return ""  # not recorded: an identical rerun still shows the code computes the same
    ways = "(--rerun-stale remakes it here, or --recheck on that kind of machine)"
    for key, what in (("isa", "instruction set"), ("amx", "AMX")):
        if theirs.get(key) is not None and ours.get(key) is not None \
                and theirs[key] != ours[key]:
            return (f"made with {what} {theirs[key]}, this machine's {ours[key]}: other "
                    f"kernels, other sums, so a rerun here checks nothing {ways}")
    if theirs.get("threads") and threads and theirs["threads"] != threads:
        return (f"made at {theirs['threads']} torch threads, a rerun here at {threads}: the "
                "sums split otherwise and it samples another first rollout, so it checks "
                f"nothing (--cpus-per-worker {theirs['threads']} in its settings, or "
                "--rerun-stale remakes it here)")
    if _bf16(theirs) is not None and _bf16(theirs) != _bf16(ours):
        return (f"made on a CPU {'with' if _bf16(theirs) else 'without'} bf16 kernels, this one "
                f"{'has' if _bf16(ours) else 'has none'}: the same code samples differently, so "
                "a rerun here checks nothing (--rerun-stale remakes it here, or --recheck on "
                "that kind of machine)")
    if list(theirs.get("gpus") or ()) != list(ours.get("gpus") or ()):
        return "made with other GPUs than this machine's"
    return ""


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _untimed(d: dict) -> dict:
    return {k: v for k, v in d.items() if not k.startswith(TIMES)}


def _differ(where: str, a, b, out: list[str]) -> None:
    """Append what differs between a and b (dicts key by key)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            _differ(f"{where} {key}", a.get(key), b.get(key), out)
        return
    if a != b:
        out.append(f"{where}: stored {json.dumps(a, sort_keys=True)[:120]}, rerun "
                   f"{json.dumps(b, sort_keys=True)[:120]}")


def compare(stored: Path, rerun: Path) -> tuple[list[str], dict]:
    """(differences, what was compared) between two results of one seed and their per-step
    logs and predictions (``seed<k>.json`` paths); [] when everything but the times agrees."""
    from harness.config import RunConfig
    from harness.results import identity, load_result

    a, b = load_result(stored), load_result(rerun)
    out: list[str] = []
    # the settings as this code reads both (a stored hash was computed over the fields its
    # code knew; a field added since reads as what its absence meant)
    _differ("settings", identity(RunConfig.from_dict(a["config"]), machine=True),
            identity(RunConfig.from_dict(b["config"]), machine=True), out)
    for key in ("data", "num_eval_items", "metrics"):
        _differ(key, a.get(key), b.get(key), out)
    ta, tb = _untimed(a.get("train", {})), _untimed(b.get("train", {}))
    if not ta.get("final_param_sha256"):
        out.append("the stored seed has no final_param_sha256: nothing to compare the "
                   "parameters with")
    for key in sorted(set(ta) | set(tb)):
        _differ(f"train {key}", ta.get(key), tb.get(key), out)
    steps = preds = 0
    for suffix in (".train.jsonl", ".predictions.jsonl"):
        fa, fb = stored.with_suffix(suffix), rerun.with_suffix(suffix)
        if not fa.is_file() and not fb.is_file():
            continue  # neither run wrote one (a run that evaluates nothing item by item)
        if not fa.is_file() or not fb.is_file():
            out.append(f"{suffix.lstrip('.')}: {'stored' if not fa.is_file() else 'rerun'} file "
                       "missing")
            continue
        ra, rb = _rows(fa), _rows(fb)
        if len(ra) != len(rb):
            out.append(f"{suffix.lstrip('.')}: {len(ra)} lines stored, {len(rb)} rerun")
        for i, (x, y) in enumerate(zip(ra, rb)):
            if suffix == ".train.jsonl":
                x, y = _untimed(x), _untimed(y)
            for key in sorted(set(x) | set(y)):
                _differ(f"{suffix.lstrip('.')} line {i + 1} {key}", x.get(key), y.get(key), out)
        if suffix == ".train.jsonl":
            steps = len(ra)
        else:
            preds = len(ra)
    compared = {"final_param_sha256": ta.get("final_param_sha256"), "train_log_lines": steps,
                "predictions": preds, "metrics": len(a.get("metrics", {})),
                "train_summary_keys": len(ta)}
    return out, compared


def restamp(path: Path, new: dict, record: Path, checked_seed: int) -> None:
    """Give a stored seed this tree's fingerprint, keeping what made it (``recheck``)."""
    from harness.provenance import of_result
    from harness.results import atomic_write_json, load_result

    data = load_result(path)
    old = dict(of_result(data))
    data["provenance"] = {**old, "fingerprint": new["fingerprint"], "recheck": {
        "from_fingerprint": old["fingerprint"], "from_commit": old.get("commit", "unknown"),
        "commit": new["commit"], "checked_seed": checked_seed,
        "record": record.as_posix()}}
    atomic_write_json(path, data)


def set_aside_other_warm_start(run, fingerprint: str, log, cache_dir=None) -> None:
    """Move a warm start the run (``harness.run.Run``) would reuse aside when other code
    trained it (or one cached before warm starts recorded their code), so this code trains its
    own."""
    from harness.warmstart import cache
    from harness.warmstart.data import content_hash

    if not run.config.warmstart.warm_start:
        return
    folder = run.warm_start_folder if cache_dir is None else \
        cache.folder(run, content_hash(run.demonstrations), cache_dir)
    if not cache.is_complete(folder):
        return
    made = cache.made_by(folder)
    if made != fingerprint:
        n = 1
        while (aside := folder.with_name(f"{folder.name}.other-code-{n}")).exists():
            n += 1
        folder.rename(aside)
        log(f"warm start {folder.name} was cached by other code ({made or 'not recorded'}): "
            f"moved to {aside.name}; this code trains its own")


def scratch_dir(results_dir: str, fingerprint: str) -> Path:
    return Path(results_dir) / "checks" / "recheck" / fingerprint


def planned_checks(plan: Plan) -> list[tuple[Job, int]]:
    """What --recheck would rerun: each cell with stale seeds, its lowest."""
    return [(j, min(s for s in j.stale if s in j.stored)) for j in plan.jobs
            if not j.blocked and any(s in j.stored for s in j.stale)]


def recheck(plan: Plan, results_dir: str, log=print) -> list[Outcome]:
    """Check every cell of the plan with stale seeds (one seed each; a cell already re-stamped
    by an earlier spec's check is current and skipped)."""
    from harness import provenance
    from harness.backend import worker_resources
    from harness.config import RunConfig
    from harness.launch import pending_seeds, run_seeds
    from harness.preflight import raise_if, problems
    from harness.results import atomic_write_json
    from harness.run import of_config
    from harness.seedrun import SeedRun

    here = provenance.current()
    scratch = scratch_dir(results_dir, here["fingerprint"])
    outcomes = []
    for job, seed in planned_checks(plan):
        stale = [s for s in job.stale if s in job.stored]
        stored_path = job.seed_run(seed).result
        stored = plan.result(job, seed)
        made_by = provenance.of_result(stored)
        # the stored seed's own settings (with --also-evaluate and eval_every as it ran)
        made = RunConfig.from_dict(stored["config"])
        threads = worker_resources(made)["CPU"]  # what the rerun's workers would compute with
        skip = machine_problem(stored, here["machine"], threads)
        if skip:
            outcomes.append(Outcome(job, seed, skipped=skip))
            continue
        config = replace(made, seed=seed, results_dir=str(scratch),
                         checkpoint_dir=str(scratch / "checkpoints"))
        rerun_path = SeedRun.of(replace(job.config, seed=seed, results_dir=str(scratch))).result
        run = of_config(config, [seed])
        if pending_seeds(run):
            run = replace(run, force=True)
            raise_if(problems(run))
            set_aside_other_warm_start(run, here["fingerprint"], log)
            log(f"recheck {job.task} {job.row.label} seed {seed}: rerunning it on this code "
                f"into {scratch}")
            run_seeds(run, [seed], force=True)
        differences, compared = compare(stored_path, rerun_path)
        old = made_by["fingerprint"]
        same = [s for s in stale if provenance.of_result(plan.result(job, s))["fingerprint"]
                == old and not machine_problem(plan.result(job, s), here["machine"], threads)]
        record = rerun_path.with_suffix(RECORD_SUFFIX)
        body = {"checked": {"stored": stored_path.as_posix(), "rerun": rerun_path.as_posix(),
                            "seed": seed},
                "from": {"fingerprint": old, "commit": made_by["commit"]},
                "to": {"fingerprint": here["fingerprint"], "commit": here["commit"],
                       "dirty": here["dirty"]},
                # an inferred record knows only bf16 kernels or not: the two runs may still
                # have used different kernels (AMX or not), which a difference can come from
                "machine": here["machine"],
                "stored_machine": made_by.get("machine"),
                "date": time.strftime("%Y-%m-%d %H:%M:%S"),
                "compared": compared, "identical": not differences,
                "differences": differences,
                "restamped": [] if differences else [job.seed_run(s).result.as_posix()
                                                     for s in same]}
        atomic_write_json(record, body)
        out = Outcome(job, seed, record, differences)
        if not differences and not here["dirty"]:
            for s in same:
                restamp(job.seed_run(s).result, here, record, seed)
            out.restamped = same
        elif not differences:
            out.skipped = "this tree has uncommitted changes: nothing is re-stamped from it"
        outcomes.append(out)
    return outcomes


def summary(outcomes: list[Outcome]) -> str:
    lines = []
    for o in outcomes:
        what = f"  {o.job.task:<12} {o.job.row.label:<14} seed {o.seed}: "
        if o.skipped and o.record is None:
            lines.append(what + f"not checked: {o.skipped}")
        elif o.differences:
            shown = o.differences[:SHOWN]
            more = len(o.differences) - len(shown)
            lines.append(what + f"differs ({len(o.differences)}; record {o.record}):")
            lines += [f"    {d}" for d in shown] + ([f"    ... {more} more"] if more else [])
        elif o.skipped:
            lines.append(what + f"identical, not re-stamped: {o.skipped}")
        else:
            lines.append(what + f"identical: seeds {o.restamped} re-stamped (record {o.record})")
    return "\n".join(lines) or "  nothing to recheck: no stored seed of other code"


def dry_run(plan: Plan, results_dir: str) -> str:
    """What --recheck would do, and its estimated time (one seed per cell)."""
    from harness import provenance
    from harness.backend import worker_resources
    from harness.config import RunConfig
    from lab.reports.plan import estimate_run, stored_costs

    here = provenance.machine()
    costs = stored_costs(results_dir)
    lines, total, cells = [], 0.0, 0
    for job, seed in planned_checks(plan):
        stored = plan.result(job, seed)
        skip = machine_problem(stored, here, worker_resources(
            RunConfig.from_dict(stored["config"]))["CPU"])
        if skip:
            lines.append(f"  recheck {job.task:<12} {job.row.label:<14} not here: {skip}")
            continue
        one = estimate_run(job.seed_config(seed), costs,
                           folder=job.seed_run(seed).folder) or 0.0
        total, cells = total + one, cells + 1
        lines.append(f"  recheck {job.task:<12} {job.row.label:<14} seed {seed} "
                     f"(about {one / 60:.0f} min)")
    head = f"  {cells} cell(s) to recheck, about " \
           f"{total / 60:.0f} min (trainings shared between benchmarks run once)"
    return "\n".join(lines + [head]) if lines else "  nothing to recheck"
