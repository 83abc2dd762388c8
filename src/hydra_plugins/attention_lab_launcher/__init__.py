"""attention-lab's own Hydra launcher plugin (Hydra finds launchers in the ``hydra_plugins`` namespace)."""
