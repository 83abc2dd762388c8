"""compare.py names a best configuration only when its seeds separate it from every other one (means further apart
than the larger of the two sample stds, at least two seeds each), and ranks a sweep whose jobs all stopped as they
solved the task by steps_to_solve. On sweep dirs as `train.py -m heads=1,2,4 seed=0,1,2` leaves them (records only)."""

from __future__ import annotations

import csv

import pytest
from test_compare import sample_mean_std, write_job

from attention_lab.review.sweep import collect_sweep
from conftest import ROOT, run_in_process

COMPARE = ROOT / "scripts" / "compare.py"
HEADS = (1, 2, 4)

# Every job solved the task and stopped there (global_step == steps_to_solve): val/seq_acc differs in the third
# decimal only, and heads=1 has the one perfect score while it is the slowest configuration.
SOLVED = {1: ([250, 500, 550], [1.0, 0.9922, 0.9961]), 2: ([250, 250, 250], [0.9922, 0.9961, 0.9922]),
          4: ([150, 250, 300], [0.9961, 0.9922, 0.9961])}
# The means ± sample stds of those steps, by hand: 433.3 ± 160.7, 250.0 ± 0.0, 233.3 ± 76.4.
SOLVED_STEPS = {1: "433.3 ± 160.7", 2: "250.0 ± 0.0", 4: "233.3 ± 76.4"}


def write_sweep(tmp_path, results, *, stop_when_solved=True):
    """``results``: heads -> (steps_to_solve per seed, val/seq_acc per seed); None steps: never solved."""
    sweep = tmp_path / "sweep"
    job = 0
    for heads, (steps, accuracies) in results.items():
        for seed, (step, accuracy) in enumerate(zip(steps, accuracies, strict=True)):
            metrics = {"val/seq_acc": accuracy, "val/loss": 0.02, "steps_to_solve": step, "params": 1000 * heads,
                       "global_step": step if stop_when_solved and step is not None else 800}
            write_job(sweep, job, ["max_steps=800", f"heads={heads}", f"seed={seed}"],
                      run_info={"status": "ok", "wall_time_s": 2.0}, metrics=metrics)
            job += 1
    (sweep / "multirun.yaml").write_text("hydra:\n  overrides:\n    task:\n    - max_steps=800\n"
                                         f"    - heads={','.join(str(h) for h in results)}\n    - seed=0,1,2\n")
    return sweep


def reports(sweep):
    proc = run_in_process(COMPARE, str(sweep), check=True)
    with (sweep / "compare.csv").open(newline="") as f:
        jobs = list(csv.DictReader(f))
    with (sweep / "compare_groups.csv").open(newline="") as f:
        groups = list(csv.DictReader(f))
    return proc.stdout, jobs, groups, (sweep / "compare.md").read_text()


def chart(sweep):
    from attention_lab.review.compare_chart import bar_figure

    (ax,) = bar_figure(collect_sweep(sweep)).axes
    return ax.get_title(), ax.get_xlabel(), [text.get_text() for text in ax.texts]


def starred_rows(markdown):
    return [line for line in markdown.splitlines() if line.startswith("| ") and "★" in line]


def test_the_means_by_hand():
    for heads, text in SOLVED_STEPS.items():
        mean, std = sample_mean_std(SOLVED[heads][0])
        assert f"{mean:.1f} ± {std:.1f}" == text


def test_runs_that_all_solved_are_not_crowned_by_noise(tmp_path):
    """The slowest configuration (heads=1) holds the highest val/seq_acc: it must not be marked best, and neither may
    heads=2 or heads=4, which 3 seeds do not separate (250 ± 0 against 233 ± 76)."""
    sweep = write_sweep(tmp_path, SOLVED)
    stdout, jobs, groups, markdown = reports(sweep)
    assert [row["best"] for row in jobs] == ["False"] * 9 and [row["best"] for row in groups] == ["False"] * 3
    assert starred_rows(markdown) == []
    verdict = (f"no best: heads=4, heads=2 lead on steps_to_solve ({SOLVED_STEPS[4]}, {SOLVED_STEPS[2]}), not "
               "separated by 3 seeds; heads=1 trails (every job stopped when it solved the task: "
               "ranked by steps_to_solve)")
    assert verdict in markdown and verdict in " ".join(stdout.split())
    title, xlabel, labels = chart(sweep)
    assert xlabel == "steps_to_solve (mean ± std over seeds) (lower is better)"
    assert labels == [f"{SOLVED_STEPS[h]} (n=3)" for h in HEADS]  # three bars, one per configuration, no ★
    assert "every job stopped when it solved the task · no best: not separated by 3 seeds" in title


