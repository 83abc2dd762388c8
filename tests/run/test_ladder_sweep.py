"""``hydra/sweeper=ladder`` end to end, on a tiny sweep that nothing solves: rung 0 runs the product, rung 1 runs each
cell's best search value of rung 0 (the lowest val/loss: ``direction=minimize``) at the next budget, numbered on;
ladder.json records it; a resume plans the same jobs under the same numbers; a bad setting is refused in one line
before any dir exists."""

from __future__ import annotations

import json
import shutil

import yaml

from conftest import TINY_JOB, run_train, run_train_following_exec

LADDER = ["hydra/sweeper=ladder", "hydra.sweeper.search=lr", "hydra.sweeper.rungs=[2,4]",
          "hydra.sweeper.keep=[null,1]", "hydra.sweeper.direction=minimize", "optimized_metric=val/loss"]
JOB = [o for o in TINY_JOB if not o.startswith("max_steps=")]  # the ladder sets max_steps per rung
LRS = ["0.0003", "0.01"]


def job_overrides(sweep_dir, num):
    return yaml.safe_load((sweep_dir / str(num) / ".hydra" / "overrides.yaml").read_text())


def test_a_ladder_runs_the_best_value_of_each_unsolved_cell_at_the_next_budget_and_resumes_the_same(tmp_path):
    sweep_dir = tmp_path / "sweep"
    run_train(sweep_dir, *LADDER, f"lr={','.join(LRS)}", "seed=1,2", *JOB, multirun=True)
    assert sorted(int(p.name) for p in sweep_dir.iterdir() if p.is_dir()) == [0, 1, 2, 3, 4, 5]

    metrics = {num: json.loads((sweep_dir / str(num) / "metrics.json").read_text()) for num in range(6)}
    assert all(m["steps_to_solve"] is None for m in metrics.values())  # nothing solves in 2 or 4 steps
    expected = []  # per cell (seed=1: jobs 0, 1; seed=2: jobs 2, 3), the lr of the lower val/loss, the first on a tie
    for first in (0, 2):
        losses = [metrics[first + i]["val/loss"] for i in range(2)]
        expected.append(LRS[losses.index(min(losses))])
    for num in range(4):
        assert job_overrides(sweep_dir, num)[-2:] == [f"lr={LRS[num % 2]}", "max_steps=2"]
    for num, seed, lr in ((4, 1, expected[0]), (5, 2, expected[1])):
        overrides = job_overrides(sweep_dir, num)
        assert f"seed={seed}" in overrides and overrides[-2:] == [f"lr={lr}", "max_steps=4"]
        assert metrics[num]["global_step"] == 4

    ladder = json.loads((sweep_dir / "ladder.json").read_text())
    assert (ladder["search"], ladder["rungs"], ladder["keep"], ladder["rungs_done"]) == ("lr", [2, 4], [None, 1], 2)
    assert (ladder["optimized_metric"], ladder["direction"]) == ("val/loss", "minimize")
    assert [cell["solved"] for cell in ladder["cells"]] == [False, False]
    assert "seed=1" in ladder["cells"][0]["overrides"] and "seed=2" in ladder["cells"][1]["overrides"]
    assert [[(j["job"], j["rung"], j["search_value"], j["max_steps"], j["steps_to_solve"]) for j in cell["jobs"]]
            for cell in ladder["cells"]] == [
        [(0, 0, LRS[0], 2, None), (1, 0, LRS[1], 2, None), (4, 1, expected[0], 4, None)],
        [(2, 0, LRS[0], 2, None), (3, 0, LRS[1], 2, None), (5, 1, expected[1], 4, None)]]
    assert ladder["cells"][1]["jobs"][2]["metric"] == metrics[5]["val/loss"]

    # Job 5 never ran: the resume takes rungs 0's results from their metrics.json and plans job 5 again.
    shutil.rmtree(sweep_dir / "5")
    kept = (sweep_dir / "4" / "metrics.json").read_bytes()
    again = run_train_following_exec(f"resume={sweep_dir}")
    assert again.returncode == 0, again.stderr[-3000:]
    assert job_overrides(sweep_dir, 5)[-2:] == [f"lr={expected[1]}", "max_steps=4"]
    assert (sweep_dir / "4" / "metrics.json").read_bytes() == kept
    assert json.loads((sweep_dir / "ladder.json").read_text())["cells"] == ladder["cells"][:1] + [
        {**ladder["cells"][1], "jobs": ladder["cells"][1]["jobs"][:2] + [
            {**ladder["cells"][1]["jobs"][2],
             "metric": json.loads((sweep_dir / "5" / "metrics.json").read_text())["val/loss"]}]}]


def test_a_ladder_with_rungs_out_of_order_is_refused_before_anything_runs(tmp_path):
    sweep_dir = tmp_path / "sweep"
    proc = run_train(sweep_dir, *LADDER, "hydra.sweeper.rungs=[4,2]", f"lr={','.join(LRS)}", *JOB,
                     multirun=True, check=False)
    assert proc.returncode == 1
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: hydra.sweeper.rungs=[4, 2] is invalid: it must list each rung's max_steps")
    assert not sweep_dir.exists()
