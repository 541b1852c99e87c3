"""A table grid -> Markdown (terminal and ``results/tables/*.md``), CSV (one line per cell,
mean / std / n) and LaTeX (booktabs). The best mean per column is bold."""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from typing import Sequence

from lab.reports.aggregate import Cell, best_rows


@dataclass
class Grid:
    """One block of a table: the rows of one model (or of the paper's numbers)."""

    title: str
    row_header: str
    groups: list[str]  # column group per column ("" for none)
    columns: list[str]
    rows: list[tuple[str, list[Cell]]] = field(default_factory=list)
    mark_best: bool = True
    # per column, whether larger is better (the metric's declaration; None in the list: a
    # diagnostic column, no best marked); None: all of them
    higher: list[bool | None] | None = None
    legend: str = ""  # a line under the block saying how to read its cells
    # per column, whether its comparisons are outcome tests (Holm's family, the detectable
    # difference); None: every column with a direction (lab.reports.contrasts)
    outcome: list[bool] | None = None

    def best(self) -> list[set[int]]:
        if not self.mark_best:
            return [set() for _ in self.columns]
        higher = self.higher or [True] * len(self.columns)
        return [set() if higher[j] is None else
                best_rows([cells[j] for _, cells in self.rows], higher[j])
                for j in range(len(self.columns))]


def _headers(grid: Grid) -> list[str]:
    return [f"{g} {c}".strip() for g, c in zip(grid.groups, grid.columns)]


def markdown(grid: Grid) -> str:
    best = grid.best()
    lines = [f"**{grid.title}**", "", "| " + " | ".join([grid.row_header, *_headers(grid)]) + " |",
             "|" + "---|" * (len(grid.columns) + 1)]
    for i, (label, cells) in enumerate(grid.rows):
        texts = [f"**{c.text()}**" if i in best[j] else c.text() for j, c in enumerate(cells)]
        lines.append("| " + " | ".join([label, *texts]) + " |")
    notes = footnotes(grid)
    if notes:
        lines += [""] + [f"† {where}: {note}" for where, note in notes]
    if grid.legend:
        lines += ["", grid.legend]
    return "\n".join(lines) + "\n"


def footnotes(grid: Grid) -> list[tuple[str, str]]:
    """(where, footnote) for the cells that carry one: once per row when every cell of the row
    with values carries the same one, else per cell."""
    out = []
    for label, cells in grid.rows:
        noted = [(head, c.footnote) for head, c in zip(_headers(grid), cells)
                 if c.footnote and c.values]
        valued = [c for c in cells if c.values]
        if noted and len(noted) == len(valued) and len({n for _, n in noted}) == 1:
            out.append((f"{label} (every cell)", noted[0][1]))
        else:
            out += [(f"{label} / {head}", note) for head, note in noted]
    return out


def latex(grid: Grid) -> str:
    best = grid.best()

    def esc(s: str) -> str:
        return (s.replace("\\", r"\textbackslash{}").replace("&", r"\&").replace("%", r"\%")
                .replace("_", r"\_").replace("#", r"\#").replace("±", r"$\pm$")
                .replace("β", r"$\beta$").replace("−", r"$-$"))

    spans: list[tuple[str, int]] = []
    for g in grid.groups:
        if spans and spans[-1][0] == g:
            spans[-1] = (g, spans[-1][1] + 1)
        else:
            spans.append((g, 1))
    out = [f"% {grid.title}", r"\begin{tabular}{l" + "c" * len(grid.columns) + "}", r"\toprule"]
    if any(g for g in grid.groups):
        entries = [""]
        for g, n in spans:
            entries += [rf"\multicolumn{{{n}}}{{c}}{{{esc(g)}}}"] if g else [""] * n
        out.append(" & ".join(entries) + r" \\")
    out.append(" & ".join([esc(grid.row_header), *map(esc, grid.columns)]) + r" \\")
    out.append(r"\midrule")
    for i, (label, cells) in enumerate(grid.rows):
        texts = [rf"\textbf{{{esc(c.text())}}}" if i in best[j] else esc(c.text())
                 for j, c in enumerate(cells)]
        out.append(" & ".join([esc(label), *texts]) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}"]
    out += [f"% † {where}: {note}" for where, note in footnotes(grid)]
    if grid.legend:
        out.append(f"% {grid.legend}")
    return "\n".join(out) + "\n"


def csv_rows(grids: Sequence[Grid]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["block", "row", "column", "mean", "std", "n", "seeds", "note"])
    for grid in grids:
        for label, cells in grid.rows:
            for head, c in zip(_headers(grid), cells):
                fmt = lambda v: "" if math.isnan(v) else f"{v:.4f}"
                w.writerow([grid.title, label, head, fmt(c.mean), fmt(c.std), c.n,
                            " ".join(str(s) for s, _ in c.values), c.csv_note()])
    return buf.getvalue()
