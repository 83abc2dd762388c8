"""Lightning callbacks of a training run."""
