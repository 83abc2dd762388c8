"""A new attention variant is one file under attention/ plus one yaml under configs/model/, and a new task is one
file under data/tasks/ plus one yaml under configs/task/: no other edit (`make docs` then writes their rows in the
docs' tables), also when each has an option of its own (``model.options.<name>``, ``task.options.<name>``). Checked
on a copy of the project: it trains, the options reach the code, a bad option is one line, the test files that
enumerate the variants and tasks pass on it, and (slow) so does the whole default suite."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT, script_env

VARIANT = '''
"""Self-attention on unit-length keys, and queries (unit=queries_and_keys) or not (unit=keys): the scores are
cosine similarities, or the query's projection on the key's direction."""

import torch.nn.functional as F

from attention_lab.attention.registry import register
from attention_lab.attention.self_attention import SelfAttention


@register("cosine")
class CosineAttention(SelfAttention):
    """`self` with unit-length keys (and queries): the scores are cosine similarities"""

    origin = "an example of tests/test_extension.py"
    summary = "`self` on unit-length keys and queries"
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
name: cosine
num_heads: 1
options:
  unit: queries_and_keys    # or keys: only the keys have unit length
'''

TASK = '''
"""rotate: the input words moved task.options.shift places to the left, the first ones last."""

from dataclasses import dataclass

from attention_lab.data.tasks.base import SequenceTransformTask, option, register_task


@register_task("rotate")
class RotateTask(SequenceTransformTask):
    summary = "random word sequence → the same words moved `task.options.shift` places to the left, the first last"
    lengths = "3–8"

    @dataclass
    class Options:
        shift: int = option(1, help="places each word moves to the left")

    def transform(self, ids, options):
        shift = options.shift % len(ids)
        return ids[shift:] + ids[:shift]
'''

TASK_YAML = '''
name: rotate
'''

# Run in the copy, in one process: scripts/train.py's __main__ (the copy's conftest.run_in_process: exit status and
# console) trains once with both options set and is refused once per bad option. Then the trained run's own config,
# built again, hands the options to the task's data and the variant's blocks, and the same config without
# task.options.shift builds the class's default (1). It prints what it saw; the test compares that with an
# independent rotation.
DRIVER = '''
import json, sys
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import OmegaConf

sys.path.insert(0, "tests")
from conftest import run_train  # the copy's

out = Path(sys.argv[1])
seen = {}
for n, override in enumerate(json.loads(sys.argv[2])):
    proc = run_train(out / f"bad{n}", "model=cosine", "task=rotate", override, check=False)
    seen[override] = {"returncode": proc.returncode, "stderr": proc.stderr, "created": (out / f"bad{n}").exists()}
proc = run_train(out / "run", "model=cosine", "task=rotate", "max_steps=4", "task.train_size=64", "task.val_size=32",
                 "callbacks.attention_maps.images=false", "~callbacks.head_score_maps", "ablation=[]",
                 "model.options.unit=keys", "task.options.shift=2", check=False)
seen["train"] = {"returncode": proc.returncode, "stderr": proc.stderr[-3000:]}
if proc.returncode == 0:
    cfg = OmegaConf.load(out / "run" / ".hydra" / "config.yaml")
    seen["units"] = [block.attention.unit for block in instantiate(cfg.module, vocab=["w"] * 20).model.blocks]
    for shift in (cfg.task.options.shift, None):
        if shift is None:
            del cfg.task.options["shift"]
        data = instantiate(cfg.data)
        data.setup()
        inputs, targets = data.train_set.tensors
        seen[str(shift)] = {"inputs": inputs[:50].tolist(), "targets": targets[:50].tolist()}
print(json.dumps(seen))
'''

BAD_OPTIONS = {
    "task.options.shift=two": "error: task.options.shift=two is invalid for task=rotate: it must be of type int",
    "task.options.shfit=2": "error: task.options.shfit=2 is invalid for task=rotate: rotate has no option 'shfit'; "
                            "did you mean task.options.shift? (its options: shift)",
    "model.options.unit=queries": "error: model.options.unit=queries is invalid for model=cosine: it must be one of "
                                  "queries_and_keys, keys",
}

# `make test`'s share of "the default suite passes on the copy": the test files whose cases are generated from the
# registries (a row per variant, per task or per class fact), run on the copy with the cases a new name adds or
# changes: those named after the new variant or task, and those that check every variant or task at once (--help's
# lists among them). The whole default suite on the copy is test_the_whole_default_suite_passes_on_the_copy (slow).
REGISTRY_TESTS = ["tests/run/test_configs.py", "tests/attention/test_variant_configs.py", "tests/e2e/test_errors.py",
                  "tests/attention/test_variant_facts.py", "tests/attention/test_attention_variants.py", "tests/attention/test_state_size.py",
                  "tests/tensorboard_plugin/test_tensorboard_tab.py", "tests/attention/test_gradcheck.py", "tests/run/test_help.py",
                  "tests/test_docs_tables.py", "tests/test_config_help.py", "tests/data/test_tasks.py",
                  "tests/attention/test_smeared_keys.py"]
SELECTED = ("cosine or rotate or groups_offer or rows_cover or compose_errors or declarations_match or source_reader "
            "or every_tasks_kind or listed_are_the_registries or every_group_a_user_chooses or docs_hold "
            "or every_group_with_every_option or every_variant_once or every_tasks_own_options or smears_on_both "
            "or capability_table")
# What a copy of the project leaves out: what git ignores (.gitignore) and git's own files.
NOT_COPIED = (".git", ".venv", ".venv-min", "__pycache__", "*.egg-info", ".pytest_cache", ".ruff_cache",
              ".hypothesis", "outputs", "lightning_logs", "multirun")


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A copy of the project (everything but what git ignores) with the variant and the task added, one file and
    one yaml each, and the docs' tables regenerated (`make docs`)."""
    project = tmp_path_factory.mktemp("extension") / "project"
    shutil.copytree(ROOT, project, ignore=shutil.ignore_patterns(*NOT_COPIED))
    (project / "outputs").mkdir()
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
    docs = in_copy(project, "-m", "attention_lab.docs_tables")  # `make docs`: the tables that list the variants
    assert docs.returncode == 0, docs.stderr[-3000:]
    return project


