"""The packaged incident library as case-based evidence: every incident is found for its own
description, and the seed cases of the shared dev set get similar incidents from the one-shot CLI.

How well the library scores leave-one-out is tests/test_real_cases.py's floor (each incident left
out while it is scored); benchmarks/bench_library.py prints it with and without case-based evidence.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml


#: ../shared/eval beside the checkout (or beside a folder of worktrees).
SHARED = next((p / "shared" / "eval" for p in Path(__file__).resolve().parents if (p / "shared" / "eval").is_dir()),
              Path(__file__).resolve().parents[2] / "shared" / "eval")


def _told(doctor, incident, **options):
    session = doctor.session(**options)
    session.tell(incident.reporter)
    if incident.log:
        session.add_log(incident.log.splitlines(), name=incident.id)
    return session


def test_every_incident_is_similar_to_its_own_description(doctor):
    incidents = list(doctor.kb.incidents.values())
    assert len(incidents) >= 200
    missing = [i.id for i in incidents if i.id not in {s.id for s in _told(doctor, i).similar()}]
    assert not missing, f"{len(missing)} incidents not among their own similar incidents: {missing[:10]}"


@pytest.mark.skipif(not (SHARED / "dev.yaml").exists(), reason=f"{SHARED} not present (no ../shared beside the checkout)")
def test_seed_cases_get_similar_incidents_from_the_one_shot(tmp_path):
    seeds = [c for c in yaml.safe_load((SHARED / "dev.yaml").read_text()) if c["id"].startswith("seed-")]
    assert len(seeds) == 5
    for case in seeds:
        args = [sys.executable, "-m", "nccl_doctor.cli", "--symptom", case["symptom"], "--json", "--no-probes"]
        if case.get("log"):
            (tmp_path / "case.log").write_text(case["log"])
            args += ["--log", str(tmp_path / "case.log")]
        done = subprocess.run(args, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr
        similar = json.loads(done.stdout)["similar"]
        assert similar, case["id"]
        assert all(s["source"].startswith("https://") and s["summary"] and s["cause"] for s in similar)
