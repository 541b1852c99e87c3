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
# renders whose seeds are not all of the newest fingerprint among the committed renders, and
# why; a remake that brings one up to it must drop it from here (the test checks the list is
# exact, so neither a newly stale render nor a remade one goes unnoticed)
BFCL_30 = ("Table 3 / Figure 4's BFCL seeds (preset smoke-learn-30) are of an older fingerprint: "
           "`./reproduce.sh figure4 --rerun-stale`, then table3, figure2, figure6 and figure7")
OLDER = {"table3": BFCL_30, "figure2": BFCL_30, "figure4": BFCL_30, "figure7": BFCL_30,
         "figure6": "reads those BFCL seeds beside Table 7's spider-mini seeds: " + BFCL_30}


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


def test_each_render_names_one_code_version_and_all_but_the_listed_the_same():
    versions = {}
    for path in [*(ROOT / "results" / "tables").glob("*.md"),
                 *(ROOT / "results" / "figures").glob("*.md")]:
        line = next((x for x in path.read_text(encoding="utf-8").splitlines()
                     if x.startswith("Code: ")), None)
        if line is not None:  # Tables 8 and 9 read no seeds
            versions[path.stem] = line
    assert len(versions) >= 15
    mixed = {name for name, line in versions.items() if not line.startswith("Code: one version")}
    assert mixed <= set(OLDER), f"renders of several code versions: {sorted(mixed - set(OLDER))}"
    of = {name: re.search(r"fingerprint ([0-9a-f]{16})", line).group(1)
          for name, line in versions.items() if name not in mixed}
    current = {f for name, f in of.items() if name not in OLDER}
    assert len(current) == 1, f"the renders not listed as older name {len(current)} fingerprints"
    older = {name for name, f in of.items() if f not in current} | mixed
    assert older == set(OLDER), (f"renders behind the newest fingerprint: {sorted(older)}; "
                                 f"listed: {sorted(OLDER)}")
