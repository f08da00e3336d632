"""Reading logs for hangs: lockstep COLL logs with and without a hang, garbled ones, the tail-only
reading of progress lines, caps on what a file can make the tool keep, one open per file.

The logs are generated small (a few MB); benchmarks/bench_ingest.py runs the same generators at 1 GB."""
from __future__ import annotations

import pickle
import random
import sys
from pathlib import Path

import pytest

import nccl_doctor.ingest as ingest
from nccl_doctor.forensics import analyze
from nccl_doctor.forensics.evidence import MAX_STREAMS
from nccl_doctor.ingest import IngestResult, ingest_paths, ingest_text, read_file

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from bench_ingest import garbled, lockstep  # noqa: E402 - the benchmark's own generators


def report_of(doctor, path) -> tuple[dict, IngestResult]:
    session = doctor.session()
    result = ingest_paths(session, [str(path)])
    return session.report(), result


def test_lockstep_log_with_one_rank_behind_names_it(doctor, tmp_path):
    path = tmp_path / "job.log"
    lockstep(str(path), 3 << 20, ranks=16, behind=5)
    report, result = report_of(doctor, path)
    assert report["hang"]["culprit"]["ranks"] == [5] and report["hang"]["culprit"]["hosts"] == ["gpu-node-00"]
    assert report["facts"]["hang_culprit_rank"]["value"] == 5
    assert result.files == [str(path)] and not result.partial


@pytest.mark.parametrize("make", ["healthy", "garbled"])
def test_healthy_and_garbled_logs_claim_no_hang(doctor, tmp_path, make):
    """Before: a healthy lockstep log cut mid-collective named half the ranks as culprits, and a
    garbled one claimed whole nodes missing ("faulty GPU / node" at 0.35) with no error in it."""
    path = tmp_path / f"{make}.log"
    if make == "healthy":
        lockstep(str(path), 3 << 20, ranks=16, behind=None)
    else:
        garbled(str(path), 3 << 20)
    report, _ = report_of(doctor, path)
    assert "hang" not in report
    assert not any(name.startswith("hang_") for name in report["facts"])
    assert all(d["confidence"] <= 0.3 for d in report["diagnoses"])


def test_garbled_opcounts_never_name_a_culprit_even_beside_a_timeout(tmp_path):
    path = tmp_path / "garbled.log"
    garbled(str(path), 2 << 20)
    with open(path, "a") as handle:  # a failure line makes it a hang; the opCounts still say nothing
        handle.write("[rank3]:[E1109 16:13:20.1 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught collective "
                     "operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
                     "Timeout(ms)=600000) ran for 600038 milliseconds before timing out.\n")
    rep = analyze([read_file(str(path)).scan])
    assert not any(g.source == "nccl_opcount" for g in rep.groups)
    assert any("go backwards" in n or "contradict" in n for n in rep.notes)
    assert rep.culprit is None or rep.culprit.reason != "never_joined"  # no one is "behind" by position
    assert not any(g.behind for g in rep.groups)


def test_progress_lines_are_read_in_the_tail_only(tmp_path, monkeypatch):
    """A rank that stopped long before the end is still named (its communicator's Init COMPLETE says
    it exists, the tail shows no collective of it), though the middle's opCount lines are never parsed."""
    monkeypatch.setattr(ingest, "TAIL_BYTES", 64 << 10)
    path = tmp_path / "job.log"
    lockstep(str(path), 4 << 20, ranks=8, behind=6)
    text = path.read_bytes()
    cut = len(text) // 3  # from a third of the way on, rank 6 prints nothing more (the others time out)
    kept = [line for line in text[cut:].split(b"\n") if not line.startswith(b"[rank6]:")]
    path.write_bytes(text[:cut] + b"\n".join(kept))
    scan = read_file(str(path), chunk_bytes=256 << 10).scan
    newest = {s.rank: c["opCount"] for s in scan.streams for c in s.comms.values() if "opCount" in c}
    assert 6 not in newest and len(newest) == 7
    rep = analyze([scan])
    assert rep.culprit.ranks == [6], rep.culprit


