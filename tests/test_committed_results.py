"""The results committed under results/: every table and figure summary is what the committed
seeds render to with today's report code, and each names the code version its seeds share."""
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