def test_steps_to_solve_that_separate_name_the_fastest(tmp_path):
    results = {**SOLVED, 2: ([150, 150, 150], [0.9922, 0.9922, 0.9961])}  # 150 ± 0 against 233.3 ± 76.4: 83 > 76
    sweep = write_sweep(tmp_path, results)
    stdout, jobs, groups, markdown = reports(sweep)
    assert [row["best"] == "True" for row in jobs] == [h == 2 for h in HEADS for _ in range(3)]
    assert [row["best"] for row in groups] == ["False", "True", "False"]
    rows = starred_rows(markdown)
    assert len(rows) == 4 and all("| 150 ★ |" in row for row in rows[:3])  # the deciding cell of each of its jobs
    assert "3/3 solved, 150.0 ± 0.0 ★" in rows[3]
    assert ("best: heads=2, by steps_to_solve (steps_to_solve 150.0 ± 0.0, n=3): its seeds separate it from every "
            "other configuration") in markdown
    assert chart(sweep)[2][1] == "150.0 ± 0.0 (n=3) ★ best"


def test_a_metric_that_separates_keeps_the_star(tmp_path):
    """Runs that trained to max_steps and never solved: val/seq_acc tells the configurations apart."""
    accuracy = {1: [0.5, 0.55, 0.45], 2: [0.9, 0.95, 0.92], 4: [0.7, 0.75, 0.72]}
    sweep = write_sweep(tmp_path, {h: ([None] * 3, accuracy[h]) for h in HEADS}, stop_when_solved=False)
    stdout, jobs, groups, markdown = reports(sweep)
    assert [row["best"] == "True" for row in jobs] == [h == 2 for h in HEADS for _ in range(3)]
    mean, std = sample_mean_std(accuracy[2])
    cell = f"{mean:.4f} ± {std:.4f}"
    assert cell == "0.9233 ± 0.0252"
    assert [row.split("|")[4].strip() for row in starred_rows(markdown)] == ["0.9000 ★", "0.9500 ★", "0.9200 ★",
                                                                            f"{cell} (n=3) ★"]
    assert f"best: heads=2, by val/seq_acc (val/seq_acc {cell}, n=3)" in markdown
    title, xlabel, labels = chart(sweep)
    assert xlabel.startswith("val/seq_acc") and labels[1] == "0.923 ± 0.025 (n=3) ★ best"
    assert "best: heads=2, separated by its seeds" in title


def test_one_seed_per_configuration_names_no_best(tmp_path):
    sweep = write_sweep(tmp_path, {1: ([None], [0.5]), 2: ([None], [0.875])}, stop_when_solved=False)
    proc = run_in_process(COMPARE, str(sweep), check=True)
    with (sweep / "compare.csv").open(newline="") as f:
        assert [row["best"] for row in csv.DictReader(f)] == ["False", "False"]
    line = "no best: one seed per configuration separates nothing; run each with seed=0,1,2"
    assert line in proc.stdout and "★" not in (sweep / "compare.md").read_text()
    assert chart(sweep)[2] == ["0.500", "0.875"]


def test_a_configuration_with_one_finished_seed_is_not_separated(tmp_path):
    """Two of heads=2's seeds failed: its one value, however high, separates it from nothing."""
    sweep = write_sweep(tmp_path, {1: ([None] * 3, [0.5, 0.55, 0.45]), 2: ([None] * 3, [0.99, 0.9, 0.9])},
                        stop_when_solved=False)
    for job in (4, 5):
        (sweep / str(job) / "metrics.json").unlink()
        (sweep / str(job) / "run_info.json").write_text('{"status": "failed", "error": "diverged"}')
    stdout, jobs, _, markdown = reports(sweep)
    assert [row["best"] for row in jobs] == ["False"] * 6
    assert "no best: heads=2, heads=1 are not separated (heads=2: one finished seed) on val/seq_acc" in markdown


@pytest.mark.parametrize(("a", "b", "apart"), [
    ((233.3, 76.4, 3), (250.0, 0.0, 3), False),  # within the larger spread
    ((433.3, 160.7, 3), (250.0, 0.0, 3), True),  # 183 > 161
    ((250.0, 0.0, 3), (260.0, 0.0, 3), True),  # no spread at all: any gap
    ((250.0, 0.0, 3), (250.0, 0.0, 3), False),  # equal
    ((0.5, None, 1), (0.9, 0.01, 3), False),  # one seed separates nothing
])
def test_the_rule(a, b, apart):
    from attention_lab.review.separation import Spread, separated

    assert separated(Spread(*a), Spread(*b)) is apart and separated(Spread(*b), Spread(*a)) is apart


def test_counts_are_printed_as_counts(tmp_path):
    """Steps are whole numbers; their means over seeds have one decimal and a ± std."""
    sweep = write_sweep(tmp_path, SOLVED)
    for job, step in enumerate((140, 150, 160)):
        metrics = (sweep / str(job) / "metrics.json")
        metrics.write_text(metrics.read_text()[:-1] + f', "formation_step": {step}}}')
    stdout, _, _, markdown = reports(sweep)
    per_job, seeds = markdown.split("## Seeds")
    assert "| 0 | `heads=1 seed=0` | ok | 1.0000 | 0.0200 | 140 | 250 |" in per_job
    assert "140.0000" not in markdown + stdout
    assert "| 150.0 ± 10.0 (n=3) | 3/3 solved, 433.3 ± 160.7 |" in seeds
    assert "3/3 solved, 233.3 ± 76.4" in seeds


