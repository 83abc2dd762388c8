"""attention-lab's own Hydra sweeper plugin (Hydra finds sweepers in the ``hydra_plugins`` namespace)."""
