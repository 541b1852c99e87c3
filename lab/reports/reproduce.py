"""``python -m harness reproduce NAME`` (``./reproduce.sh NAME``): run what a table or figure
still lacks, then render it.

For each spec: the plan (every run it reads: stored, missing, or impossible here and why);
with ``--dry-run`` that and the estimated wall time from stored step times, nothing else;
with ``--render-only`` the table or figure of what is stored; otherwise the missing seeds run (the paper setting refuses to start while any model or data
set is missing, naming each), and the table goes to ``results/tables/NAME.{md,csv,tex}`` and
the figure to ``results/figures/NAME.{png,pdf}`` plus a Markdown summary.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lab.reports import figures, render, spec as specs, tables
from lab.reports.plan import Plan, estimate_seconds, make_plan

SMOKE_NOTE = ("SMOKE numbers: the embedded SmolLM2-135M-Instruct trained on this CPU for a few "
              "steps on small offline sets and evaluated on small subsets. They show the "
              "pipeline and the methods moving; they are not the paper's setting or numbers.")


def describe(plan: Plan, results_dir: str) -> str:
    lines = [f"{plan.spec.name} ({plan.setting.name}): {plan.spec.title}"]
    said: set[tuple[str, str]] = set()
    for j in plan.jobs:
        if j.blocked and j.missing:
            if (j.task, j.blocked) not in said:  # one line per task and reason, not per row
                said.add((j.task, j.blocked))
                lines.append(f"  {j.task:<12} {'(every row)':<14} {j.model_label:<26} "
                             f"{j.config.preset:<16} cannot run here: {j.blocked}")
            continue
        state = f"stored seeds {list(j.stored)}" + (f", to run {list(j.missing)}"
                                                     if j.missing else "")
        stale = [s for s in j.stale if s in j.stored]
        if stale:  # made by other code; --rerun-stale moves them to "to run"
            state += f", stale (other code) {stale}"
        lines.append(f"  {j.task:<12} {j.row.label:<14} {j.model_label:<26} "
                     f"{j.config.preset:<16} {state}")
    todo = plan.to_run()
    seconds, unknown = estimate_seconds(plan, results_dir)
    est = f"about {seconds / 60:.0f} min" if seconds else "nothing stored to estimate from"
    if unknown and seconds:
        est += f" (+ {unknown} run(s) with nothing stored to estimate from)"
    trainings = sum(len(seeds) for _, seeds, _ in plan.trainings())
    shared = f" in {trainings} training(s)" if todo and trainings < len(todo) else ""
    lines.append(f"  {len(todo)} run(s) to do{shared}" + (f", {est}" if todo else ""))
    return "\n".join(lines)


def code_versions(plan: Plan) -> str:
    """A line on the code versions behind the stored seeds this table or figure reads ('' when
    none is stored): one, or how many and which commits (rows of different versions are not
    comparable as the same code)."""
    from harness import provenance

    seen: dict[str, set[str]] = {}
    for job in plan.jobs:
        for s in job.stored:
            p = provenance.of_result(plan.result(job, s))
            seen.setdefault(p["fingerprint"], set()).add(p["commit"][:8] + ("-dirty" if
                                                                             p["dirty"] else ""))
    if not seen:
        return ""
    commits = ", ".join(sorted({c for cs in seen.values() for c in cs}))
    if len(seen) == 1:
        return f"Code: one version (commit {commits}, fingerprint {next(iter(seen))[:24]})."
    return (f"Code: {len(seen)} versions made these seeds (commits {commits}); rows and cells of "
            "different versions are not the same code (`reproduce --rerun-stale` remakes the "
            "seeds of other versions than this tree's).")


def machine_kinds(plan: Plan) -> str:
    """A line on the kinds of machine that made the stored seeds this table or figure reads
    ('' when none is stored): one kind, none recorded, or which rows each kind made (the same
    code and seed sample differently on two kinds)."""
    by_kind: dict[str, list[str]] = {}
    for job in plan.jobs:
        kinds = plan.machines(job)
        for kind in dict.fromkeys(k for _, k in kinds):
            seeds = [s for s, k in kinds if k == kind]
            where = f"{job.row.label} ({job.task}" + (f", {job.model_label}" if len(
                {j.model_label for j in plan.jobs}) > 1 else "") + ")"
            if len(seeds) < len(kinds):
                where += f" seed{'s' * (len(seeds) > 1)} {', '.join(map(str, seeds))}"
            by_kind.setdefault(kind or "not recorded", []).append(where)
    if not by_kind:
        return ""
    if len(by_kind) == 1:
        kind = next(iter(by_kind))
        if kind == "not recorded":
            return "Machine: not recorded (these seeds were stored before machines were recorded)."
        return f"Machine: one kind made every seed ({kind})."
    return (f"Machine: {len(by_kind)} kinds made these seeds; the same code and seed sample "
            "differently on two kinds, so a cell or comparison that spans them (marked †) "
            "differs by machine as well as by method:\n" + "\n".join(
                f"- {kind}: {'; '.join(rows)}" for kind, rows in by_kind.items()))


def execute(plan: Plan) -> None:
    """Every run to do passes the preflight before the first one starts (a problem of the last
    cell must not wait for hours of the first), then each runs."""
    from harness.launch import run_seeds
    from harness.preflight import PreflightError, problems as check, raise_if
    from harness.run import of_config

    todo = []  # cells that differ only in the benchmark train once
    problems: list[str] = []
    for config, seeds, jobs in plan.trainings():
        try:  # the cell's run, resolved and checked as `harness run` would (its seeds are
            # the plan's to make: missing, or stale with --rerun-stale)
            run = of_config(config, seeds, force=True)
            found = check(run)
            todo.append((run, len(jobs)))
        except PreflightError as exc:
            found = exc.problems
        problems += [p for p in found if p not in problems]
    raise_if(problems)
    for run, cells in todo:
        # every benchmark of the group misses these seeds (absent, or stale with
        # --rerun-stale): each is made anew
        run_seeds(run, list(run.seeds), force=cells > 1)


def not_run_cells(text: str) -> int:
    return text.count("not run")


def guard_render(path: Path, new_text: str, force: bool) -> None:
    """A render of what is stored must not replace a committed one that shows more (a mistyped
    --results-dir renders every cell as 'not run')."""
    if force or not path.is_file():
        return
    old, new = not_run_cells(path.read_text(encoding="utf-8")), not_run_cells(new_text)
    if new > old:
        raise ValueError(f"{path} shows {old} 'not run' cell(s), this render would show {new}: "
                         "it has fewer results (is --results-dir right?); --force replaces it, "
                         "--output-dir renders elsewhere")


def write_table(name: str, grids: list, out_dir: Path, header: str = "",
                guard: bool = False, force: bool = False) -> Path:
    """``guard``: refuse to replace a render that shows more results (see guard_render)."""
    from harness.results import atomic_write_text

    md = "\n".join(([header, ""] if header else []) + [render.markdown(g) for g in grids])
    if guard:
        guard_render(out_dir / f"{name}.md", md, force)
    atomic_write_text(out_dir / f"{name}.md", md)
    atomic_write_text(out_dir / f"{name}.csv", render.csv_rows(grids))
    atomic_write_text(out_dir / f"{name}.tex", "\n".join(render.latex(g) for g in grids))
    print(md)
    return out_dir / f"{name}.md"


def reproduce_one(name: str, args: argparse.Namespace) -> int:
    from harness.results import atomic_write_text

    from harness.preflight import folder_problem, raise_if

    spec = specs.get(name)
    tables_dir, figures_dir = Path(args.output_dir) / "tables", Path(args.output_dir) / "figures"
    # what a run would find first, found by its dry run too (a probe file, made and removed)
    raise_if([p for p in [folder_problem(args.results_dir, "--results-dir")] + [
        folder_problem(d, "--output-dir") for d in (tables_dir, figures_dir)] if p],
        "cannot write the runs or the renders")
    if spec.kind in ("methods", "presets") and args.dry_run:  # a dry run writes nothing
        print(f"{name}: needs no runs; would write {tables_dir / name}.{{md,csv,tex}}")
        return 0
    if spec.kind == "methods":
        print(f"wrote {write_table(name, [tables.methods_grid(spec)], tables_dir, spec.caption)}")
        return 0
    if spec.kind == "presets":
        print(f"wrote {write_table(name, [tables.presets_grid(spec)], tables_dir, spec.caption)}")
        return 0
    def planned(rerun_stale: bool = args.rerun_stale):
        return make_plan(spec, args.preset, args.seeds, args.results_dir, args.data_dir,
                         args.model_dir, args.allow_mixed_code, rerun_stale)

    if args.recheck:  # the check first: what it re-stamps is no longer to remake
        from lab.reports import recheck

        plan = planned(rerun_stale=False)
        print(describe(plan, args.results_dir))
        if args.dry_run:
            print(recheck.dry_run(plan, args.results_dir))
            return 0
        print(recheck.summary(recheck.recheck(plan, args.results_dir)))
    plan = planned()
    print(describe(plan, args.results_dir))
    if args.preset == "paper" and plan.blocked and not args.render_only:
        # the verdict the run acts on, said by its dry run alike
        print("the paper setting needs, before anything starts:")
        for what, why in plan.blocked.items():
            print(f"  {what}: {why}")
        return 2
    if args.dry_run:
        return 0
    if not args.render_only:
        execute(plan)
        plan = planned()  # now with the new seeds stored
    header = f"> {SMOKE_NOTE}" if args.preset == "smoke" else ""
    for line in (code_versions(plan), machine_kinds(plan)):
        if line:
            header += ("\n\n" if header else "") + line
    if plan.blocked:
        header += "\n\nCells that need data or models this machine lacks:\n" + "\n".join(
            f"- {what}: {why}" for what, why in plan.blocked.items())
    if spec.kind in ("benchmark", "localisation"):
        grids = (tables.benchmark_grids(plan, args.reference) if spec.kind == "benchmark"
                 else tables.localisation_grids(plan))
        written = write_table(name, grids, tables_dir, header, guard=args.render_only,
                              force=args.force)
        print(f"wrote {written}")
        return 0
    if args.render_only and not args.force and not any(j.stored for j in plan.jobs) and \
            (figures_dir / f"{name}.md").is_file():
        raise ValueError(f"no stored seed for {name} under --results-dir {args.results_dir}: "
                         f"rendering would replace {figures_dir / name}.* with empty figures; "
                         "--force replaces them, --output-dir renders elsewhere")
    make = {"curves": figures.curves, "diagnostics": figures.diagnostics,
            "explain": figures.explained}[spec.kind]
    files, summary = (make(plan, figures_dir, args.reference) if spec.kind == "curves"
                      else make(plan, figures_dir))
    md = figures_dir / f"{name}.md"
    atomic_write_text(md, (header + "\n\n" if header else "") + summary)
    print(summary)
    for f in [*files, md]:
        print(f"wrote {f}")
    return 0


def all_order(name: str, setting: str) -> tuple:
    """Where ``name`` goes in ``reproduce all``: first the specs whose runs evaluate during
    training (``eval_every``, not part of a run's identity: a table's seed of the same settings
    is the same run and is then stored with the figure's curves; the other way round the figure
    finds it stored without them), then tables, then figures, each in number order."""
    spec = specs.get(name)
    during = any(s.name == setting and dict(s.overrides).get("eval_every")
                 for s in spec.settings)
    return (not during, not name.startswith("table"), int("".join(filter(str.isdigit, name))))


def cmd_reproduce(args: argparse.Namespace) -> int:
    if args.dry_run and args.render_only:
        print("error: --dry-run and --render-only: choose one (a dry run lists the runs and "
              "renders nothing; --render-only renders what is stored)", file=sys.stderr)
        return 2
    names = specs.SPECS.names() if args.name == "all" else [args.name]
    if args.name == "all":
        names.sort(key=lambda n: all_order(n, args.preset))
    rc = 0
    for n in names:
        try:
            rc = max(rc, reproduce_one(n, args))
        except (ValueError, FileNotFoundError) as exc:
            if args.name != "all":
                raise
            print(f"{n}: {exc}")
            rc = 2
    return rc


def add_parser(sub) -> None:
    p = sub.add_parser("reproduce", help="run what a paper table or figure lacks, then render it "
                                         "(tables/ and figures/ under --output-dir)")
    p.add_argument("name", help="table1 ... table9, figure1 ... figure8, or all")
    p.add_argument("--preset", choices=specs.SETTINGS, default="smoke",
                   help="smoke: the embedded model on this machine; paper: the paper's models "
                        "and data (--model-dir, --data-dir)")
    from lab.flags import seed_count

    p.add_argument("--seeds", type=seed_count, default=None,
                   help="seeds per cell (default: the spec's)")
    p.add_argument("--data-dir", default=None, help="published data sets (Spider, BIRD, ...)")
    p.add_argument("--model-dir", default=None, help="a folder holding the paper's models, one "
                                                     "HF folder per name")
    p.add_argument("--results-dir", default="results", help="where runs are stored and read")
    p.add_argument("--output-dir", default="results", help="tables/ and figures/ go here")
    p.add_argument("--dry-run", action="store_true", help="list the runs, what is stored and "
                                                          "the estimated time; run nothing")
    p.add_argument("--render-only", action="store_true",
                   help="run nothing; render what is stored (missing cells read 'not run')")
    p.add_argument("--allow-mixed-code", action="store_true",
                   help="pool seeds made by different code (fingerprints) into one cell, "
                        "with a footnote naming the commits")
    p.add_argument("--reference", default=None,
                   help="the row every other is compared against (paired difference, 95 %% "
                        "intervals over seeds and over seeds and items, Holm-adjusted p, "
                        "the detectable difference); "
                        "default: the spec's, GDPO")
    p.add_argument("--force", action="store_true",
                   help="with --render-only: replace a render even when the new one shows "
                        "fewer results")
    p.add_argument("--rerun-stale", action="store_true",
                   help="rerun stored seeds made by other code than this tree's (with "
                        "--dry-run: list them)")
    p.add_argument("--recheck", action="store_true",
                   help="before running: per cell with seeds of other code, rerun its lowest "
                        "such seed on this code and, where the per-step metrics, final "
                        "parameters and evaluation are identical, re-stamp the cell's seeds "
                        "as this code's (lab/reports/recheck.py); with --rerun-stale, remake "
                        "the rest")
    p.set_defaults(handler=cmd_reproduce)
