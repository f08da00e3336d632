"""benchmarks/bench_library.py's unseen view of a review round: the round's incidents scored against
the KB of a git revision (``--kb-at``), each leaving out its own thread (``--round``)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from _benchmarks import load_benchmark

ROOT = Path(__file__).resolve().parents[1]
IN_GIT = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--git-dir"], capture_output=True).returncode == 0


def _bench():
    return load_benchmark("bench_library")


def test_a_round_is_scored_leaving_out_its_own_threads(doctor):
    bench = _bench()
    cases = bench.round_cases(doctor, "round-11", knows=False)
    incidents = [i for i in doctor.kb.incidents.values() if i.collected == "round-11"]
    assert len(cases) == len(incidents) > 0
    by_id = {i.id: i for i in incidents}
    for case in cases:
        assert case["exclude"] == [by_id[case["id"]].source]
    # a round collected in parts ("round-8-launch", "round-8-network", ...) is named by its prefix
    assert len(bench.round_cases(doctor, "round-8", knows=False)) == sum(
        i.collected.startswith("round-8-") for i in doctor.kb.incidents.values())
    assert bench.round_cases(doctor, "round-1", knows=False) == []  # not round-11, round-12 ...


@pytest.mark.skipif(not IN_GIT, reason="not a git checkout")
def test_the_kb_of_a_revision_is_extracted(tmp_path):
    bench = _bench()
    folder = bench.kb_at("HEAD", tmp_path)
    assert folder == tmp_path / "kb"
    assert (folder / "causes").is_dir() and (folder / "incidents").is_dir()
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "-r", "--name-only", "HEAD", "kb/causes"],
                             capture_output=True, text=True, check=True).stdout.split()
    assert tracked and all((tmp_path / name).is_file() for name in tracked)


@pytest.mark.skipif(not IN_GIT, reason="not a git checkout")
def test_an_unknown_revision_is_one_line_not_a_traceback(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_library.py"), "--kb-at", "no-such-rev",
                           "--round", "round-11"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr.strip().startswith("no KB at 'no-such-rev':") and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
