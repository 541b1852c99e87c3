"""Tables of stored results with mean ± sample std over seeds."""
from __future__ import annotations

import math
from typing import Sequence


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample (Bessel-corrected) standard deviation; std is NaN for one value."""
    n = len(values)
    if n == 0:
        raise ValueError("no values")
    mean = sum(values) / n
    if n == 1:
        return mean, float("nan")
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(var)


def cell(values: Sequence[float], digits: int = 2) -> str:
    mean, std = mean_std(values)
    if math.isnan(std):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def render(rows: list[tuple[str, dict[str, list[float]]]], columns: Sequence[str],
           title: str = "") -> str:
    """A plain-text table: one row per (label, {column: values over seeds}); n = seeds."""
    header = ["", *columns, "n"]
    body = []
    for label, data in rows:
        n = max((len(v) for v in data.values()), default=0)
        body.append([label, *[cell(data[c]) if data.get(c) else "-" for c in columns], str(n)])
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    fmt = lambda r: "  ".join(x.ljust(w) if i == 0 else x.rjust(w) for i, (x, w) in
                              enumerate(zip(r, widths)))
    lines = ([title] if title else []) + [fmt(header), "  ".join("-" * w for w in widths)]
    lines += [fmt(r) for r in body]
    return "\n".join(lines)
