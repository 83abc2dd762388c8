"""Every figure of the lab, and the only package that imports matplotlib: drawn with matplotlib's object API on an
Agg canvas (no pyplot state, no display), from plain data (numbers, words, titles) that the callbacks and the review
tools assemble. Attention heatmaps with words on the axes and their colour scale, the layers x heads grid of a run's
maps, per-head score maps, the loss by target index, the induction heads forming, compare.png's bars and
plot_sweep.py's lines."""
