"""``python -m harness explain``: one response's per-token credit, as HTML and PNG.

Samples G responses to one training prompt with the run's model, scores them, runs the run's
method's extra passes (MRTPO: its replays) and shows, for one response, the per-token
advantage under the method and under the method it reduces to (its registry entry's
``reference``; MRTPO: GDPO) and each pass's per-token output (MRTPO: each reward's replay
distance): the paper's Figures 1-3, 7, 8. The run's config chooses model, task, method and
settings; trained weights are not stored, so the model is the
run's starting model (its warm-started folder when the run had a warm start) unless
``--model`` names another (e.g. a saved checkpoint folder).
"""
from __future__ import annotations

import html
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import torch

import methods
from harness.config import RunConfig
from harness.data import load_train
from harness.models import load_model, load_tokenizer
from harness.replay import PolicyContext
from harness.results import load_result
from harness.rollouts import HFRollout
from methods import RolloutBatch


# how many training prompts, from --example on, a --where search samples before it gives up
WHERE_SEARCH = 24


class Explained(NamedTuple):
    html: Path
    png: Path
    example: int  # the training prompt shown (``--where`` may move past ``--example``)
    response: int  # which of its G samples


def parse_where(text: str) -> dict[str, float]:
    """``format=1,execution=0`` -> {"format": 1.0, "execution": 0.0}."""
    out = {}
    for part in filter(None, (s.strip() for s in text.split(","))):
        name, sep, value = part.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep or not name.strip():
            raise ValueError(f"--where {text!r}: give reward=value pairs, e.g. format=1,execution=0")
    return out


def explain(run: Path, example: int, out_dir: Path, response: int = 0, model: str | None = None,
            group_size: int | None = None, seed: int = 0,
            where: dict[str, float] | None = None) -> Explained:
    """``where`` (reward -> value): show the first sampled response whose rewards have those
    values, from prompt ``example`` on (up to ``WHERE_SEARCH`` prompts), instead of
    ``response`` (e.g. the paper's Figure 3: a well-formed query that fails)."""
    config = RunConfig.from_dict(load_result(run)["config"])
    if model:
        config = replace(config, model=replace(config.model, model=model))
    from harness.run import of_config

    resolved = of_config(config)
    task, examples = resolved.task, load_train(resolved)
    if not 0 <= example < len(examples):
        raise ValueError(f"--example must be in [0, {len(examples)}), got {example}")
    g = group_size or config.rollout.group_size
    if not 0 <= response < g:
        raise ValueError(f"--response must be in [0, {g}), got {response}")
    names = [rw.name for rw in task.rewards]
    unknown = sorted(set(where or {}) - set(names))
    if unknown:  # before the model loads
        raise ValueError(f"--where names {unknown}, not rewards of {task.name} ({', '.join(names)})")
    if model:
        source = model
    else:  # the run's starting model: its warm-started folder when the run had one
        from harness.warmstart.cache import policy_source

        source = policy_source(resolved)
    tok = load_tokenizer(source, config.model.allow_download)
    policy = load_model(source, seed=config.seed, allow_download=config.model.allow_download,
                        dtype=config.model.dtype)
    r = config.rollout
    engine = HFRollout(policy, tok)
    first = example
    for example in range(first, min(len(examples), first + (WHERE_SEARCH if where else 1))):
        ex = examples[example]
        ro = engine.generate([ex], g, r.max_response_tokens, r.temperature, r.top_p, r.top_k,
                             seed=seed)
        rewards = torch.tensor(task.compute_rewards([ex] * len(ro.texts), ro.texts))
        if not where:
            break
        match = [n for n in range(g) if all(float(rewards[n, names.index(k)]) == v
                                            for k, v in where.items())]
        if match:
            response = match[0]
            break
    else:
        raise ValueError(f"no sampled response to training prompts {first}-{example} has rewards "
                         f"{where}; try another --example or --seed")
    method = methods.get(config.method.method)
    if method.reference is None:
        raise ValueError(f"method {method.name!r} declares no reference method (the one it "
                         "reduces to); explain compares the two")
    opts = config.method.options
    # the policy is the run's starting model, so it is also the "initial" one passes may read
    ctx = PolicyContext({"policy": policy, "initial": policy}, tok, [ex] * g, ro.texts, ro.response_ids,
                        ro.response_mask, rewards, tuple(names),
                        torch.zeros(g, dtype=torch.long),
                        tuple((rw.lo, rw.hi) for rw in task.rewards), r.temperature, g,
                        task.spans)
    passes = {p.name: p.run(ctx, opts) for p in method.passes}
    batch = RolloutBatch(rewards=rewards, reward_names=tuple(names),
                         reward_bounds=tuple((rw.lo, rw.hi) for rw in task.rewards),
                         group=torch.zeros(g, dtype=torch.long), response_mask=ro.response_mask,
                         passes=passes)
    rows = {name.upper(): methods.compute(name, batch, opts).scores[response]
            for name in (method.reference, method.name)}
    advantage_rows = set(rows)
    for pass_name, out in passes.items():
        labels = names if out.shape[1] == len(names) else range(out.shape[1])
        for k, label in enumerate(labels):
            if labels is names and rewards[response, k].isnan():
                continue  # a constraint slot this prompt does not have: nothing to replay
            rows[f"{pass_name}[{label}]"] = out[response, k]
    length = int(ro.response_mask[response].sum())
    ids = ro.response_ids[response, :length].tolist()
    tokens = tok.batch_decode([[i] for i in ids])
    info = {name: float(rewards[response, k]) for k, name in enumerate(names)}
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"explain-{task.name}-ex{example}-r{response}"
    html_path = out_dir / f"{stem}.html"
    png_path = out_dir / f"{stem}.png"
    html_path.write_text(render_html(tokens, {k: v[:length] for k, v in rows.items()}, info,
                                     ex.id))
    render_png(tokens, {k: v[:length] for k, v in rows.items()}, png_path, advantage_rows)
    return Explained(html_path, png_path, example, response)


