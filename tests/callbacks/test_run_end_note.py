"""A run's last console lines say why it stopped (max_steps, early stopping at step N with the metric past its
threshold, a signal) and the commands that open this run next (callbacks/lifecycle.py's RunEndNote)."""

from __future__ import annotations

import re
from pathlib import Path

from attention_lab.data.probe import EXAMPLE_TEXT
from attention_lab.records.commands import ATTENTION_TAB, shown_path, tensorboard_command, visualize_command
from conftest import run_train

TINY = ["task.train_size=256", "task.val_size=64", "trainer.val_check_interval=3",
        "callbacks.attention_maps.images=false", "~callbacks.head_score_maps", "ablation=[]"]


def closing_lines(out: str) -> list[str]:
    """The note: from its `stopped:` line to the end of the output."""
    lines = out.splitlines()
    starts = [n for n, line in enumerate(lines) if re.search(r"(^|\] - )stopped: ", line)]
    assert len(starts) == 1, out[-3000:]
    return lines[starts[0]:]


def assert_next_commands(note: list[str], run_dir: Path) -> None:
    commands = "\n".join(note[1:])
    assert tensorboard_command(run_dir) in commands and visualize_command(run_dir, EXAMPLE_TEXT) in commands, note


def test_max_steps_reached(tmp_path: Path):
    run_dir = tmp_path / "run"
    proc = run_train(run_dir, "max_steps=6", "~callbacks.early_stopping", *TINY)
    note = closing_lines(proc.stdout + proc.stderr)
    assert note[0].endswith("stopped: max_steps=6 reached"), note
    assert_next_commands(note, run_dir)
    assert len(note) == 3, note  # the note is the last thing printed


def test_early_stopping_names_the_step_and_the_metric(tmp_path: Path):
    run_dir = tmp_path / "run"
    # Any val/seq_acc is above -1: the first validation (step 3) stops the run.
    proc = run_train(run_dir, "max_steps=60", "+callbacks.early_stopping.threshold=-1", *TINY)
    note = closing_lines(proc.stdout + proc.stderr)
    assert re.search(r"stopped: early stopping at step 3: solved, val/seq_acc = \d\.\d{4} >= -1$", note[0]), note
    assert_next_commands(note, run_dir)


def test_an_interrupted_run_says_so(interrupted_run: Path):
    out = (interrupted_run.parent / "console.txt").read_text()  # a run that SIGTERM stopped: its stdout, then stderr
    stopped = [line for line in out.splitlines() if "stopped: " in line]
    assert len(stopped) == 1 and re.search(r"stopped: interrupted by SIGTERM at step \d+$", stopped[0]), out[-3000:]
    assert_next_commands(closing_lines(out)[:3], interrupted_run)


def test_the_final_table_shows_steps_as_whole_numbers_and_says_when_none_came():
    from attention_lab.train import metrics_table

    table = metrics_table({"val/loss": 0.01234, "global_step": 400, "params": 21427, "steps_to_solve": None,
                           "formation_step": 140.0, "hparams": {"heads": 4}})
    rows = dict(line.split(None, 1) for line in table.splitlines())
    assert rows == {"val/loss": "0.0123", "global_step": "400", "params": "21427", "steps_to_solve": "not solved",
                    "formation_step": "140"}
    assert "formation_step  not formed" in metrics_table({"formation_step": None})


def test_the_induction_note_suggests_a_sentence_with_a_repeat(tmp_path: Path):
    from attention_lab.callbacks.lifecycle import RunEndNote
    from attention_lab.callbacks.signals import StopSignals
    from attention_lab.data.probe import example_text

    words = example_text("induction").split()
    half = len(words) // 2
    assert half >= 2 and words[:half] == words[half:]  # a sequence and its repeat, where the model predicts
    assert example_text("reverse") == EXAMPLE_TEXT
    note = RunEndNote(StopSignals(), tmp_path, example=example_text("induction")).note()
    assert visualize_command(shown_path(tmp_path), example_text("induction")) in note
    assert f"{tensorboard_command(shown_path(tmp_path))}   # then the attention tab: {ATTENTION_TAB}" in note
