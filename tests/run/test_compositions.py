"""A run composes its config as often as Hydra alone does for the same command: the lab's checks add none.

A composition is counted as an open of the entry config (configs/train.yaml) while the script runs in this process
(its ``__main__``, as :func:`conftest.run_in_process` runs it). The opens are seen through ``open`` and ``io.open``
(Hydra's file source and ``Path.read_text`` open files with them), replaced for the count only: an audit hook would
stay for the life of the process and slow every later test (``id()`` is an audited event, called 20,000 times per
composition). The reference is a bare ``@hydra.main`` app with a no-op task, on a copy of the configs without the
lab's Hydra callbacks.
"""

from __future__ import annotations

import ast
import builtins
import io
import json
import os
import shutil
import textwrap
from pathlib import Path

import pytest
from omegaconf import OmegaConf, open_dict

from conftest import CONFIG_DIR, QUIET, ROOT, TRAIN, run_in_process

REFERENCE = textwrap.dedent("""
    import hydra
    from attention_lab.config import register_configs

    register_configs()

    @hydra.main(version_base="1.3", config_path={config_dir!r}, config_name="train")
    def main(cfg):
        return None

    main()
""")

TINY_RUN = ["debug=fast", "max_steps=2", "callbacks.attention_maps.images=false", *QUIET]


@pytest.fixture
def opens_and_stderr(monkeypatch):
    """``(opens of config, stderr)`` of ``script args`` run in this process."""
    def count(config: Path, script: Path, *args: str) -> tuple[int, str]:
        counted, real_open, opens = os.path.realpath(config), io.open, []

        def counting_open(file, *rest, **options):
            if isinstance(file, (str, os.PathLike)) and os.path.realpath(file) == counted:
                opens.append(file)
            return real_open(file, *rest, **options)

        with monkeypatch.context() as patch:
            patch.setattr(builtins, "open", counting_open)
            patch.setattr(io, "open", counting_open)
            proc = run_in_process(script, *args)
        return len(opens), proc.stderr
    return count


@pytest.fixture(scope="module")
def reference_app(tmp_path_factory) -> tuple[Path, Path]:
    """The bare app, and its entry config: the project's, without the lab's callbacks."""
    folder = tmp_path_factory.mktemp("reference")
    config_dir = folder / "configs"
    shutil.copytree(CONFIG_DIR, config_dir)
    entry = OmegaConf.load(config_dir / "train.yaml")
    with open_dict(entry):
        del entry.hydra["callbacks"]
    OmegaConf.save(entry, config_dir / "train.yaml")
    app = folder / "app.py"
    app.write_text(REFERENCE.format(config_dir=str(config_dir)))
    return app, config_dir / "train.yaml"


@pytest.mark.parametrize("overrides", [TINY_RUN, ["heads=5"]], ids=["tiny run", "refused setting"])
def test_a_run_composes_as_often_as_hydra_alone(tmp_path, reference_app, opens_and_stderr, overrides):
    app, entry = reference_app
    lab, _ = opens_and_stderr(CONFIG_DIR / "train.yaml", TRAIN, *overrides, f"hydra.run.dir={tmp_path / 'lab'}")
    hydra_alone, _ = opens_and_stderr(entry, app, *overrides, f"hydra.run.dir={tmp_path / 'reference'}")
    assert hydra_alone > 0
    assert lab == hydra_alone


def test_a_resume_composes_its_record_once(tmp_path, reference_app, opens_and_stderr):
    """A resume composes what Hydra composes for its command line, then its record's config once (the run's
    config, its group choices alone, the config it was first trained with: 3), in the task function, and not again
    in the checks of the command line. One more open reads the entry config as data: the classes the project's
    config files name, which a record may instantiate."""
    app, entry = reference_app
    run_dir = tmp_path / "run"
    run_in_process(TRAIN, *TINY_RUN, f"hydra.run.dir={run_dir}", check=True)  # the run to resume: not counted
    resume = [f"resume={run_dir}", "max_steps=3"]
    opens, stderr = opens_and_stderr(CONFIG_DIR / "train.yaml", TRAIN, *resume)
    info = json.loads((run_dir / "run_info.json").read_text())
    assert (info["status"], info["attempts"]) == ("ok", 2), stderr[-3000:]
    hydra_alone, _ = opens_and_stderr(entry, app, *resume, f"hydra.run.dir={tmp_path / 'reference'}")
    assert hydra_alone > 0
    assert opens == hydra_alone + 3 + 1


def test_a_sweep_composes_as_often_as_hydra_alone(tmp_path, reference_app, opens_and_stderr):
    """Hydra's basic sweeper composes each job once before the first starts (to validate the batch), and the
    launcher composes it again to run it. The lab's product sweeper composes each combination once before the first
    job starts too, for the checks and for its plan both (the preflight leaves a product sweep to it)."""
    app, entry = reference_app
    sweep = ["-m", "heads=1,2", *TINY_RUN]
    lab, stderr = opens_and_stderr(CONFIG_DIR / "train.yaml", TRAIN, *sweep, f"hydra.sweep.dir={tmp_path / 'lab'}")
    summary = json.loads((tmp_path / "lab" / "sweep_summary.json").read_text())
    assert [job["status"] for job in summary["jobs"]] == ["ok", "ok"], stderr[-3000:]
    hydra_alone, _ = opens_and_stderr(entry, app, *sweep, "hydra/sweeper=basic",
                                      f"hydra.sweep.dir={tmp_path / 'reference'}")
    assert hydra_alone > 0
    assert lab == hydra_alone


def argv_writes(path: Path) -> list[int]:
    """Lines of ``path`` that assign to sys.argv or to a part of it."""
    def is_argv(node: ast.AST) -> bool:
        node = node.value if isinstance(node, ast.Subscript) else node
        return isinstance(node, ast.Attribute) and node.attr == "argv" and \
            isinstance(node.value, ast.Name) and node.value.id == "sys"

    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        lines += [node.lineno for target in targets if is_argv(target)]
    return lines


def test_the_command_line_is_never_rewritten():
    """@hydra.main parses the command line as typed: resume=<sweep dir> relaunches the process instead."""
    sources = [*(ROOT / "src").rglob("*.py"), TRAIN]
    written = {str(p.relative_to(ROOT)): lines for p in sources if (lines := argv_writes(p))}
    assert not written, f"sys.argv written in {written}"


@pytest.mark.parametrize("typed", ["heads=two", "mask=diagonal", "lr=fast"])
def test_a_knob_of_the_wrong_type_is_refused_before_any_composition(tmp_path, opens_and_stderr, typed):
    """Hydra would compose twice to find it (its first composition swallows the error)."""
    run_dir = tmp_path / "run"
    opens, stderr = opens_and_stderr(CONFIG_DIR / "train.yaml", TRAIN, typed, f"hydra.run.dir={run_dir}")
    assert f"error: {typed} is invalid: " in stderr
    assert opens == 0
    assert not run_dir.exists()
