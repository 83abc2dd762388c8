"""ModelCheckpoint for a run dir that may be moved or copied: the paths it keeps in its state are read as
names inside the run's checkpoints folder, so a resumed run keeps its best score and its files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightning.pytorch.callbacks import ModelCheckpoint

PATH_KEYS = ("best_model_path", "kth_best_model_path", "last_model_path")


class RunDirModelCheckpoint(ModelCheckpoint):
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if self.dirpath is None or not state_dict.get("dirpath"):
            super().load_state_dict(state_dict)
            return
        here = Path(self.dirpath)

        def moved(path: Any) -> Any:  # <old dir>/best.ckpt -> <this dir>/best.ckpt
            return str(here / Path(path).name) if path else path

        state = dict(state_dict, dirpath=self.dirpath, **{key: moved(state_dict.get(key)) for key in PATH_KEYS})
        state["best_k_models"] = {moved(path): score for path, score in state_dict.get("best_k_models", {}).items()}
        super().load_state_dict(state)
