"""What a head does, measured: the lab's measurement library. Head scores and the tags they are logged under,
ablation, activation patching, weight-based circuits (composition, copying), the loss by target index, the
prefix-matching probe, the rule that decides when induction heads formed, and what each layer keeps per token.

Functions of a model and a batch, through the hook points of :mod:`attention_lab.attention.hooks` (as
TransformerLens keeps ``head_detector.py`` and ``patching.py`` beside ``hook_points.py``); they read and write no
files. Each module's ``__all__`` is its public API, which docs/library.md lists. A new measurement is a module here;
the callbacks log it and the tab shows it.
"""
