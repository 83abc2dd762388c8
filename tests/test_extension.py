"""A new attention variant is one file under attention/ plus one yaml under configs/model/, and a new task is one
file under data/tasks/ plus one yaml under configs/task/: no other edit, also when each has an option of its own
(``model.options.<name>``, ``task.options.<name>``). Checked on a copy of the project: it trains, the options reach
the code, a bad option is one line, and the test files that enumerate the variants and tasks still pass on it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import QUIET, ROOT, script_env

VARIANT = '''
"""Self-attention on unit-length keys, and queries (unit=queries_and_keys) or not (unit=keys): the scores are
cosine similarities, or the query's projection on the key's direction."""

import torch.nn.functional as F

from attention_lab.attention.registry import register
from attention_lab.attention.self_attention import SelfAttention


@register("cosine")
class CosineAttention(SelfAttention):
    options = ("unit",)
    choices = {"unit": ("queries_and_keys", "keys")}

    def __init__(self, d_in, d_out, *, unit="queries_and_keys", **common):
        super().__init__(d_in, d_out, **common)
        self.unit = unit

    def project(self, x, source):
        queries, keys, values = super().project(x, source)
        if self.unit == "queries_and_keys":
            queries = F.normalize(queries, dim=-1)
        return queries, F.normalize(keys, dim=-1), values
'''

VARIANT_YAML = '''
defaults:
  - model_schema

name: cosine
num_heads: 1
options:
  unit: queries_and_keys    # or keys: only the keys have unit length
'''

TASK = '''
"""rotate: the input words moved task.options.shift places to the left, the first ones last."""

from dataclasses import dataclass

from attention_lab.data.tasks.base import SequenceTransformTask, register_task


@register_task("rotate")
class RotateTask(SequenceTransformTask):
    @dataclass
    class Options:
        shift: int = 1  # places each word moves to the left

    def transform(self, ids, options):
        shift = options.shift % len(ids)
        return ids[shift:] + ids[:shift]
'''

TASK_YAML = '''
defaults:
  - task_schema

name: rotate
'''

# Run in the copy: the trained run's own config, built again, hands the options to the task's data and the
# variant's blocks; the same config without task.options.shift builds the class's default (1). It prints what they
# hold; the test compares that with an independent rotation.
READ_BACK = '''
import json, sys
from hydra.utils import instantiate
from omegaconf import OmegaConf
from attention_lab.config import register_configs

register_configs()
cfg = OmegaConf.load(sys.argv[1])
shown = {"units": [block.attention.unit for block in instantiate(cfg.module, vocab=["w"] * 20).model.blocks]}
for shift in (cfg.task.options.shift, None):
    if shift is None:
        del cfg.task.options["shift"]
    data = instantiate(cfg.data)
    data.setup()
    inputs, targets = data.train_set.tensors
    shown[str(shift)] = {"inputs": inputs[:50].tolist(), "targets": targets[:50].tolist()}
print(json.dumps(shown))
'''

# The tests that enumerate the variants or the tasks (from the registries or configs/), run on the copy: those of
# the new variant and task (by their names), and those that check every variant or task at once. The whole default
# suite on the copy takes as long as on the project; these are the tests a new name can break.
REGISTRY_TESTS = ["tests/test_configs.py", "tests/test_errors.py", "tests/test_variant_facts.py",
                  "tests/test_attention_variants.py", "tests/test_state_size.py", "tests/test_tensorboard_tab.py",
                  "tests/test_gradcheck.py"]
SELECTED = ("cosine or rotate or groups_offer or compose_errors or declarations_match or source_reader or "
            "every_tasks_kind or gradcheck")


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A copy of the project with the variant and the task added, one file and one yaml each."""
    project = tmp_path_factory.mktemp("extension") / "project"
    skip = shutil.ignore_patterns("*.egg-info", "__pycache__")
    for folder in ("src", "configs", "scripts", "tests"):
        shutil.copytree(ROOT / folder, project / folder, ignore=skip)
    shutil.copy(ROOT / "pyproject.toml", project / "pyproject.toml")  # pytest's settings (markers)
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
    return project


def in_copy(project: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python <args>`` with the copy's package first on the path (its tests import it too)."""
    env = dict(script_env(), PYTHONPATH=str(project / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, *args], cwd=project, env=env, capture_output=True, text=True,
                          timeout=timeout)


def train(project: Path, run_dir: Path, *overrides: str) -> subprocess.CompletedProcess:
    return in_copy(project, str(project / "scripts" / "train.py"), "model=cosine", "task=rotate", "max_steps=30",
                   "task.train_size=256", "task.val_size=64", "~callbacks.attention_maps", *QUIET,
                   f"hydra.run.dir={run_dir}", *overrides)


def rotated(ids: list[int], shift: int) -> list[int]:
    """The reference: ``ids`` without padding (id 0), moved ``shift`` places to the left."""
    words = [i for i in ids if i != 0]
    return [words[(t + shift) % len(words)] for t in range(len(words))]


def test_a_new_variant_and_task_with_options_train_and_their_options_reach_the_code(project, tmp_path):
    run_dir = tmp_path / "run"
    proc = train(project, run_dir, "model.options.unit=keys", "task.options.shift=2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((run_dir / "metrics.json").read_text())["global_step"] == 30
    # The copy's package was the one imported: the new variant and its option are in the checkpoint's config.
    import torch

    hparams = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["hyper_parameters"]
    assert (hparams["model"]["name"], hparams["model"]["options"]) == ("cosine", {"unit": "keys"})
    read = in_copy(project, "-c", READ_BACK, str(run_dir / ".hydra" / "config.yaml"))
    assert read.returncode == 0, read.stderr[-3000:]
    shown = json.loads(read.stdout.strip().splitlines()[-1])
    assert shown["units"] == ["keys", "keys"]  # model.options.unit reached every block (layers=2)
    for key, shift in (("2", 2), ("None", 1)):  # the run's shift; none set: the class's default
        data = shown[key]
        for inputs, targets in zip(data["inputs"], data["targets"], strict=True):
            assert [t for t in targets if t != 0] == rotated(inputs, shift)
    assert shown["2"]["inputs"] == shown["None"]["inputs"] and shown["2"]["targets"] != shown["None"]["targets"]


@pytest.mark.parametrize(("override", "line"), [
    ("task.options.shift=two", "error: task.options.shift=two is invalid for task=rotate: it must be of type int"),
    ("task.options.shfit=2", "error: task.options.shfit=2 is invalid for task=rotate: rotate has no option 'shfit'; "
                             "did you mean task.options.shift? (its options: shift)"),
    ("model.options.unit=queries", "error: model.options.unit=queries is invalid for model=cosine: it must be one of "
                                   "queries_and_keys, keys"),
])
def test_a_bad_option_of_the_new_variant_or_task_is_one_line(project, tmp_path, override, line):
    proc = train(project, tmp_path / "run", override)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [line]
    assert not (tmp_path / "run").exists()  # refused before anything was created


def test_the_tests_that_enumerate_variants_and_tasks_pass_on_the_copy(project):
    proc = in_copy(project, "-m", "pytest", "-q", "-p", "no:cacheprovider", *REGISTRY_TESTS, "-k", SELECTED,
                   timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:]
    counts = proc.stdout.strip().splitlines()[-1]
    assert " passed" in counts and "failed" not in counts and "error" not in counts, counts


def test_the_help_lists_the_new_variant_and_task(project):
    """test_help.py on the copy: --help's groups and the registries agree with the new names in them."""
    proc = in_copy(project, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_help.py", timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:]
