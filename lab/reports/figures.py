"""Figures from stored runs (matplotlib, PNG and PDF): training curves over seeds, benchmark
numbers at the steps where they were evaluated, steps to a reward threshold, and where the
replay distance falls."""
from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Sequence

from lab.reports.aggregate import mean_std
from lab.reports.plan import Job, Plan


def train_log(job: Job, seed: int) -> list[dict]:
    from harness.results import read_train_log

    path = job.seed_run(seed).train_log
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the per-step log of a stored seed is missing")
    return read_train_log(path)


def series(logs: Sequence[list[dict]], key: str) -> tuple[list[int], list[list[float]]]:
    """Steps present in every seed's log and, per step, the seeds' values of ``key``."""
    steps = sorted(set.intersection(*[{int(r["step"]) for r in log if key in r} for log in logs]))
    by = [{int(r["step"]): float(r[key]) for r in log if key in r} for log in logs]
    return steps, [[b[s] for b in by if not math.isnan(b[s])] for s in steps]


def quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default) of a non-empty list."""
    v = sorted(values)
    pos = q * (len(v) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def steps_to_threshold(log: list[dict], key: str, value: float, window: int = 1) -> int | None:
    """First step whose trailing mean over a full ``window`` of logged steps of ``key``
    reaches ``value``; None if no step does. The first ``window - 1`` steps have no full
    window and never count: a partial window at the start is a mean of fewer, noisier steps
    and would favour a run that starts high by chance."""
    from harness.train.stopping import first_reached

    rows = [(int(r["step"]), float(r[key])) for r in log if key in r]
    i = first_reached([v for _, v in rows], value, window)  # the rule --stop-when stops by
    return None if i is None else rows[i][0]


def _figure(n_panels: int):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(n_panels, 2)
    rows = math.ceil(n_panels / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 3.8 * rows), squeeze=False)
    return plt, fig, [a for row in axes for a in row]


def save(fig, out_dir: Path, name: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in ("png", "pdf"):
        p = out_dir / f"{name}.{ext}"
        tmp = p.with_name(f".{p.name}.tmp")
        fig.savefig(tmp, format=ext, dpi=130, bbox_inches="tight")
        tmp.replace(p)  # atomic: a reader never sees half a figure
        paths.append(p)
    return paths


def over_training(logs: Sequence[list[dict]], metric: str, final: Sequence[float],
                  last_step: int) -> tuple[list[int], list[list[float]]] | None:
    """A benchmark metric over training: the steps where every seed was evaluated during
    training (``eval/<metric>`` in its log rows, ``--eval-every``) and then ``last_step`` with
    the ``final`` evaluation's values; per step the seeds' values. None when the seeds were not
    evaluated during training."""
    steps, during = series(logs, f"eval/{metric}")
    if not steps or not final:
        return None
    return [*steps, last_step], [*during, list(final)]


def band_of(values: Sequence[float], band: str) -> tuple[float, float, float]:
    """The seeds' centre line and the band drawn around it, (mid, low, high): ``"iqr"`` the
    median and interquartile range, ``"range"`` the mean and the seeds' range (what a caption
    that says "bands span the seeds" promises: never past the values themselves, so never below
    0 % on an accuracy), ``"std"`` the mean ± sample std (0 for one seed)."""
    if band == "iqr":
        return statistics.median(values), quantile(values, 0.25), quantile(values, 0.75)
    mean, sd = mean_std(values)
    if band == "range":
        return mean, min(values), max(values)
    sd = 0.0 if math.isnan(sd) else sd
    return mean, mean - sd, mean + sd


SENSITIVITY_WINDOWS = (3, 5, 7)  # trailing-mean windows the steps-to-threshold order is read at
SENSITIVITY_OFFSETS = (-0.05, 0.0, 0.05)  # around the spec's threshold (0.75, 0.8, 0.85)


def threshold_steps(by_seed: dict[int, list[dict]], key: str, value: float, window: int
                    ) -> tuple[list[int | None], list[int]]:
    """Per seed: the step it reached the threshold (None: not within its run) and its last
    step (where a seed that did not is censored)."""
    logs = list(by_seed.values())
    return ([steps_to_threshold(log, key, value, window) for log in logs],
            [max(int(r["step"]) for r in log) for log in logs])


def threshold_tests(logs: dict[str, dict[int, list[dict]]], key: str, value: float,
                    window: int, reference: str) -> list[str]:
    """Per method against ``reference``: the log-rank test of their steps to the threshold
    (censored where not reached), as Markdown list items."""
    from lab.reports.survival import logrank_p, permutation_p

    ref = threshold_steps(logs[reference], key, value, window)
    out = []
    for method, by_seed in logs.items():
        if method != reference:
            mine = threshold_steps(by_seed, key, value, window)
            p = logrank_p(*mine, *ref)
            if math.isnan(p):
                out.append(f"- {method} against {reference}: log-rank p = –, neither reached it")
                continue
            exact, floor = permutation_p(*mine, *ref)
            text = (f"- {method} against {reference}: log-rank p = {p:.3f}; exact p = "
                    f"{exact:.3f} (smallest possible {floor:.3f})")
            shared = sorted(set(by_seed) & set(logs[reference]))
            if shared:  # the same seeds: paired by seed
                a = threshold_steps({s: by_seed[s] for s in shared}, key, value, window)
                b = threshold_steps({s: logs[reference][s] for s in shared}, key, value, window)
                pp, pfloor = permutation_p(*a, *b, paired=True)
                text += f"; paired by seed p = {pp:.3f} (smallest possible {pfloor:.3f})"
            out.append(text)
    return out


def sensitivity(logs: dict[str, dict[int, list[dict]]], key: str, value: float) -> list[str]:
    """A Markdown table: the Kaplan-Meier median steps to the threshold per method at each
    trailing window and threshold around the spec's, and the order of the methods it gives
    (one not reached: after every reached one)."""
    from lab.reports.survival import km_median

    methods = list(logs)
    rows = ["| window | threshold | " + " | ".join(methods) + " | order (fewest steps first) |",
            "|---|---|" + "---|" * (len(methods) + 1)]
    for window in SENSITIVITY_WINDOWS:
        for offset in SENSITIVITY_OFFSETS:
            thr = round(value + offset, 4)
            med = {m: km_median(*threshold_steps(by_seed, key, thr, window)).median
                   for m, by_seed in logs.items()}
            rank = {m: math.inf if v is None else v for m, v in med.items()}
            order = sorted(methods, key=lambda m: rank[m])
            text = " < ".join(order)
            for x, y in zip(order, order[1:]):
                if rank[x] == rank[y]:
                    text = text.replace(f"{x} < {y}", f"{x} = {y}")
            rows.append(f"| {window} | {thr:g} | " + " | ".join(
                "not reached" if med[m] is None else f"{med[m]:g}" for m in methods)
                + f" | {text} |")
    return rows


def curves(plan: Plan, out_dir: Path, reference: str | None = None) -> tuple[list[Path], str]:
    """Training curves (median and interquartile band over seeds, or the seeds' range with
    ``band = "range"``), benchmark numbers over training where the seeds were evaluated during
    it (``--eval-every``: mean over seeds, band = the seeds' range with ``band = "range"``,
    else sample std, the last point the final evaluation) or else after training (bars, error
    bars = sample std), and steps to the threshold as survival data (Kaplan-Meier medians, each
    method against ``reference``, the spec's GDPO, by the log-rank test:
    ``lab.reports.survival``), and the order's sensitivity to the window and threshold.
    Returns the files and a Markdown summary."""

    spec, setting = plan.spec, plan.setting
    band = spec.raw.get("band", "iqr")
    panels = list(spec.raw.get("curves", ())) + list(spec.raw.get("evaluated", ()))
    plt, fig, axes = _figure(len(panels))
    summary = [f"# {spec.name}: {spec.title}", "", spec.caption, ""]
    thr = spec.raw.get("threshold")
    logs_of: dict[str, dict[int, list[dict]]] = {}  # method -> seed -> per-step log
    mixed: list[str] = []  # footnotes of methods whose seeds are of several code versions
    # methods whose seeds hold no evaluations during training though the setting asks for them
    # (stored by a run without --eval-every): named in the summary, never silently left out
    no_curve: list[str] = []
    eval_every = dict(setting.overrides).get("eval_every", 0)
    jobs = [j for j in plan.jobs if j.stored and not j.row.base]
    # panel -> metric -> method -> (mean, std) of the evaluation after training
    evaluated: dict[int, dict[str, dict[str, tuple[float, float]]]] = {}
    # panel -> (label, steps, the seeds' values per step) from evaluations during training
    # (and the method's colour, the metric's line style: a method keeps its colour in every panel)
    during_curves: dict[int, list[tuple[str, list[int], list[list[float]], str, str]]] = {}
    for colour, job in enumerate(jobs):
        logs = [train_log(job, s) for s in job.stored]
        label = f"{job.row.label} (n={len(logs)})"
        for ax, panel in zip(axes, spec.raw.get("curves", ())):
            steps, vals = series(logs, panel["key"])
            mid, lo, hi = zip(*(band_of(v, band) for v in vals)) if vals else ((), (), ())
            ax.plot(steps, mid, label=label, color=f"C{colour}")
            ax.fill_between(steps, lo, hi, alpha=0.2, color=f"C{colour}")
            ax.set_title(panel["label"])
            ax.set_xlabel("training step")
        pooled, footnote = plan.stored_results(job)
        results = [r for _, r in pooled]
        if footnote:
            mixed.append(f"{job.row.label}: {footnote}")
        steps_run = max(int(r["step"]) for log in logs for r in log) if any(logs) else 0
        for p, panel in enumerate(spec.raw.get("evaluated", ())):
            for style, metric in zip(("-", "--", ":", "-."), panel["metrics"]):
                vals = [float(r["metrics"][metric]) for r in results if metric in r["metrics"]]
                if vals:
                    evaluated.setdefault(p, {}).setdefault(metric, {})[job.row.label] = \
                        mean_std(vals)
                curve = over_training(logs, metric, vals, steps_run)
                if curve:
                    during_curves.setdefault(p, []).append((f"{job.row.label} {metric}",
                                                            *curve, f"C{colour}", style))
                elif eval_every and vals and job.row.label not in no_curve:
                    no_curve.append(job.row.label)
        if thr:
            logs_of[job.row.label] = dict(zip(job.stored, logs))
    n_curves = len(spec.raw.get("curves", ()))
    for p, panel in enumerate(spec.raw.get("evaluated", ())):
        if p in during_curves:  # evaluated during training: mean over seeds and its band
            ax = axes[n_curves + p]
            for label, steps, values, colour, style in during_curves[p]:
                # the seeds' range where the spec asks for it; a median would hide the mean
                # the benchmark tables report, so otherwise mean ± std
                mean, lo, hi = zip(*(band_of(v, band if band == "range" else "std")
                                     for v in values))
                ax.plot(steps, mean, marker="o", markersize=3, label=label, color=colour,
                        linestyle=style)
                ax.fill_between(steps, lo, hi, alpha=0.15, color=colour)
            ax.set_title(panel["label"] + ", over training")
            ax.set_xlabel("training step")
            continue
        # evaluated once, after training: bars per method (error bars: sample std over seeds)
        ax, by_metric = axes[n_curves + p], evaluated.get(p, {})
        names = list(dict.fromkeys(m for v in by_metric.values() for m in v))
        width = 0.8 / max(1, len(by_metric))
        for i, (metric, by_method) in enumerate(by_metric.items()):
            stats = [by_method.get(m, (math.nan, math.nan)) for m in names]
            ax.bar([x + i * width for x in range(len(names))], [m for m, _ in stats], width,
                   yerr=[0 if math.isnan(sd) else sd for _, sd in stats], capsize=3,
                   label=metric)
        ax.set_xticks([x + width * (len(by_metric) - 1) / 2 for x in range(len(names))], names)
        ax.set_title(panel["label"] + ", after training")
    for ax in axes[:len(panels)]:
        if ax.has_data():
            ax.legend(fontsize=7)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(f"{spec.title} ({setting.name}: {', '.join(setting.models)})", fontsize=10)
    fig.tight_layout()
    files = save(fig, out_dir, spec.name)
    plt.close(fig)
    if thr:
        how = (f"trailing mean over {setting.smooth} steps" if setting.smooth > 1
               else "per-step value")
        from lab.reports import survival

        summary += [f"Median steps to a training {thr['key'].split('/')[-1]} reward of "
                    f"{thr['value']} ({how}; Kaplan-Meier, `N+`: a seed censored at its last "
                    "step N):", ""]
        paper = (spec.paper.get(f"steps to {thr['key'].split('/')[-1]} {thr['value']}") or {})
        for method, by_seed in logs_of.items():
            steps, last = threshold_steps(by_seed, thr["key"], thr["value"], setting.smooth)
            seeds = ", ".join(f"{e}+" if s is None else str(s) for s, e in zip(steps, last))
            ref = paper.get(method.lower())
            summary.append(f"- {method}: {survival.km_median(steps, last).text()}; per seed: "
                           f"{seeds}" + (f" (paper: {ref})" if ref is not None else ""))
        summary.append("")
        want = (reference or spec.reference).lower()
        ref_label = next((m for m in logs_of if m.lower() == want), None)
        if ref_label is not None and len(logs_of) > 1:
            summary += [*threshold_tests(logs_of, thr["key"], thr["value"], setting.smooth,
                                         ref_label), ""]
        summary += [survival.LEGEND, ""]
        if logs_of:
            summary += ["Sensitivity of the order to the trailing window and the threshold "
                        "(Kaplan-Meier median steps over seeds; `not reached`: not by half the seeds):", "",
                        *sensitivity(logs_of, thr["key"], thr["value"]), ""]
    if no_curve:
        summary += [f"Without evaluations during training (stored by runs without "
                    f"--eval-every; `harness run ... --eval-every {eval_every} --force` remakes "
                    f"them, the training unchanged): {', '.join(no_curve)}. Their benchmark "
                    "numbers over training are not drawn.", ""]
    if mixed:
        summary += ["Pooled across code versions (--allow-mixed-code):", "",
                    *[f"- {m}" for m in mixed], ""]
    missing = [j for j in plan.jobs if not j.stored]
    if missing:
        summary.append("Not shown (no stored seed): " + ", ".join(
            f"{j.row.label} on {j.task}" + (f" ({j.blocked})" if j.blocked else "")
            for j in missing))
        summary.append("")
    summary += [f"![{spec.name}]({files[0].name})", ""]
    return files, "\n".join(summary)


def diagnostics(plan: Plan, out_dir: Path) -> tuple[list[Path], str]:
    """Figure 6: per task, the share of each reward's replay distance on its top 1/5/10 %
    tokens (gray: uniform) and on each part of the response, mean over steps and seeds."""
    spec = plan.spec
    jobs = [j for j in plan.jobs if j.stored]
    plt, fig, axes = _figure(2 * max(1, len(jobs)))
    summary = [f"# {spec.name}: {spec.title}", "", spec.caption, ""]
    for i, job in enumerate(jobs):
        plan.stored_results(job)  # seeds of several code versions: refused unless allowed
        by_seed = {s: train_log(job, s) for s in job.stored}
        rows = [r for log in by_seed.values() for r in log]
        keys = sorted({k for r in rows for k in r if k.startswith("diag/")})
        means = {k: statistics.mean(float(r[k]) for r in rows if k in r) for k in keys}
        # a replayed reward always has its top-k shares (methods/mrtpo/diagnostics.py); a
        # span-only diagnostic (e.g. `execution:diff`, a span ratio) has nothing to draw
        rewards = sorted(k[len("diag/"):-len("/top1")] for k in keys if k.endswith("/top1"))
        top_ax, part_ax = axes[2 * i], axes[2 * i + 1]
        for j, reward in enumerate(rewards):
            tops = [means.get(f"diag/{reward}/top{p}", math.nan) for p in (1, 5, 10)]
            top_ax.bar([x + 0.8 * j / len(rewards) for x in range(3)], tops,
                       width=0.8 / len(rewards), label=reward)
            parts = sorted({k.split("/")[-1] for k in keys if k.startswith(f"diag/{reward}/part/")})
            part_ax.bar([x + 0.8 * j / len(rewards) for x in range(len(parts))],
                        [means[f"diag/{reward}/part/{p}"] for p in parts],
                        width=0.8 / len(rewards), label=reward)
            part_ax.set_xticks(range(len(parts)), parts)
            # a reward is replayed only at steps where some group has its signal, so say
            # how many steps (of how many seeds) its shares are the mean of
            had = {s: sum(f"diag/{reward}/top1" in r for r in log) for s, log in by_seed.items()}
            summary.append(f"- {job.task}, {reward}: top 1/5/10 % tokens hold "
                           + " / ".join(f"{t:.2f}" for t in tops) + " of the distance; parts "
                           + ", ".join(f"{p} {means[f'diag/{reward}/part/{p}']:.2f}"
                                       for p in parts)
                           + f" (mean of {sum(had.values())} steps of "
                           f"{sum(n > 0 for n in had.values())} of {len(had)} seeds)")
        top_ax.scatter(range(3), [0.01, 0.05, 0.10], color="gray", marker="_", s=400,
                       label="uniform (GDPO)", zorder=3)
        top_ax.set_xticks(range(3), ["top 1 %", "top 5 %", "top 10 %"])
        top_ax.set_title(f"{job.task}: share held by the top tokens")
        part_ax.set_title(f"{job.task}: share on each part of the response")
        for ax in (top_ax, part_ax):
            if ax.has_data():
                ax.legend(fontsize=7)
    if not jobs:
        raise FileNotFoundError(f"{spec.name}: no stored {spec.methods()} run to read "
                                "diagnostics from; run the spec without --dry-run first")
    files = save(fig, out_dir, spec.name)
    plt.close(fig)
    summary += ["", f"![{spec.name}]({files[0].name})", ""]
    return files, "\n".join(summary)


def explained(plan: Plan, out_dir: Path, model: str | None = None) -> tuple[list[Path], str]:
    """Figures 1-3, 7, 8: ``explain`` on the spec's stored run (its starting model, or
    ``model``)."""
    import os
    import shutil
    import tempfile

    from lab.explain import explain

    spec = plan.spec
    job = next((j for j in plan.jobs if j.stored), None)
    if job is None:
        raise FileNotFoundError(f"{spec.name}: no stored {spec.methods()} run on "
                                f"{spec.tasks(plan.setting.name)}; run it without --dry-run first")
    run = job.seed_run(job.stored[0]).result
    files = []
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:  # explain's own files: copied, then gone
        shown = explain(run, int(spec.raw.get("example", 0)), Path(scratch), model=model,
                        where=dict(spec.raw.get("where", {})) or None)
        for src, ext in ((shown.png, "png"), (shown.html, "html")):
            dst = out_dir / f"{spec.name}.{ext}"
            shutil.copyfile(src, dst)
            files.append(dst)
    path = os.path.relpath(run) if Path(run).is_relative_to(Path.cwd()) else run
    where = ",".join(f"{k}={v:g}" for k, v in spec.raw.get("where", {}).items())
    command = (f"explain --run {path} --example {spec.raw.get('example', 0)}"
               + (f" --where {where}` (prompt {shown.example}, response {shown.response})"
                  if where else "`"))
    return files, (f"# {spec.name}: {spec.title}\n\n{spec.caption}\n\nFrom `{command}."
                   f"\n\n![{spec.name}]({files[0].name})\n")
