"""Review tools for trained runs and sweeps (``scripts/visualize.py``, ``scripts/compare.py``).

- :mod:`attention_lab.review.maps`: load a run's checkpoint, run a sentence, draw the
  layers x heads heatmap grid, add the maps to the run's TensorBoard.
- :mod:`attention_lab.review.html_view`: a self-contained, bertviz-style interactive head view.
- :mod:`attention_lab.review.compare`: one row per sweep job (overrides, metrics, status), as a
  rich table, CSV, Markdown and a bar chart.
- :mod:`attention_lab.review.cli`: ``key=value`` argument parsing shared by both scripts.

This package's ``__init__`` and ``cli`` stay light (no torch), so ``--help`` and argument errors are fast.
"""
