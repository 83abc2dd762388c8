"""The recall race's view of its jobs: each seed's best job of the ladder (solved first, in the fewest steps; else
the highest accuracy), claims counting seeds over those, the docs table written from a results file, and the two
pictures from a sweep dir as the ladder leaves one."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from attention_lab.findings.best_of import best_per_seed
from attention_lab.findings.catalogue import solved
from attention_lab.findings.claims import KOfN, Predicate, Record
from attention_lab.findings.race_table import race_finding, race_table
from attention_lab.findings.records import as_json
from conftest import ROOT, run_in_process

SEARCHED = ("lr", "max_steps")


def job(model: str, width: int, seed: int, lr: float, steps: int, solve: int | None, acc: float,
        cpu: float = 60.0) -> Record:
    return Record({"model": model, "d_model": str(width), "seed": str(seed), "lr": str(lr), "max_steps": str(steps)},
                  {"steps_to_solve": None if solve is None else float(solve), "val/token_acc": acc,
                   "val/seq_acc": 1.0 if solve else 0.0, "state_size": 64.0 * width}, 10.0, cpu)


def race() -> list[Record]:
    """multihead at 16: seed 0 solves with two rates (300 at lr 0.01, 200 at lr 0.003), seed 1 only in the second
    rung (1500 steps at lr 0.01), seed 2 never (best accuracy 0.40 in rung 1); conv at 16 never solves."""
    return [
        job("multihead", 16, 0, 0.01, 500, 300, 1.0), job("multihead", 16, 0, 0.003, 500, 200, 1.0),
        job("multihead", 16, 0, 0.0001, 500, None, 0.26),
        job("multihead", 16, 1, 0.01, 500, None, 0.30), job("multihead", 16, 1, 0.003, 500, None, 0.28),
        job("multihead", 16, 1, 0.01, 2000, 1500, 0.999),
        job("multihead", 16, 2, 0.01, 500, None, 0.27), job("multihead", 16, 2, 0.01, 2000, None, 0.40),
        job("multihead", 16, 2, 0.003, 2000, None, 0.35),
        *(job("conv", 16, seed, 0.01, 2000, None, acc) for seed, acc in ((0, 0.25), (1, 0.27), (2, 0.29))),
    ]


def test_each_seed_keeps_its_best_job():
    best = {(r.overrides["model"], r.seed): r for r in best_per_seed(race(), SEARCHED)}
    assert len(best) == 6
    assert best["multihead", "0"].overrides["lr"] == "0.003" and best["multihead", "0"].metrics["steps_to_solve"] == 200
    assert best["multihead", "1"].overrides["max_steps"] == "2000"  # solved in the second rung beats any accuracy
    assert best["multihead", "2"].metrics["val/token_acc"] == 0.40  # unsolved: the highest accuracy


def test_claims_count_seeds_over_their_best_jobs():
    records = best_per_seed(race(), SEARCHED)
    two = solved({"model": "multihead", "d_model": "16"}, 2, 3).evaluate(records)
    assert two.held and two.numbers == "2 of 3 (needed 2); not: seed 2: null"
    assert not solved({"model": "multihead", "d_model": "16"}, 3, 3).evaluate(records).held
    # over every job instead of the best per seed, 3 solved jobs of 9 would be counted: not what a seed did
    assert not KOfN(Predicate("steps_to_solve", "set"), 2, 3, {"model": "multihead"}).evaluate(race()).held


def test_the_table_is_written_from_the_results_file(tmp_path):
    finding = race_finding()
    assert finding.best_of == SEARCHED
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "docs" / "results" / "recall_race.json").write_text(as_json(finding, race(), "test", (0, 1, 2)))
    rows = race_table(tmp_path).splitlines()
    multihead = next(r for r in rows if r.startswith("| `multihead`"))
    conv = next(r for r in rows if r.startswith("| `conv`"))
    assert "**2 of 3**, 200–1,500 steps (lr 0.003, 0.01); the other seeds 0.400" in multihead
    accuracies = [0.25, 0.27, 0.29]
    assert f"0 of 3; {statistics.fmean(accuracies):.3f} ± {statistics.stdev(accuracies):.3f}" in conv
    assert "| 1,024 |" in multihead  # the state per layer at d_model 16
    assert multihead.endswith(f"| {9 * 60 / 60:.1f} |")  # nine jobs of a CPU minute each


def test_no_results_file_says_how_to_make_one(tmp_path):
    assert "findings.py check recall_race --sweep <sweep dir> --record" in race_table(tmp_path)


def write_job(sweep: Path, number: int, record: Record) -> None:
    job_dir = sweep / str(number)
    (job_dir / ".hydra").mkdir(parents=True)
    overrides = [f"{k}={v}" for k, v in record.overrides.items()]
    (job_dir / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    (job_dir / ".hydra" / "config.yaml").write_text("optimized_metric: val/token_acc\n")
    (job_dir / "run_info.json").write_text(json.dumps({"job": number, "overrides": overrides, "status": "ok",
                                                        "wall_time_s": 10.0, "cpu_time_s": record.cpu_time_s}))
    (job_dir / "metrics.json").write_text(json.dumps({**record.metrics, "global_step": 100}))


def test_plot_race_draws_both_pictures_from_a_sweep(tmp_path):
    sweep = tmp_path / "sweep"
    for number, record in enumerate(race()):
        write_job(sweep, number, record)
    out = tmp_path / "out"
    proc = run_in_process(ROOT / "scripts" / "plot_race.py", "--sweep", str(sweep), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["mqar_accuracy_vs_state.png", "mqar_steps_vs_state.png"]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in out.iterdir())
    missing = run_in_process(ROOT / "scripts" / "plot_race.py", "--sweep", str(tmp_path / "nowhere"))
    assert missing.returncode == 1 and missing.stderr.startswith("error: --sweep ")
