"""The README stays a newcomer's page, and the documents' links lead somewhere."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens."""
    out = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def test_the_readme_is_a_short_page():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; move details to docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+://|mailto:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(target)
    assert not broken, f"{page.name}: links to nothing: {broken}"


# "2.14 [1.91, 2.60]", "+1.67 [−1.82, +5.16]", "8.33 ± 2.89": a mean with its interval or spread
QUOTED = re.compile(r"[+−-]?\d+(?:\.\d+)?x? \[[+−-]?\d+(?:\.\d+)?, [+−-]?\d+(?:\.\d+)?\]"
                    r"|\d+(?:\.\d+)? ± \d+(?:\.\d+)?")
# "detects ±7.1 points": a table's detectable difference, shown there as "±7.1, up to ±9.8
# (3 x 20)" (its upper bound beside it)
DETECTABLE = re.compile(r"±(\d+(?:\.\d+)?) points")
RENDERS = [*sorted((ROOT / "results").glob("tables/*.md")),
           *sorted((ROOT / "results").glob("figures/*.md")),
           *sorted((ROOT / "results").glob("bench/*.md"))]


def normalised(text: str) -> str:
    """One spelling of a number: ASCII minus, no bold, no 'x' of a ratio, '±' with one space."""
    text = text.replace("−", "-").replace("**", "")
    text = re.sub(r"(\d)x \[", r"\1 [", text)
    return re.sub(r"±\s*", "± ", text)


def prose(page: Path) -> str:
    """The page without its fenced blocks (commands and the verbatim output of early runs)."""
    return re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)


@pytest.mark.parametrize("page", [ROOT / "README.md", ROOT / "docs" / "results.md"],
                         ids=lambda p: p.name)
def test_every_quoted_interval_is_copied_from_a_committed_render(page):
    """A mean with its interval or spread quoted in the README or the results page is copied
    from a committed table, figure summary or bench report, so that a remade table whose
    numbers moved cannot leave an old claim behind."""
    renders = "\n".join(normalised(p.read_text(encoding="utf-8")) for p in RENDERS)
    text = prose(page)
    quoted = QUOTED.findall(text)
    assert quoted, f"{page.name}: no quoted interval found (the pattern is out of date?)"
    missing = [q for q in quoted if normalised(q).lstrip("+") not in renders]
    missing += [f"±{d} points" for d in DETECTABLE.findall(text)
                if normalised(f"±{d}, up to") not in renders]
    assert not missing, (f"{page.name} quotes numbers no committed render under results/ "
                         f"shows: {missing}")


# "1.47x", "4.11x their token share": a ratio a render shows as its number; one followed by
# "(22.1 against 9.4 s)" is derived from the two numbers quoted beside it
RATIO = re.compile(r"(?<![\w.])(\d+\.\d+)x\b(?:[^(\n]{0,60}\((\d+(?:\.\d+)?) against "
                   r"(\d+(?:\.\d+)?))?")
# "6 titles", "192 responses", "48 prompts": what a render counted ("n=6" there)
COUNT = re.compile(r"(?<![\d,.])(\d[\d,]*) (titles|responses|prompts)\b")
# "in 99 % of responses": a share a render gives as 0.99
SHARE = re.compile(r"\bin (\d+) % of (?:the )?responses")


# sections on runs made before reports were committed: their numbers are quoted with the
# command that made them, and no render holds them
HISTORICAL = re.compile(r"^### The first smoke runs.*?(?=^##? |\Z)", re.M | re.S)


def _shows(renders: str, number: str) -> bool:
    return re.search(r"(?<![\d.])" + re.escape(number) + r"(?![\d])", renders) is not None


@pytest.mark.parametrize("page", [ROOT / "README.md", ROOT / "docs" / "results.md"],
                         ids=lambda p: p.name)
def test_every_quoted_ratio_count_and_share_is_a_committed_renders(page):
    """Numbers quoted without an interval (a ratio, a count of titles, responses or prompts, a
    share of responses) are a committed render's too, or derived from two quoted numbers that
    are."""
    renders = "\n".join(normalised(p.read_text(encoding="utf-8")) for p in RENDERS)
    text = normalised(HISTORICAL.sub("", prose(page)))
    missing = []
    for ratio, a, b in RATIO.findall(text):
        if a and b:
            ok = _shows(renders, a) and _shows(renders, b) and \
                abs(float(a) / float(b) - float(ratio)) < 0.051
        else:
            ok = _shows(renders, ratio)
        if not ok:
            missing.append(f"{ratio}x" + (f" ({a} against {b})" if a else ""))
    for n, noun in COUNT.findall(text):
        n = n.replace(",", "")
        if not any(form in renders for form in (f"{n} {noun}", f"n={n})", f"n = {n})",
                                                f"{int(n):,} {noun}")):
            missing.append(f"{n} {noun}")
    for pct in SHARE.findall(text):
        if not _shows(renders, f"{int(pct) / 100:.2f}"):
            missing.append(f"in {pct} % of responses")
    assert not missing, (f"{page.name} quotes numbers no committed render under results/ "
                         f"shows: {missing}")

