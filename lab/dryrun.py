"""``run --dry-run`` / ``sft --dry-run``: what a command would do, without doing it.

The resolved run (``harness.run.Run``, the object the command would act on): its settings
(the ones that differ from the preset first), the training set and where it is read from, the
seeds with the files they would write and whether each is stored, the verdict of the one check
(``harness.preflight.problems``: the run acts on the same), and a time estimate from stored
seeds. Nothing starts and nothing is written.
"""
from __future__ import annotations

from dataclasses import fields

from harness import config as cfg


def settings_lines(config: cfg.RunConfig, reference: cfg.RunConfig) -> list[str]:
    """Every resolved field by section (of the method's options, its own); fields that differ
    from the preset's (``reference``, ``Run.reference``) are marked *."""
    from harness.results import preset_value

    out = []
    by_section: dict[str, list[str]] = {}
    for name, (section, _) in cfg.all_fields().items():  # a plugin's options too
        if section and cfg.field_value(config, section, name) is not cfg.ABSENT:
            by_section.setdefault(section, []).append(name)
    for section in cfg.SECTION_TYPES:
        items = []
        for name in by_section.get(section, []):
            value = cfg.field_value(config, section, name)
            mark = "*" if value != preset_value(reference, section, name) else " "
            items.append(f"  {mark} {name:<28} {value!r}")
        out += [f"{section}:", *items]
    top = [f for f in fields(config) if f.name not in cfg.SECTION_TYPES and f.name != "seed"]
    out += ["run:", *(f"  {'*' if getattr(config, f.name) != getattr(reference, f.name) else ' '}"
                      f" {f.name:<28} {getattr(config, f.name)!r}" for f in top)]
    return out


def dry_run(run, print=print) -> int:
    """Print what the command would do with this resolved ``run``; 0 when the check passes,
    else 2 (as the command itself would exit)."""
    from harness.preflight import problems as check

    problems = check(run)
    config, seeds, force = run.config, list(run.seeds), run.force
    warm_start_only = run.purpose == "sft"
    m, t = config.method.method, config.task.task
    print(f"{run.purpose}: method {m}, task {t}, model "
          f"{config.model.model}, preset {config.preset}")
    print(run.training_line)
    if run.untrained_note:
        print(run.untrained_note)
    limit, names = config.task.eval_limit, [c.task.task for c in run.benchmarks]
    print(f"evaluation: {', '.join(names)}, "
          + (f"a {limit}-item subset (seed {config.task.eval_seed})" if limit else "every item")
          + (" of each, after one training" if len(names) > 1 else ""))
    if warm_start_only and not problems:
        print(f"warm start folder: {run.warm_start_folder}")
    elif warm_start_only:
        print("warm start folder: named by its data, which the check refuses (below)")
    elif run.train_problem:
        print("seeds: their folder names the training set, which cannot be read (below)")
    else:
        print("seeds:")
        todo_set: set[int] = set()
        for each in run.files:  # one result per benchmark (--also-evaluate)
            for seed_run in each:
                stored = seed_run.result.is_file() and not force
                state = "stored (skipped; --force reruns it)" if stored else "to run"
                print(f"  seed {seed_run.config.seed}: {seed_run.result}  [{state}]")
                todo_set |= set() if stored else {seed_run.config.seed}
        print(f"checkpoints while training: under {config.checkpoint_dir}")
        todo = [s for s in seeds if s in todo_set]
        if todo:
            from lab.reports.plan import estimate_run, stored_costs

            one = estimate_run(config, stored_costs(config.results_dir),
                               folder=run.seed_runs()[0].folder)
            print("estimate: " + (f"about {one / 60:.0f} min per seed, {len(todo)} to run, "
                                  f"from stored seeds under {config.results_dir}" if one
                                  else f"nothing stored under {config.results_dir} to "
                                       "estimate from"))
    lines = settings_lines(config, run.reference)
    changed = [line.split()[1] for line in lines if line.startswith("  *")]
    print(f"differs from preset {config.preset}: {', '.join(changed) or 'nothing'}")
    print("settings (* = differs from the preset):")
    for line in lines:
        print("  " + line)
    if run.engine.plan is not None:  # the engine's own plan (vLLM on GPUs: per-GPU memory)
        for line in run.engine.plan(config):
            print(line)
    if problems:
        print(f"checks: {len(problems)} problem(s); the run would stop before Ray:")
        for p in problems:
            print(f"  - {p}")
        return 2
    print("checks: passed (settings, options, output folders, model, training set, benchmark "
          "and stored seeds)")
    return 0