def in_copy(project: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python <args>`` in the copy with the copy's package first on the path (its tests import it too): a process
    of its own, as only a process imports the copy's package instead of this one's."""
    env = dict(script_env(), PYTHONPATH=str(project / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, *args], cwd=project, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def seen(project, tmp_path_factory) -> dict:
    """What DRIVER saw in the copy: the training run with both options, and each bad option's refusal."""
    out = tmp_path_factory.mktemp("runs")
    proc = in_copy(project, "-c", DRIVER, str(out), json.dumps(list(BAD_OPTIONS)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]), out=str(out))


def rotated(ids: list[int], shift: int) -> list[int]:
    """The reference: ``ids`` without padding (id 0), moved ``shift`` places to the left."""
    words = [i for i in ids if i != 0]
    return [words[(t + shift) % len(words)] for t in range(len(words))]


def test_a_new_variant_and_task_with_options_train_and_their_options_reach_the_code(seen):
    run_dir = Path(seen["out"]) / "run"
    assert seen["train"]["returncode"] == 0, seen["train"]["stderr"]
    assert json.loads((run_dir / "metrics.json").read_text())["global_step"] == 4
    # The copy's package was the one imported: the new variant and its option are in the checkpoint's config.
    import torch

    hparams = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["hyper_parameters"]
    assert (hparams["model"]["name"], hparams["model"]["options"]) == ("cosine", {"unit": "keys"})
    assert seen["units"] == ["keys", "keys"]  # model.options.unit reached every block (layers=2)
    for key, shift in (("2", 2), ("None", 1)):  # the run's shift; none set: the class's default
        data = seen[key]
        for inputs, targets in zip(data["inputs"], data["targets"], strict=True):
            assert [t for t in targets if t != 0] == rotated(inputs, shift)
    assert seen["2"]["inputs"] == seen["None"]["inputs"] and seen["2"]["targets"] != seen["None"]["targets"]


@pytest.mark.parametrize("override", list(BAD_OPTIONS))
def test_a_bad_option_of_the_new_variant_or_task_is_one_line(seen, override):
    refused = seen[override]
    assert refused["returncode"] == 1
    assert refused["stderr"].strip().splitlines() == [BAD_OPTIONS[override]]
    assert not refused["created"]  # refused before anything was created


def test_the_tests_that_enumerate_variants_and_tasks_pass_on_the_copy(project):
    """The registry-driven test files on the copy, --help's listing of the new variant and task among them."""
    proc = in_copy(project, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-p", "no:randomly", "-m",
                   "not slow", *REGISTRY_TESTS, "-k", SELECTED, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:]
    counts = proc.stdout.strip().splitlines()[-1]
    assert " passed" in counts and "failed" not in counts and "error" not in counts, counts
    passed = [line for line in proc.stdout.splitlines() if line.startswith("PASSED ")]
    # Cases of the new names ran, the help's listing, the docs' generated tables:
    for name in ("cosine", "rotate", "listed_are_the_registries", "docs_hold", "every_variant_once", "capability_table"):
        assert any(name in line for line in passed), name


# As `make test` runs the suite (the Makefile's `test` target).
WHOLE_SUITE = ("-m", "not slow", "-n", "2", "--dist", "loadscope", "--no-loadscope-reorder")


@pytest.mark.slow
@pytest.mark.serial
def test_the_whole_default_suite_passes_on_the_copy(project):
    """Every test `make test` runs (this file's aside: it is what runs them), on the copy with the new variant and
    task: nothing in the project keeps a list of variants or tasks that the two new files would have to join."""
    proc = in_copy(project, "-m", "pytest", "-q", "-p", "no:cacheprovider", *WHOLE_SUITE,
                   "--ignore=tests/test_extension.py", "tests", timeout=5400)
    failed = [line for line in proc.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    assert proc.returncode == 0, failed or proc.stdout[-6000:]  # which tests, not only the last lines
