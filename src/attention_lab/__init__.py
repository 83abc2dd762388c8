"""attention-lab: attention mechanisms from the notebooks, as a configurable lab."""

__version__ = "0.1.0"