def test_what_a_file_can_make_the_tool_keep_is_capped(tmp_path):
    """Distinct processes, communicators, hosts and opCounts do not grow what is kept past the caps."""
    rng = random.Random(1)
    sizes = []
    for n in (3_000, 30_000):
        path = tmp_path / f"many{n}.log"
        with open(path, "w") as handle:
            for i in range(n):
                host, pid = f"host-{i}", 10_000 + i
                handle.write(f"{host}:{pid}:{pid} [0] NCCL WARN NET/IB : Got completion from peer with status=12\n")
                for c in range(3):
                    handle.write(f"{host}:{pid}:{pid} [0] NCCL INFO AllReduce: opCount {rng.getrandbits(40):x} sendbuff 0x1 "
                                 f"recvbuff 0x1 count 1 datatype 7 op 0 root 0 comm 0x{rng.getrandbits(48):x} [nranks=4] stream 0x1\n")
        scan = read_file(str(path)).scan
        assert len(scan.streams) <= MAX_STREAMS
        assert all(len(s.comms) <= 64 and len(s.events) <= 6 for s in scan.streams)
        sizes.append(len(pickle.dumps(scan)))
        if n > MAX_STREAMS:
            assert any("processes in one file" in note for note in scan.notes)
    assert sizes[1] < sizes[0] * 2, sizes  # ten times the log, not ten times the memory


def test_each_file_is_opened_once(doctor, tmp_path):
    for rank in range(3):
        (tmp_path / f"rank{rank}.log").write_text(f"[rank{rank}]: NCCL WARN something\n" * 100)
    (tmp_path / "nccl_trace_rank_0").write_bytes(pickle.dumps({"pg_status": {}, "entries": []}))
    opened: dict[str, int] = {}

    def hook(event, args):
        if event == "open" and isinstance(args[0], str) and args[0].startswith(str(tmp_path)):
            opened[args[0]] = opened.get(args[0], 0) + 1

    sys.addaudithook(hook)
    ingest_paths(doctor.session(), [str(tmp_path)])
    assert opened and all(count == 1 for count in opened.values()), opened
    assert len(opened) == 4


def test_uploaded_text_goes_the_same_way_as_a_file(doctor, tmp_path):
    path = tmp_path / "job.log"
    lockstep(str(path), 1 << 20, ranks=8, behind=2)
    by_file, by_text = doctor.session(), doctor.session()
    ingest_paths(by_file, [str(path)])
    ingest_text(by_text, path.read_text(), name="job.log")
    assert by_file.report() == by_text.report()


def test_progress_reports_bytes_and_the_end(doctor, tmp_path):
    path = tmp_path / "job.log"
    lockstep(str(path), 2 << 20, ranks=8, behind=2)
    seen = []
    ingest_paths(doctor.session(), [str(path)], progress=seen.append)
    assert seen and seen[-1].done_bytes == path.stat().st_size and seen[-1].total_bytes == path.stat().st_size
    assert all(a.done_bytes <= b.done_bytes for a, b in zip(seen, seen[1:]))


def test_both_prefilters_find_the_same_evidence(tmp_path):
    """Without hyperscan one alternation of the needles finds the lines: slower, the same result."""
    path = tmp_path / "job.log"
    lockstep(str(path), 2 << 20, ranks=8, behind=3)
    with open(path, "a") as handle:
        handle.write("[rank3]:2024-11-09 16:00:00,000 ERROR torch.OutOfMemoryError: CUDA out of memory.\n"
                     "node-x:1:1 [0] NCCL WARN Cuda failure 'out of memory'\n")
    fast = read_file(str(path), chunk_bytes=256 << 10).scan
    plain = read_file(str(path), chunk_bytes=256 << 10, use_hyperscan=False).scan
    assert fast.to_plain() == plain.to_plain()
    assert analyze([fast]).to_dict() == analyze([plain]).to_dict()


def test_progress_line_goes_to_stderr_only_for_big_logs(capsys):
    from nccl_doctor.cli import _ProgressLine
    from nccl_doctor.ingest import Progress

    line = _ProgressLine()
    line(Progress(10 << 20, 100 << 20, 0, 1, 1.0, "small.log"))  # under 200 MB: nothing shown
    assert capsys.readouterr().err == ""
    line(Progress(300 << 20, 1200 << 20, 0, 1, 2.0, "big.log"))
    err = capsys.readouterr()
    assert "300 of 1,200 MB" in err.err and "150 MB/s" in err.err and "6 s left" in err.err and err.out == ""
    line.clear()


@pytest.mark.parametrize("name", ["ingest", "logs", "log_paths", "prefilter", "scanner", "workers", "forensics",
                                  "forensics.analyze", "forensics.evidence", "forensics.frdump", "forensics.handlers",
                                  "forensics.hang", "forensics.plainpickle", "forensics.scan"])
def test_public_names_exist_and_are_documented(name):
    import importlib
    import inspect

    module = importlib.import_module(f"nccl_doctor.{name}")
    assert module.__doc__ and len(module.__all__) == len(set(module.__all__))
    for attr in module.__all__:
        obj = getattr(module, attr)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"{name}.{attr} has no docstring"
