"""The results committed under results/: every table and figure summary is what the committed
seeds render to with today's report code, and each names the code version its seeds share."""
import json
import math
import re
from pathlib import Path

import pytest

from lab import cli
from lab.reports import spec as specs

ROOT = Path(__file__).parents[1]
# what is rendered from stored seeds without running a model (explain figures run one)
FROM_SEEDS = [n for n in specs.SPECS.names()
              if specs.get(n).kind in ("benchmark", "localisation", "curves", "diagnostics")]
def render(name: str) -> Path:
    spec = specs.get(name)
    return (ROOT / "results" / ("tables" if spec.kind in ("benchmark", "localisation")
                                else "figures") / f"{name}.md")


@pytest.mark.parametrize("name", FROM_SEEDS)
def test_the_committed_render_is_what_the_committed_seeds_give(name, tmp_path):
    """Re-rendering from results/ gives the committed file byte for byte: no number in it is
    left from older seeds or older report code."""
    committed = render(name)
    assert cli.main(["reproduce", name, "--render-only", "--results-dir", str(ROOT / "results"),
                     "--output-dir", str(tmp_path)]) == 0
    fresh = (tmp_path / committed.parent.name / committed.name).read_text(encoding="utf-8")
    assert fresh == committed.read_text(encoding="utf-8"), (
        f"{committed.relative_to(ROOT)} is not what its seeds render to now: "
        f"./reproduce.sh {name} --render-only --force")


def test_every_render_names_one_code_version_and_all_the_same():
    """Every committed table and figure pools seeds of one code version, and all of them of the
    same one: a remake that leaves one behind, or a render that mixes versions, fails here."""
    versions = {}
    for path in [*(ROOT / "results" / "tables").glob("*.md"),
                 *(ROOT / "results" / "figures").glob("*.md")]:
        line = next((x for x in path.read_text(encoding="utf-8").splitlines()
                     if x.startswith("Code: ")), None)
        if line is not None:  # Tables 8 and 9 read no seeds
            versions[path.stem] = line
    assert len(versions) >= 15
    mixed = sorted(name for name, line in versions.items()
                   if not line.startswith("Code: one version"))
    assert not mixed, f"renders of several code versions: {mixed}"
    of = {name: re.search(r"fingerprint ([0-9a-f]{16})", line).group(1)
          for name, line in versions.items()}
    assert len(set(of.values())) == 1, f"renders of different code versions: {of}"


def test_every_render_says_which_machines_made_its_seeds():
    """Each table and figure that reads seeds names the kinds of machine that made them. Every
    committed seed was made on one kind of machine, so no render may say two kinds or mark a
    comparison across machines (a render that pooled kinds would say so and carry †)."""
    lines = {}
    for path in [*(ROOT / "results" / "tables").glob("*.md"),
                 *(ROOT / "results" / "figures").glob("*.md")]:
        text = path.read_text(encoding="utf-8")
        if "\nCode: " in text:
            lines[path.stem] = next(x for x in text.splitlines() if x.startswith("Machine: "))
            assert "made on different machines" not in text, path.name
    assert len(lines) >= 15
    assert len(set(lines.values())) == 1, lines
    assert all(x.startswith("Machine: one kind made every seed") for x in lines.values())


# The settings a run's first rollout depends on: the same policy (model, warm start), the same
# prompts (task, its data, the batch) sampled the same way (engine, sampling, seed) by the same
# code on the same kind of machine. Everything else (the method and its options, the learning
# rate, the steps) acts only after it, so seeds that share these must have drawn it alike.
FIRST_ROLLOUT = ("model", "rollout", "warmstart", "seed")
FIRST_ROLLOUT_TASK = ("task", "train_data", "data_dir")
FIRST_ROLLOUT_TRAINING = ("workers", "cpus_per_worker")


def _first_rollout_key(stored: dict) -> str:
    config = stored["config"]
    # .get: seeds stored under an older config layout group apart, not fail
    key = {name: config.get(name) for name in FIRST_ROLLOUT}
    key["task"] = {k: config.get("task", {}).get(k) for k in FIRST_ROLLOUT_TASK}
    key["training"] = {k: config.get("training", {}).get(k) for k in FIRST_ROLLOUT_TRAINING}
    provenance = stored.get("provenance", {})
    key["code"] = provenance.get("fingerprint", stored.get("git_commit"))
    key["machine"] = provenance.get("machine")
    return json.dumps(key, sort_keys=True, default=str)


def test_seeds_that_share_a_first_rollout_drew_it_alike():
    """Every committed seed's first training step (its sampled tokens' digest where the seed
    recorded one, its response length and mean rewards) is the same as that of every other
    seed with the same first-rollout settings: a seed made under conditions that changed its
    sampling, which a re-render cannot see, fails here. A training stored under several
    benchmarks (--also-evaluate: IFEval and IFBench) counts once."""
    groups: dict[str, dict[tuple, list[str]]] = {}
    trainings: set[str] = set()
    for path in sorted((ROOT / "results").glob("*/*/*/*/seed*.json")):
        if not path.name[4:-5].isdigit():
            continue  # seed<k>.recheck.json and other records
        train = path.with_name(path.stem + ".train.jsonl")
        lines = train.read_text(encoding="utf-8").splitlines() if train.exists() else []
        if not lines:
            continue  # evaluation-only seeds (a Base row) draw no rollout
        if train.read_text(encoding="utf-8") in trainings:
            continue  # the same training's log under another benchmark
        trainings.add(train.read_text(encoding="utf-8"))
        stored = json.loads(path.read_text(encoding="utf-8"))
        first = json.loads(lines[0])
        drawn = tuple(sorted((k, None if math.isnan(v) else round(v, 6))
                             for k, v in first.items()
                             if k in ("response_length", "rollout/token_digest")
                             or k.startswith("reward/")))
        group = groups.setdefault(_first_rollout_key(stored), {})
        group.setdefault(drawn, []).append(str(path.relative_to(ROOT)))
    shared = [g for g in groups.values() if sum(map(len, g.values())) > 1]
    assert len(shared) >= 9  # IFEval, IFBench, spider-mini, BFCL at 3 seeds each, at least
    split = [sorted(g.values()) for g in shared if len(g) > 1]
    assert not split, ("seeds with the same first-rollout settings drew different first "
                       f"rollouts: {split}")


def test_the_token_digest_reads_the_valid_tokens_in_order():
    import torch

    from harness.train.sample import token_digest

    ids = torch.tensor([[5, 6, 0], [7, 0, 0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    same = token_digest(torch.tensor([[5, 6, 9], [7, 3, 3]]), mask)  # other padding
    assert token_digest(ids, mask) == same and same < 2 ** 53 and same == int(same)
    assert token_digest(torch.tensor([[6, 5, 0], [7, 0, 0]]), mask) != same  # order counts
    assert token_digest(ids, torch.tensor([[1, 1, 1], [1, 0, 0]])) != same  # a token more