def _colour(value: float, scale: float) -> str:
    """A diverging scale centred on 0: blue for positive, red for negative, white for 0 (the
    PNG's RdBu)."""
    x = max(-1.0, min(1.0, value / scale)) if scale > 0 else 0.0
    if x >= 0:
        return f"rgb({int(255 * (1 - 0.85 * x))},{int(255 * (1 - 0.55 * x))},255)"
    return f"rgb(255,{int(255 * (1 + 0.75 * x))},{int(255 * (1 + 0.75 * x))})"


LEGEND_HTML = ("<p>Colour: each row on its own scale, centred on 0: "
               "<span style='background:rgb(255,64,64)'>&nbsp;negative&nbsp;</span> "
               "<span style='background:white;border:1px solid #ccc'>&nbsp;0&nbsp;</span> "
               "<span style='background:rgb(38,115,255)'>&nbsp;positive&nbsp;</span> "
               "(distances are never negative); the value of a token is on hover.</p>")


def render_html(tokens: list[str], rows: dict[str, torch.Tensor], rewards: dict,
                example_id: str) -> str:
    """A self-contained page: one line of coloured tokens per row, values on hover."""
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>token credit</title>",
        "<style>body{font-family:sans-serif;margin:2em}.row{margin:1em 0}"
        ".tok{font-family:monospace;white-space:pre-wrap;padding:1px 0}"
        "h3{margin:.2em 0;font-size:1em}</style></head><body>",
        f"<h2>Example {html.escape(example_id)}</h2>",
        "<p>rewards: " + ", ".join(f"{html.escape(k)} = {v:g}" for k, v in rewards.items())
        + "</p>", LEGEND_HTML,
    ]
    for name, values in rows.items():
        scale = float(values.abs().max()) or 1.0
        parts.append(f"<div class='row'><h3>{html.escape(name)} (max |value| {scale:.3g})</h3>")
        for t, v in zip(tokens, values.tolist()):
            parts.append(f"<span class='tok' style='background:{_colour(v, scale)}' "
                         f"title='{v:.4f}'>{html.escape(t)}</span>")
        parts.append("</div>")
    parts.append("</body></html>")
    return "".join(parts)


def render_png(tokens: list[str], rows: dict[str, torch.Tensor], path: Path,
               advantages: set[str] = frozenset()) -> None:
    """One strip per row, each token's text written in its cell: ``advantages`` rows on one
    diverging scale centred on 0 (RdBu: red negative, white 0, blue positive), the others
    (distances, never negative) white (0) to dark, each on its own; every strip with its colour
    bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import TwoSlopeNorm

    t = len(tokens)
    fig, axes = plt.subplots(len(rows), 1, figsize=(max(7, 0.32 * t + 2), 1.5 * len(rows) + 0.4),
                             squeeze=False)
    # the advantage rows share one scale, so that the method and its reference compare
    shared = max((float(v.abs().max()) for n, v in rows.items() if n in advantages),
                 default=0.0) or 1.0
    for ax, (name, values) in zip(axes[:, 0], rows.items()):
        v = values.float().numpy()[None, :]
        signed = name in advantages
        scale = shared if signed else (float(abs(v).max()) or 1.0)
        cmap = plt.get_cmap("RdBu" if signed else "Purples")
        norm = (TwoSlopeNorm(vmin=-scale, vcenter=0.0, vmax=scale) if signed
                else plt.Normalize(vmin=0.0, vmax=scale))
        im = ax.imshow(v, aspect="auto", cmap=cmap, norm=norm)
        for j, tok in enumerate(tokens):  # the token itself, readable on its colour
            shade = abs(float(norm(v[0, j])) - (0.5 if signed else 0.0)) * (2 if signed else 1)
            ax.text(j, 0, repr(tok)[1:-1], rotation=90, ha="center", va="center", fontsize=7,
                    family="monospace", color="white" if shade > 0.6 else "black")
        ax.set_yticks([0], [name])
        ax.set_xticks([])
        bar = fig.colorbar(im, ax=ax, fraction=0.015, pad=0.01)
        bar.ax.tick_params(labelsize=6)
        bar.set_label("advantage" if signed else "distance", fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
