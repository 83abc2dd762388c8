"""Every declared finding's sweep is a command the lab accepts, and every claim picks its jobs by a setting that
sweep sets: a misspelt override in a claim would match no job and the claim could never hold."""

from __future__ import annotations

import pytest

from attention_lab.findings.catalogue import FINDINGS
from attention_lab.findings.records import override_map
from conftest import compose_config


def first_job(command: tuple[str, ...]) -> list[str]:
    return [o.split(",")[0] for o in command]


@pytest.mark.parametrize("finding", FINDINGS, ids=lambda f: f.name)
def test_each_sweep_composes_and_each_claim_picks_jobs_it_sets(finding):
    swept = set()
    for command in finding.commands:
        cfg = compose_config([*first_job(command), f"seed={finding.seeds[0]}"], return_hydra_config=True)
        swept |= set(override_map(command)) | set(cfg.hydra.sweeper.params or {})
    for claim in finding.claims:
        picked = set(claim.where) | {key for where in getattr(claim, "configurations", {}).values() for key in where}
        picked |= {claim.by} if getattr(claim, "by", "") else set()
        assert picked <= swept, f"{finding.name}: {claim} picks by {picked - swept}, which no sweep sets"
