"""Review tools for trained runs and sweeps (``scripts/visualize.py``, ``scripts/compare.py``): a run's
attention maps on any sentence (PNG grid, HTML head view), and a sweep's jobs side by side (tables, charts, which
heads matter). They read run and sweep dirs through :mod:`attention_lab.records` only.

This package's ``__init__`` and ``cli`` stay light (no torch), so ``--help`` and argument errors are fast.
"""
