"""Bad input -> one clear line, non-zero exit, fast, no traceback, and no run dir left behind.

Most cases are checked in-process (compose + the same preflight checks scripts/train.py runs); a
representative set runs scripts/train.py as a user would; a Hypothesis test throws random override
combinations at it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attention_lab.errors import ConfigError
from attention_lab.run.describe import describe
from attention_lab.run.preflight import check_run as preflight
from attention_lab.run.resume import plan_resume
from conftest import CONFIG_DIR, ROOT, TRAIN, check_command_line, compose_config, run_in_process, run_script, script_env

# The options a group offers, as the error lists them: the group's config files, sorted.
MODELS, TASKS = (", ".join(sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml"))) for group in ("model", "task"))

def assert_one_line_error(proc, *fragments: str) -> str:
    """Exit status != 0, stderr is exactly one `error: ...` line naming the fragments, no traceback."""
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    assert "Traceback" not in output, output
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def reject(tmp_path: Path, *overrides: str, run=run_script):
    """The command's result and the run dir it was given. How fast a rejection comes is measured by the benchmark
    (section D's config_error and type_error rows, with their targets), not timed here."""
    run_dir = tmp_path / "run"
    return run(TRAIN, *overrides, f"hydra.run.dir={run_dir}"), run_dir


def write_corpus(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_bytes(data)
    return path


# --- scripts/train.py as a user runs it -------------------------------------------------------------------

SUBPROCESS_CASES = {
    "heads not an integer": (["heads=two"], ["heads=two", "integer"]),
    "unknown model": (["model=nope"], ["model=nope", "multihead"]),
    "unknown mask": (["mask=bogus"], ["mask=bogus", "causal"]),
    "unknown launcher": (["hydra/launcher=nope"], ["hydra/launcher=nope", "parallel"]),
    "unknown setting": (["head=3"], ["head=3", "did you mean heads"]),
    "heads <= 0": (["heads=0"], ["heads=0", "positive"]),
    "heads does not divide d_model": (["heads=5"], ["heads=5", "d_model=48"]),
    "dropout outside [0, 1)": (["model.dropout=1.0"], ["model.dropout=1.0", "[0, 1)"]),
    "sequence longer than the positional table": (["task.max_len=20"], ["task.max_len=20", "context_length"]),
    "mask makes no sense for the task": (["task=next_word", "mask=padding"], ["mask=padding", "causal"]),
    "device without hardware": (["device=cuda"], ["device=cuda", "device=cpu"]),  # in-process: IMPORTS_TORCH
    "unknown ablation": (["ablation=[half]"], ["ablation=[half]", "zero, mean"]),
    "unknown trainer accelerator": (["trainer.accelerator=cpuu"],  # in-process: IMPORTS_TORCH
                                    ["trainer.accelerator=cpuu", "auto, cpu, cuda, gpu, mps",
                                     "did you mean trainer.accelerator=cpu?"]),
    "unknown trainer strategy": (["trainer=ddp_sim", "trainer.strategy=dp_fork"],  # in-process: IMPORTS_TORCH
                                 ["trainer.strategy=dp_fork", "ddp_spawn", "did you mean trainer.strategy=ddp_fork?"]),
}


# The cases whose checks import torch (or Lightning, for its registries) run in-process (the same entry function,
# exit status and console): a process of their own would spend most of its time importing them; the corpus check
# below is that kind's process.
IMPORTS_TORCH = {"device without hardware", "unknown trainer accelerator", "unknown trainer strategy"}


@pytest.mark.parametrize("overrides, fragments, run", [(*case, run_in_process if name in IMPORTS_TORCH else run_script)
                                                        for name, case in SUBPROCESS_CASES.items()],
                         ids=SUBPROCESS_CASES.keys())
def test_bad_setting_is_one_line(tmp_path, overrides, fragments, run):
    proc, run_dir = reject(tmp_path, *overrides, run=run)
    assert_one_line_error(proc, *fragments)
    assert not run_dir.exists(), "a rejected config must leave no run dir behind"


def test_bad_corpus_is_one_line(tmp_path):
    corpus = write_corpus(tmp_path, "caf\xe9 au lait\n".encode("latin-1"))
    proc, run_dir = reject(tmp_path, f"task.corpus={corpus}")
    assert_one_line_error(proc, f"task.corpus={corpus}", "UTF-8")
    assert not run_dir.exists()


def test_full_traceback_on_request(tmp_path):
    env = dict(script_env(), HYDRA_FULL_ERROR="1")
    proc = subprocess.run([sys.executable, str(TRAIN), "heads=0", f"hydra.run.dir={tmp_path / 'run'}"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr and "heads=0 is invalid" in proc.stderr


# --- the same checks in-process: every other item of the list --------------------------------------

IN_PROCESS_CASES = {
    "layers <= 0": (["layers=0"], "layers=0"),
    "d_model <= 0": (["d_model=0"], "d_model=0"),
    "batch_size <= 0": (["batch_size=-4"], "batch_size=-4"),
    "min_len <= 0": (["task.min_len=0"], "task.min_len=0"),
    "max_len <= 0": (["task.max_len=0"], "task.max_len=0"),
    "max_steps <= 0": (["max_steps=0"], "max_steps=0"),
    "dropout < 0": (["model.dropout=-0.1"], "model.dropout=-0.1"),
    "lr <= 0": (["lr=0"], "lr=0"),
    "lr negative": (["lr=-1e-3"], "lr=-0.001"),
    "lr not finite": (["lr=inf"], "lr=inf"),
    "heads negative": (["heads=-2"], "heads=-2"),
    "multihead_concat divisibility": (["model=multihead_concat", "heads=7"], "heads=7"),
    "min_len > max_len": (["task.min_len=6", "task.max_len=4"], "task.min_len=6"),
    "cross with causal mask": (["model=cross", "mask=causal"], "mask=causal"),
    "cross with next_word": (["model=cross", "task=next_word", "mask=causal"], "task=next_word"),
    "mps without hardware": (["device=mps"], "device=mps"),
    "gpu preset without hardware": (["trainer=gpu"], "trainer.accelerator=gpu"),
    "unknown optimized metric": (["optimized_metric=val/nope"], "optimized_metric=val/nope"),
    "ood metric without the longer set": (["optimized_metric=ood/seq_acc"], "needs task.ood_min_len"),
    "head score of a head that is not there": (["optimized_metric=head_score/self/layer0/head4"], "h < heads=4"),
    "head score of an encoder-decoder": (["model=cross", "optimized_metric=head_score/self/layer0/head0"],
                                         "optimized_metric=head_score/self/layer0/head0"),
    "unknown ablation": (["ablation=[zero,half]"], "ablation=[zero,half]"),
    "unknown ablation in the optimized metric": (["optimized_metric=ablation/half/loss/layer0/head0"],
                                                 "ablation/<zero|mean>/<loss|token_acc>"),
    "unknown ablation metric": (["optimized_metric=ablation/zero/seq_acc/layer1/all"],
                                "optimized_metric=ablation/zero/seq_acc/layer1/all"),
    "ablation that the run does not measure": (["ablation=[zero]", "optimized_metric=ablation/mean/loss/layer0/head0"],
                                               "ablation/<zero>/<loss|token_acc>"),
    "ablation of a variant without learned heads": (["model=simple", "ablation=[zero]"], "model=simple"),
    "ablation at every validation without learned heads": (["model=simple", "ablation_every_validation=true"],
                                                           "ablation_every_validation=true"),
    "ablation at every validation with none chosen": (["ablation=[]", "ablation_every_validation=true"],
                                                      "ablation=[]"),
    "seed negative": (["seed=-1"], "seed=-1"),
    "all devices on the CPU": (["trainer.devices=-1"], "trainer.devices=-1 is invalid on the cpu accelerator"),
    "device indices on the CPU": (["trainer.devices=[0,1]"], "trainer.devices=[0,1] is invalid on the cpu accelerator"),
    "validation every 0 epochs": (["trainer.check_val_every_n_epoch=0"], "trainer.check_val_every_n_epoch=0"),
    "heads removed": (["~heads"], "heads=null"),
    # Sizes that cannot fit in memory (run/preflight.py's lower bounds): layers=200000 needs at least 110 GB (90 GB
    # of it the model's, on a GPU), d_model=1000000 384 TB, 2e9 examples 256 GB.
    "layers that cannot fit": (["layers=200000"], "layers=200000 is invalid"),
    "d_model that cannot fit": (["d_model=1000000"], "d_model=1000000 is invalid"),
    "training examples that cannot fit": (["task.train_size=2000000000"], "task.train_size=2000000000 is invalid"),
    "validation examples that cannot fit": (["task.val_size=2000000000"], "task.val_size=2000000000 is invalid"),
}


@pytest.mark.parametrize("overrides, fragment", IN_PROCESS_CASES.values(), ids=IN_PROCESS_CASES.keys())
def test_preflight_rejects(overrides, fragment):
    cfg = compose_config(overrides)
    with pytest.raises(ConfigError) as info:
        preflight(cfg)
    message = str(info.value)
    assert "\n" not in message and fragment in message, message
    assert " is invalid" in message or " does not divide" in message


COMPOSE_CASES = {
    "unknown task": (["task=nope"], f"task=nope is unknown: choose one of {TASKS}"),
    "unknown device": (["device=tpu"], "device=tpu is invalid: choose one of auto, cpu, cuda, mps"),
    "layers not an integer": (["layers=1.5"], "layers=1.5 is invalid: expected an integer, got '1.5'"),
    "lr not a number": (["lr=fast"], "lr=fast is invalid: expected a number, got 'fast'"),
    "unknown trainer preset": (["trainer=tpu"], "trainer=tpu is unknown: choose one of"),
    # A misspelt option gets the nearest of the group's options, as a misspelt setting gets the nearest setting.
    "option typo": (["model=selff"], f"model=selff is unknown: choose one of {MODELS}; did you mean model=self?"),
    "option in capitals": (["model=Multihead"], f"model=Multihead is unknown: choose one of {MODELS}; did you mean "
                                                "model=multihead?"),
    "task option typo": (["task=nextword"], f"task=nextword is unknown: choose one of {TASKS}; did you mean "
                                            "task=next_word?"),
    "override syntax": (["heads==3"], "could not parse the override 'heads==3'"),
    "unknown nested key": (["task.lenght=3"], "task.lenght=3 is invalid: there is no setting 'task.lenght'"),
}


@pytest.mark.parametrize("overrides, expected", COMPOSE_CASES.values(), ids=COMPOSE_CASES.keys())
def test_compose_errors_become_one_line(overrides, expected):
    with pytest.raises(Exception) as info:
        compose_config(overrides)
    message = describe(info.value, overrides)
    assert "\n" not in message and message.startswith(expected), message


CORPORA = {
    "missing": (None, "no such file"),
    "empty": (b"", "no words"),
    "not UTF-8": ("na\xefve caf\xe9\n".encode("latin-1"), "not UTF-8"),
    "too small for copy": (b"one two\n", "distinct sequences"),
}


@pytest.mark.parametrize("data, fragment", CORPORA.values(), ids=CORPORA.keys())
def test_bad_corpus_rejected(tmp_path, data, fragment):
    corpus = tmp_path / "missing.txt" if data is None else write_corpus(tmp_path, data)
    cfg = compose_config([f"task.corpus={corpus}", "task=copy"])
    with pytest.raises(ConfigError, match=fragment) as info:
        preflight(cfg)
    assert "task." in str(info.value) and "\n" not in str(info.value)


def test_corpus_too_small_for_next_word(tmp_path):
    corpus = write_corpus(tmp_path, b"hello world\n")
    cfg = compose_config([f"task.corpus={corpus}", "task=next_word", "mask=causal", "task.min_len=2"])
    with pytest.raises(ConfigError, match="too small for task=next_word"):
        preflight(cfg)


def test_resume_of_nothing_is_rejected(tmp_path):
    with pytest.raises(ConfigError, match="is not a run dir"):
        plan_resume(str(tmp_path), [f"resume={tmp_path}"])
    with pytest.raises(ConfigError, match="with -m"):
        check_command_line(["-m", f"resume={tmp_path}"], ROOT / "configs")


def test_run_dir_holding_a_run_is_refused(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "metrics.json").write_text("{}")
    proc = run_in_process(TRAIN, f"hydra.run.dir={run_dir}")
    assert_one_line_error(proc, f"hydra.run.dir={run_dir}", "already holds a run", "resume=")
    assert (run_dir / "metrics.json").read_text() == "{}" and not (run_dir / ".hydra").exists()


def test_claim_is_atomic(tmp_path):
    """Of several claims of one run dir at the same moment, exactly one succeeds."""
    from concurrent.futures import ThreadPoolExecutor

    from attention_lab.run.run_info import claim_run_dir

    def claim(_):
        try:
            claim_run_dir(tmp_path / "same")
            return True
        except ConfigError:
            return False

    with ThreadPoolExecutor(8) as pool:
        assert sum(pool.map(claim, range(8))) == 1


# --- random override combinations -------------------------------------------------------------------------

VALUES = {
    "model": ["simple", "self", "cross", "multihead", "multihead_concat", "nope"],
    "heads": ["1", "2", "3", "4", "5", "0", "-1", "two"],
    "d_model": ["48", "16", "0", "50"],
    "layers": ["1", "2", "0"],
    "mask": ["none", "causal", "padding", "bogus"],
    "task": ["copy", "reverse", "sort", "next_word", "recall", "induction", "nope"],
    "lr": ["0.003", "0", "-1", "abc"],
    "model.dropout": ["0.0", "0.2", "1.0"],
    "batch_size": ["16", "0"],
    "task.max_len": ["5", "8", "20"],
    "device": ["cpu", "auto", "cuda", "tpu"],
    "block": ["transformer", "attention_only", "nope"],
}

overrides_strategy = st.dictionaries(st.sampled_from(sorted(VALUES)), st.none(), min_size=1, max_size=5).flatmap(
    lambda keys: st.tuples(*(st.sampled_from(VALUES[k]).map(lambda v, k=k: f"{k}={v}") for k in sorted(keys)))
)


def check_clean_outcome(tmp_path: Path, overrides: tuple[str, ...]) -> None:
    run_dir = tmp_path / f"run-{time.monotonic_ns()}"
    # In this process: the same entry function, exit status and console as `python scripts/train.py ...`.
    proc = run_in_process(TRAIN, "debug=fast", "callbacks.attention_maps.images=false", "~callbacks.head_score_maps",
                          "trainer.enable_progress_bar=false", "~callbacks.progress_bar", *overrides,
                          f"hydra.run.dir={run_dir}")
    output = proc.stdout + proc.stderr
    assert "Traceback" not in output, (overrides, output[-3000:])
    if proc.returncode == 0:
        assert (run_dir / "metrics.json").is_file(), overrides
    else:
        line = assert_one_line_error(proc)
        assert "=" in line, line  # names the setting


@settings(max_examples=10, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(overrides=overrides_strategy)
def test_random_overrides_run_or_fail_cleanly(tmp_path, overrides):
    check_clean_outcome(tmp_path, overrides)


@pytest.mark.slow
@settings(max_examples=80, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(overrides=overrides_strategy)
def test_random_overrides_run_or_fail_cleanly_many(tmp_path, overrides):
    check_clean_outcome(tmp_path, overrides)


@pytest.mark.parametrize(("argv", "fragment"), [
    (["-m", "heads=1,2", "+haeds=3"], "did you mean heads"),
    (["hparams_search=optuna", "+haeds=3"], "did you mean heads"),    # a preset that makes it a sweep
    (["hparams_search=optuna", "resume=/some/run"], "resume=/some/run is invalid with -m"),
    (["-m", "trainer=ddp_sim", "trainer.strategy=ddp,dp_fork"], "trainer.strategy=dp_fork is invalid"),
], ids=" ".join)
def test_every_job_of_a_sweep_is_checked_before_it_starts(argv, fragment):
    with pytest.raises(ConfigError, match=fragment):
        check_command_line(argv, ROOT / "configs")
