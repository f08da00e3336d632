"""The probe runner: deadlines, crashes, Ctrl-C, and the cheap package import."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from nccl_doctor.probes import list_probes, run_probes
from nccl_doctor.probes.api import STATUSES


def _alive_with(token: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f"# {token}".encode() in f.read():  # the hang probe's grandchild only
                    found.append(pid)
        except OSError:
            continue
    return found


def test_package_import_is_cheap():
    code = "import sys, nccl_doctor.probes as p; p.list_probes; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_list_probes_names_facts_and_hides_selftests():
    infos = {p.name: p for p in list_probes()}
    assert "host.interfaces" in infos and "collective.local" in infos and "cluster" in infos
    assert not any(name.startswith("selftest.") for name in infos)
    assert "probe_nccl_ifname_matches" in infos["host.interfaces"].facts
    assert all(p.deadline > 0 for p in infos.values())


def test_hanging_probe_reported_soon_after_its_deadline_and_killed():
    token = uuid.uuid4().hex
    start = time.monotonic()
    [result] = run_probes(["selftest.hang"], deadline=1.0, env={"NCCL_DOCTOR_SELFTEST_TOKEN": token})
    elapsed = time.monotonic() - start
    assert result.status == "timeout"
    # its deadline is max(1, 2) s; the slack only absorbs a loaded machine (the probe itself sleeps forever)
    assert elapsed < result.seconds + 8.0 and result.seconds < 2.0 + 8.0
    assert "waiting forever" in result.detail  # what it was doing
    time.sleep(0.2)
    assert _alive_with(token) == [], "the hung probe's own child survived"


def test_segfaulting_probe_reported_as_crashed():
    [result] = run_probes(["selftest.crash"], deadline=5.0)
    assert result.status == "crashed"
    assert "SIGSEGV" in result.detail and "about to segfault" in result.detail


def test_raising_probe_reported_as_failed_with_the_error():
    [result] = run_probes(["selftest.raise"])
    assert result.status == "failed" and "deliberate failure" in result.detail


def test_results_come_in_order_and_on_result_sees_each():
    seen = []
    results = run_probes(["selftest.crash", "selftest.ok"], on_result=seen.append)
    assert [r.name for r in results] == ["selftest.crash", "selftest.ok"]
    assert sorted(r.name for r in seen) == ["selftest.crash", "selftest.ok"]
    assert results[1].facts == {"selftest_ran": True}
    assert all(r.status in STATUSES for r in results)
    assert results[1].to_dict()["name"] == "selftest.ok"


def test_unknown_probe_name_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown probe 'nope'.*host.env"):
        run_probes(["nope"])


def test_ctrl_c_kills_children_and_returns():
    token = uuid.uuid4().hex
    code = ("from nccl_doctor.probes import run_probes\n"
            f"r = run_probes(['selftest.hang'], deadline=60, env={{'NCCL_DOCTOR_SELFTEST_TOKEN': '{token}'}})\n"
            "print(r[0].status, r[0].detail)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 15
    while not _alive_with(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _alive_with(token), "the probe never started"
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=10)
    assert time.monotonic() - start < 8  # versus the probe's 60 s deadline; slack for a loaded machine
    assert out.startswith("skipped interrupted"), (out, err)
    time.sleep(0.2)
    assert _alive_with(token) == []


def test_cluster_probe_is_not_run_here_but_says_how():
    [result] = run_probes(["cluster"])
    assert result.status == "skipped" and "torchrun" in result.detail
