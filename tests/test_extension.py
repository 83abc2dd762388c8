"""A new attention variant is one file under attention/ plus one yaml under configs/model/, and a new task is one
file under data/tasks/ plus one yaml under configs/task/: no other edit. Checked on a copy of the project."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

from conftest import QUIET, ROOT, script_env

VARIANT = '''
"""Self-attention on unit-length queries and keys: the scores are cosine similarities."""

import torch.nn.functional as F

from attention_lab.attention.registry import register
from attention_lab.attention.self_attention import SelfAttention


@register("cosine")
class CosineAttention(SelfAttention):
    def project(self, x, source):
        queries, keys, values = super().project(x, source)
        return F.normalize(queries, dim=-1), F.normalize(keys, dim=-1), values
'''

VARIANT_YAML = '''
defaults:
  - model_schema

name: cosine
num_heads: 1
'''

TASK = '''
"""rotate: the input words moved one place to the left, the first word last."""

from attention_lab.data.tasks.base import SequenceTransformTask, register_task


@register_task("rotate")
class RotateTask(SequenceTransformTask):
    def transform(self, ids, config):
        return ids[1:] + ids[:1]
'''

TASK_YAML = '''
defaults:
  - task_schema

name: rotate
'''


def test_new_variant_and_task_are_one_file_and_one_yaml_each(tmp_path):
    project = tmp_path / "project"
    shutil.copytree(ROOT / "src", project / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    shutil.copytree(ROOT / "configs", project / "configs")
    shutil.copytree(ROOT / "scripts", project / "scripts", ignore=shutil.ignore_patterns("__pycache__"))
    package = project / "src" / "attention_lab"
    files = {
        package / "attention" / "cosine.py": VARIANT,
        project / "configs" / "model" / "cosine.yaml": VARIANT_YAML,
        package / "data" / "tasks" / "rotate.py": TASK,
        project / "configs" / "task" / "rotate.yaml": TASK_YAML,
    }
    for path, text in files.items():
        assert not path.exists()
        path.write_text(textwrap.dedent(text).lstrip())

    run_dir = tmp_path / "run"
    env = dict(script_env(), PYTHONPATH=str(project / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, str(project / "scripts" / "train.py"), "model=cosine", "task=rotate",
                           "max_steps=30", "task.train_size=256", "task.val_size=64", "~callbacks.attention_maps",
                           *QUIET, f"hydra.run.dir={run_dir}"], cwd=project, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    config = (run_dir / ".hydra" / "config.yaml").read_text()
    assert "name: cosine" in config and "name: rotate" in config
    assert json.loads((run_dir / "metrics.json").read_text())["global_step"] == 30
    # The copy's package was the one imported: the new variant is in the checkpoint's config.
    import torch

    hparams = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["hyper_parameters"]
    assert hparams["model"]["name"] == "cosine"