def test_an_infinite_score_is_never_the_best(tmp_path):
    """heads=1's seeds all recorded val/seq_acc Infinity: no mean, no ★; the seeds separate heads=4."""
    accuracy = {1: [0.1, 0.1, 0.1], 2: [0.5, 0.55, 0.45], 4: [0.9, 0.92, 0.95]}
    sweep = write_sweep(tmp_path, {h: ([None] * 3, accuracy[h]) for h in HEADS}, stop_when_solved=False)
    for job in range(3):
        metrics = sweep / str(job) / "metrics.json"
        metrics.write_text(metrics.read_text().replace('"val/seq_acc": 0.1', '"val/seq_acc": Infinity'))
    _, jobs, groups, markdown = reports(sweep)
    assert [row["best"] == "True" for row in jobs] == [h == 4 for h in HEADS for _ in range(3)]
    assert [row["val/seq_acc"] for row in jobs[:3]] == ["inf"] * 3 and "best: heads=4, by val/seq_acc" in markdown


def test_best_of_names_a_value_only_when_its_seeds_separate_it():
    from attention_lab.review.best_of import best_of
    from attention_lab.review.sweep import Group, Job

    def cell(results):
        return [Group(f"lr={lr}", ["model=m", f"lr={lr}"],
                      [Job(str(seed), ROOT, [], status="ok", metrics={"val/token_acc": v}) for seed, v in enumerate(vs)])
                for lr, vs in results.items()]

    (apart,) = best_of(cell({"0.1": [0.5, 0.55], "0.2": [0.9, 0.92]}), "lr", "val/token_acc")
    assert (apart.winner, apart.rivals, apart.named("lr")) == ("0.2", [], "lr=0.2, best of 2")
    (close,) = best_of(cell({"0.1": [0.9, 0.8], "0.2": [0.9, 0.92]}), "lr", "val/token_acc")  # 0.06 < 0.07
    assert (close.winner, close.rivals, close.cell()) == ("0.2", ["0.1"], "0.2 (not separated from 0.1)")
    assert close.named("lr") == "lr=0.2, highest mean of 2, not separated from lr=0.1 by 2 seeds"


# ---------------------------------------------------------------------------------------------- a folder of sweeps

def day_of_sweeps(tmp_path, second):
    """outputs/multirun/<date>: a sweep of heads=1,2 at 10-00-00, and ``second`` (heads -> its overrides) later."""
    day = tmp_path / "2026-11-24"
    for name, jobs in (("10-00-00", {1: ["heads=1"], 2: ["heads=2"]}), ("11-00-00", second)):
        sweep = day / name
        for job, (heads, overrides) in enumerate(jobs.items()):
            write_job(sweep, job, [*overrides, "seed=0"], run_info={"status": "ok", "wall_time_s": 1.0},
                      metrics={"val/seq_acc": 0.1 * heads, "global_step": 60})
        command = " ".join(sorted({o.split("=")[0] for v in jobs.values() for o in v}))
        (sweep / "multirun.yaml").write_text(f"hydra:\n  overrides:\n    task:\n    - {command}=...\n    - seed=0\n")
    return day


def test_a_folder_of_sweeps_that_set_the_same_settings_is_pooled_and_said_so(tmp_path):
    day = day_of_sweeps(tmp_path, {4: ["heads=4"], 8: ["heads=8"]})
    proc = run_in_process(COMPARE, str(day), check=True)
    line = (f"pooled 2 sweeps of {day}: 10-00-00 (heads=... seed=0); 11-00-00 (heads=... seed=0); pass one sweep's "
            "dir to review it alone")
    assert line in " ".join(proc.stdout.split()) and line in (day / "compare.md").read_text()
    with (day / "compare.csv").open(newline="") as f:
        assert [row["job"] for row in csv.DictReader(f)] == ["10-00-00/0", "10-00-00/1", "11-00-00/0", "11-00-00/1"]


def test_a_folder_of_sweeps_that_set_different_settings_is_refused_in_one_line(tmp_path):
    day = day_of_sweeps(tmp_path, {4: ["lr=0.01"], 8: ["lr=0.03"]})
    proc = run_in_process(COMPARE, str(day))
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and not list(day.glob("compare.*"))
    assert proc.stderr == (f"error: {day} holds 2 sweeps that set different settings (heads, lr): 10-00-00 "
                           f"(heads=... seed=0); 11-00-00 (lr=... seed=0); pass one sweep's dir, e.g. "
                           f"{day / '10-00-00'}\n")
    one = run_in_process(COMPARE, str(day / "11-00-00"), check=True)  # one sweep of that day: as it says
    assert "pooled" not in one.stdout
