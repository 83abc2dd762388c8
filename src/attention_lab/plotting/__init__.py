"""Figures drawn with matplotlib's object API on an Agg canvas (no pyplot state, no display): attention heatmaps
with words on the axes, the colour scale of a variant's weights, and the loss by target index over training."""
