"""Review tools for trained runs and sweeps (``scripts/visualize.py``, ``scripts/compare.py``).

- :mod:`~attention_lab.review.cli`: argparse with one-line errors, the ``--out`` check.
- :mod:`~attention_lab.review.attention_maps`: the attention of one sentence, layer by layer and head by head.
- :mod:`~attention_lab.review.maps`: a run's checkpoint (loaded as data, ``weights_only``) and config -> maps.
- :mod:`~attention_lab.review.grid`: the layers x heads heatmap grid as a PNG.
- :mod:`~attention_lab.review.html_view`: a self-contained, bertviz-style interactive head view; its drawing
  code, ``static/head_view.js``, is also the head view of TensorBoard's attention tab.
- :mod:`~attention_lab.review.visualize`: what ``scripts/visualize.py`` does (PNG, HTML, TensorBoard).
- :mod:`~attention_lab.review.records`: a sweep's JSON and YAML records, read with the types the review needs.
- :mod:`~attention_lab.review.sweep`: one record per sweep job, from the files the project writes.
- :mod:`~attention_lab.review.escape`: text from the records made safe for CSV, Markdown and rich.
- :mod:`~attention_lab.review.compare`: those records as a rich table, CSV, Markdown and a bar chart.

This package's ``__init__`` and ``cli`` stay light (no torch), so ``--help`` and argument errors are fast.
"""
