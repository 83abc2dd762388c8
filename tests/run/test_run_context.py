"""The config is input: what a run decides itself (its name, its HParams columns, the dir it continues from) is a
RunContext handed to train, and the config the run was given is never written, not even by instantiating from it.
The task function makes that config read-only, so a plain run, a resume and a resumed sweep (test_resume.py,
test_sweep_resume.py) would fail on any write."""

from __future__ import annotations

import hydra
import pytest
from omegaconf import OmegaConf
from omegaconf.errors import ReadonlyConfigError

from attention_lab.train import resolved, run_name_argument
from conftest import compose_config

NAME = "model=multihead,heads=3"


@pytest.fixture
def given(tmp_path):
    """A composed config as the task function holds it: read-only (paths set, so no Hydra run is needed)."""
    cfg = compose_config([f"paths.output_dir={tmp_path}", "task.train_size=64", "task.val_size=16"])
    OmegaConf.set_readonly(cfg, True)
    return cfg


def test_instantiating_from_the_resolved_copy_leaves_the_given_config_as_it_was(given):
    before = OmegaConf.to_yaml(given)  # unresolved: its interpolations, such as module.model: ${model}
    config = resolved(given)
    datamodule = hydra.utils.instantiate(config.data)
    module = hydra.utils.instantiate(config.module, vocab=datamodule.vocab.itos)
    assert module.config.d_model == given.d_model
    assert OmegaConf.to_yaml(given) == before
    assert OmegaConf.is_readonly(config)
    with pytest.raises(ReadonlyConfigError):
        config.lr = 1.0


def test_the_run_name_goes_to_the_classes_that_show_it():
    cfg = compose_config(["logger=[tensorboard,csv]"])
    assert run_name_argument(cfg.logger.tensorboard, NAME) == {"version": NAME}  # the run's TensorBoard folder
    assert run_name_argument(cfg.callbacks.attention_maps, NAME) == {"run_name": NAME}  # map titles
    assert run_name_argument(cfg.callbacks.head_score_maps, NAME) == {"run_name": NAME}
    assert run_name_argument(cfg.logger.csv, NAME) == {}  # its version is set in its config
    assert run_name_argument(cfg.callbacks.early_stopping, NAME) == {}


def test_the_run_name_is_no_setting():
    assert "run_name" not in compose_config() and "shown_hparams" not in compose_config()
