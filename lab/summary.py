"""What `run` prints after its seeds: each reward's training mean at the first and last step,
a warning when no step trained anything, and the headline metrics as mean ± std over seeds
(pooled only when one code version made them, as `compare` pools)."""
from __future__ import annotations

from harness import config as cfg


def summary_table(config: cfg.RunConfig, runs: list, allow_mixed_code: bool = False) -> str:
    """The seeds' headline metrics as mean ± std (``runs``: their ``SeedRun``s), pooled only
    when one code version made them, as ``compare`` pools (``allow_mixed_code``: footnoted)."""
    from harness.results import load_result
    from lab.reports.aggregate import check_same_code
    from lab.reports.tables import render
    from tasks import TASKS

    task = TASKS.get(config.task.task)
    results = [load_result(run.result) for run in runs]
    footnote = check_same_code([run.result for run in runs], results, allow_mixed_code)
    columns = list(task.headline) or sorted(results[0]["metrics"])
    data = {c: [r["metrics"][c] for r in results if c in r["metrics"]] for c in columns}
    steps = [r["train"].get("time/step/mean") for r in results]
    data["s/step"] = [s for s in steps if s is not None]
    title = (f"{config.task.task} | model {config.model.model} | setting "
             f"{runs[0].folder.name} | mean ± sample std over seeds")
    table = render([(config.method.method, data)], [*columns, "s/step"], title)
    return table + (f"\n{footnote}" if footnote else "")


def training_rewards(runs: list) -> str:
    """Each reward's training mean at the first and the last step (mean over seeds), from the
    stored per-step logs of these ``SeedRun``s; empty when no seed has steps."""
    import math

    from harness.results import read_train_log

    logs = []
    for run in runs:
        rows = read_train_log(run.train_log) if run.train_log.is_file() else []
        if rows:
            logs.append((rows[0], rows[-1]))
    if not logs:
        return ""
    keys = [k for k in logs[0][0] if k.startswith("reward/")] + ["format_rate",
                                                                  "groups_with_signal"]

    def mean(values):
        values = [v for v in values if v is not None and not math.isnan(v)]
        return sum(values) / len(values) if values else float("nan")

    steps = sorted({int(last["step"]) for _, last in logs})
    out = [f"training rewards, step 1 -> step {'/'.join(map(str, steps))} "
           f"(mean over {len(logs)} seed{'s' * (len(logs) > 1)}):"]
    for k in keys:
        first, last = mean([a.get(k) for a, _ in logs]), mean([b.get(k) for _, b in logs])
        if math.isnan(first) and math.isnan(last):
            continue
        out.append(f"  {k.split('/')[-1]:<20} {first:7.2f} -> {last:7.2f}")
    return "\n".join(out)


def signal_note(config: cfg.RunConfig, runs: list) -> str:
    """A warning when the seeds' updates changed nothing at any step (every advantage 0 and no
    loss of the method's own): such a run compares nothing. '' when some step trained."""
    from harness.results import read_train_log
    from harness.train.store import trained_nothing

    rows = [row for run in runs if run.train_log.is_file()
            for row in read_train_log(run.train_log)]
    if not rows or not all(trained_nothing(r) for r in rows):
        return ""
    hint = ("the smoke-learn preset warm-starts the model so that it does"
            if not config.warmstart.warm_start else
            "more steps, a larger --group-size or a longer warm start (--warm-start-steps) give "
            "the rewards a chance to vary")
    return (f"no reward signal: nothing was trained (every reward was the same within each "
            f"group at all {len(rows)} steps, so every advantage was 0); {hint}")
