"""Reports: the paper's tables and figures regenerated from stored runs.

- ``spec.py`` + ``specs/*.toml``: each table and figure as data (rows, columns, presets per
  setting, the paper's own numbers);
- ``plan.py``: the runs a spec reads, which are stored, missing or impossible here, and the
  estimated time of the rest;
- ``aggregate.py``: mean, sample std and n per cell, the best per column, and the refusal to
  pool seeds made with different settings;
- ``tables.py`` / ``render.py``: grids from stored runs (or the method registry, or the
  presets) and their Markdown, CSV and LaTeX;
- ``figures.py``: training curves over seeds, steps to a threshold, replay-distance shares,
  ``explain`` figures;
- ``reproduce.py`` (``harness reproduce``, ``./reproduce.sh``) and ``compare.py``
  (``harness compare``).
"""
