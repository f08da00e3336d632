"""The cluster probe with real fault injection: local ranks over gloo on CPU.

(a) a rank that never joins, (e) a rank with a diverging NCCL_* setting, a rank that hangs
before a collective, and the local collective probe end to end.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from nccl_doctor.probes import apply_results, load_report, run_probes
from nccl_doctor.probes.cluster_ops import bus_factor
from nccl_doctor.probes.collective import launch_local

pytest.importorskip("torch", reason="the collective probes need torch")
pytestmark = pytest.mark.slow
DEADLINE = 3.0
SLACK = 8.0  # a loaded two-core machine; the point is that nobody waits for the hung rank


def _report(tmp_path: Path, world: int, limit: float = 60.0, **kw) -> dict:
    out = tmp_path / "out"
    procs = launch_local(world, str(out), deadline=DEADLINE, backend="gloo", **kw)
    report = out / "REPORT.json"
    stop = time.monotonic() + limit
    try:
        while not report.exists() and time.monotonic() < stop:
            time.sleep(0.05)
        assert report.exists(), "rank 0 wrote no report: " + "; ".join(
            p.read_text()[:300] for p in sorted(out.glob("rank*.json")))
        return json.loads(report.read_text())
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_bus_factor_matches_nccl_tests():
    assert bus_factor("all_reduce", 8) == pytest.approx(1.75)
    assert bus_factor("all_gather", 4) == pytest.approx(0.75)
    assert bus_factor("broadcast", 8) == bus_factor("send_recv", 8) == 1.0


def test_a_rank_that_never_joins_is_named_within_the_deadline(tmp_path, doctor):
    report = _report(tmp_path, 3, skip_ranks=(2,))
    assert report["missing_ranks"] == [2]
    assert report["culprits"][0]["rank"] == 2 and "never joined" in report["culprits"][0]["reason"]
    assert report["written"] - report["rendezvous_started"] < DEADLINE + SLACK
    assert any("ranks 2" in f for f in report["findings"])
    # every rank that ran wrote its own file first
    assert sorted(p.name for p in (tmp_path / "out").glob("rank*.json")) == ["rank0.json", "rank1.json"]
    session = doctor.session()
    session.tell("training hangs at init")
    apply_results(session, load_report(str(tmp_path / "out" / "REPORT.json")))
    assert "rendezvous_ranks_missing" in [d.id for d in session.diagnoses()[:3]]


def test_e_diverging_nccl_setting_reported_with_culprit(tmp_path, doctor):
    report = _report(tmp_path, 3, extra_env={2: {"NCCL_IB_DISABLE": "1"}})
    diff = next(d for d in report["differences"] if d["what"] == "NCCL_IB_DISABLE")
    assert diff["odd_ranks"] == [2] and diff["values"]["2"] == "1"
    assert report["facts"]["probe_cluster_nccl_env_differs"] is True
    assert report["culprits"][0]["rank"] == 2
    assert report["facts"]["probe_cluster_collective_ok"] is True  # gloo ignores it; the difference is still flagged
    ops = {o["op"]: o for o in report["collectives"]["0"]}
    assert set(ops) == {"init", "barrier", "all_reduce", "all_gather", "broadcast", "send_recv"}
    assert ops["all_reduce"]["correct"] and ops["all_reduce"]["busbw_gbps"] == pytest.approx(
        ops["all_reduce"]["algbw_gbps"] * 4 / 3, rel=0.05, abs=0.002)
    session = doctor.session()
    session.tell("multi-node training hangs")
    apply_results(session, load_report(str(tmp_path / "out" / "REPORT.json")))
    assert session.diagnoses()[0].id == "dist_env_inconsistent"


def test_rank_hanging_before_a_collective_is_the_culprit(tmp_path):
    report = _report(tmp_path, 2, extra_env={1: {"NCCL_DOCTOR_PROBE_INJECT": "hang:all_reduce:1"}})
    culprit = report["culprits"][0]
    assert culprit["rank"] == 1 and "never reached all_reduce" in culprit["reason"]
    hung = next(o for o in report["collectives"]["0"] if o["op"] == "all_reduce")
    assert hung["status"] == "timeout"
    assert report["written"] - hung["started_at"] < DEADLINE + SLACK
    assert report["facts"]["probe_cluster_failed_op"] == "all_reduce"


def test_local_collective_probe_runs_gloo_here():
    [result] = run_probes(["collective.local"])
    assert result.status == "ok", (result.detail, result.findings)
    assert result.facts["probe_local_collective_ok"] is True and result.facts["probe_local_backend"] == "gloo"
    assert result.facts["probe_local_busbw_gbps"] > 0
    assert any("all_reduce busbw" in f for f in result.findings)


def test_e_version_difference_names_the_odd_rank(doctor):
    from nccl_doctor.probes.cluster_compare import compare

    def info(rank, host, nccl):
        return {"rank": rank, "host": host, "env": {}, "interfaces": [], "shm_mb": 1000, "gpus": 8,
                "versions": {"torch": "2.4.0", "cuda": "12.4", "nccl": nccl}, "facts": {}}

    infos = {0: info(0, "n0", "2.21.5"), 1: info(1, "n1", "2.21.5"), 2: info(2, "n2", "2.18.1")}
    facts, findings, diffs = compare(infos)
    assert facts["probe_cluster_versions_differ"] is True
    assert diffs[0]["odd_ranks"] == [2] and "rank 2 (n2): '2.18.1'" in findings[0]
    session = doctor.session()
    session.tell("multi-node training hangs at init")
    session.set_fact("probe_cluster_versions_differ", True, source="probe", detail="cluster")
    assert session.diagnoses()[0].id == "version_mismatch_across_nodes"
