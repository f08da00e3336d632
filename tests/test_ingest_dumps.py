"""Flight Recorder dumps are hostile input: the plain-data pickle reader and the dump reader stop
every trick with a reason naming the file, in seconds and bounded memory, and the other ranks'
dumps are still used."""
from __future__ import annotations

import json
import pickle
import random
import struct
import subprocess
import sys
import time

import pytest

from nccl_doctor.errors import DumpProblem, UnsafeDump
from nccl_doctor.forensics import analyze_paths, load_dump
from nccl_doctor.forensics.plainpickle import load_plain

DIAGNOSE = [sys.executable, "-m", "nccl_doctor.cli"]


def u(text: str) -> bytes:
    raw = text.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def pickle_of(body: bytes) -> bytes:
    return b"\x80\x02" + body + b"."


def dump_with(key_path: list[str], value: bytes, prefix: bytes = b"") -> bytes:
    """A dump {"pg_status": {}, k1: {k2: ... value}} written opcode by opcode."""
    body = prefix + b"}" + u("pg_status") + b"}" + b"s"
    inner = value
    for key in reversed(key_path[1:]):
        inner = b"}" + u(key) + inner + b"s"
    return pickle_of(body + u(key_path[0]) + inner + b"s")


def nested(depth: int) -> bytes:
    return b"]" * depth + b"a" * (depth - 1)


def laughs(depth: int) -> bytes:
    """level k+1 = [level k, level k]: 2**depth leaves from a few hundred bytes."""
    ops = b"]K\x07aq\x000"
    for k in range(depth):
        ops += b"]" + b"h" + bytes([k % 256]) + b"a" + b"h" + bytes([k % 256]) + b"a" + b"q" + bytes([(k + 1) % 256]) + b"0"
    return ops + b"h" + bytes([depth % 256])


def real_like_dump(rank: int, pending: int) -> dict:
    entries = [{"collective_seq_id": s, "pg_id": 0, "process_group": ["0", "default_pg"],
                "profiling_name": "nccl:all_reduce", "input_sizes": [[1024]], "input_dtypes": ["Float"],
                "state": "completed" if s < pending else "scheduled",
                "frames": [{"name": "train_step", "filename": "train.py", "line": 42}]} for s in range(1, pending + 1)]
    return {"version": "2.4", "pg_config": {"0": {"desc": "default_pg", "ranks": "[0, 1, 2, 3]"}},
            "pg_status": {"0": {"last_enqueued_collective": pending, "last_completed_collective": pending - 1}},
            "entries": entries}


# ----------------------------------------------------------------- the plain-data reader
@pytest.mark.parametrize("protocol", range(0, 6))
def test_plain_reader_reads_what_pickle_writes(protocol):
    rng = random.Random(protocol)

    def value(depth=0):
        kind = rng.randrange(9 if depth < 3 else 6)
        if kind == 6:
            return [value(depth + 1) for _ in range(rng.randrange(4))]
        if kind == 7:
            return tuple(value(depth + 1) for _ in range(rng.randrange(4)))
        if kind == 8:
            return {str(i): value(depth + 1) for i in range(rng.randrange(4))}
        return [None, True, rng.randrange(-2**70, 2**70), rng.random(), "é中\n'\"" * rng.randrange(3),
                "x" * rng.randrange(70000)][kind]

    for _ in range(30):
        data = {"entries": [value() for _ in range(8)], "pg_status": {"0": {"x": 1}}}
        shared = [1, 2]
        data["shared"] = [shared, shared]
        assert load_plain(pickle.dumps(data, protocol=protocol)) == data


def test_code_is_never_run(tmp_path):
    import os

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path}/pwned",))

    for protocol in range(0, 6):
        with pytest.raises(UnsafeDump, match="refusing to load"):
            load_plain(pickle.dumps({"entries": [Evil()]}, protocol=protocol))
    assert not (tmp_path / "pwned").exists()


def test_deep_nesting_stops_with_a_reason():
    """Before: a pickle nested 10,000 deep ended in a RecursionError traceback."""
    with pytest.raises(DumpProblem, match="nested more than"):
        load_plain(dump_with(["pg_config", "0", "ranks"], nested(10_000)))
    with pytest.raises(DumpProblem, match="nested more than"):
        load_plain(pickle_of(b"(" * 10_000))


def test_limits_on_values_and_time():
    data = pickle.dumps({"entries": list(range(50_000))}, protocol=2)
    with pytest.raises(DumpProblem, match="more than 10,000 values"):
        load_plain(data, max_items=10_000)
    with pytest.raises(DumpProblem, match="took more than"):
        load_plain(data, max_seconds=0)
    for broken in (data[:-1], data[: len(data) // 2], b"\x80\x02\xff", b"\x80\x02]]s."):
        with pytest.raises(DumpProblem):
            load_plain(broken)


# ------------------------------------------------------------------- hostile dump files
_MEASURE = """
import json, resource, subprocess, sys, time
start = time.monotonic()
done = subprocess.run(json.loads(sys.argv[1]), capture_output=True, timeout=float(sys.argv[2]))
print(json.dumps({"rc": done.returncode, "out": done.stdout.decode("utf-8", "replace"),
                  "err": done.stderr.decode("utf-8", "replace"), "seconds": time.monotonic() - start,
                  "peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def _cli(*args: str, timeout: float = 60) -> tuple[subprocess.CompletedProcess, float, float]:
    """The CLI, its wall time and its peak RSS in MB. A small helper process starts it: a child
    forked from the test run would count the test run's own memory in its peak."""
    helper = subprocess.run([sys.executable, "-c", _MEASURE, json.dumps([*DIAGNOSE, *args]), str(timeout)],
                            capture_output=True, timeout=timeout + 30, check=True)
    got = json.loads(helper.stdout)
    done = subprocess.CompletedProcess(DIAGNOSE, got["rc"], got["out"].encode(), got["err"].encode())
    return done, got["seconds"], got["peak_mb"]


def hostile_dumps(folder) -> dict[str, bytes]:
    big = u("x" * (1 << 20)) + b"q\x01" + b"0"
    row = b"](" + b"K\x01" * 100_000 + b"eq\x020"
    sizes = b"](" + b"h\x02" * 1500 + b"e"  # 2000 entries x 1500 references: under the value limit
    entry = (b"}" + u("collective_seq_id") + b"K\x05s" + u("profiling_name") + b"h\x01s" + u("state") + u("scheduled")
             + b"s" + u("input_sizes") + sizes + b"s" + u("frames") + b"](" + (b"}" + u("name") + b"h\x01s" + u("filename")
             + b"h\x01sa") * 0 + b"e" + b"s")
    frames = b"](" + b"}" + u("name") + b"h\x01s" + u("filename") + b"h\x01s" + b"e"
    dup = pickle_of(big + row + b"}" + u("pg_status") + b"}" + u("0") + b"}" + u("last_enqueued_collective") + b"K\x05s"
                    + u("last_completed_collective") + b"K\x04s" + b"s" + b"s" + u("entries") + b"](" + entry * 2000
                    + b"e" + b"s" + u("frames") + frames + b"s")
    return {
        "nccl_trace_rank_0": dump_with(["pg_config", "0", "ranks"], nested(10_000)),  # RecursionError before
        "nccl_trace_rank_1": dup,  # >120 s and >2.7 GB before (killed)
        "nccl_trace_rank_2": dump_with(["pg_config", "0", "ranks"], laughs(24)),  # 26 s, 390 MB before
        "nccl_trace_rank_3": dump_with(["pg_config", "0", "ranks"], laughs(200)),
        "nccl_trace_rank_4.json": json.dumps({"pg_status": {"0": {"last_enqueued_collective": 5}}, "entries": [
            {"collective_seq_id": 5, "profiling_name": float("nan"), "state": "scheduled", "input_sizes": float("nan"),
             "frames": [{"name": float("nan")}]}]}).encode(),  # AttributeError before
        "nccl_trace_rank_5.json": b'{"pg_status": {}, "entries": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        "nccl_trace_rank_6": pickle.dumps(real_like_dump(6, 7))[:-40],  # truncated
    }


def test_each_hostile_dump_is_reported_or_read_safely(tmp_path):
    _cli("--symptom", "hang", "--json")  # the KB's cache may need rebuilding: not part of any dump's time
    for name, data in hostile_dumps(tmp_path).items():
        (tmp_path / name).write_bytes(data)
        done, seconds, peak = _cli("--log", str(tmp_path / name), "--json", "--no-input")
        err = done.stderr.decode()
        assert "Traceback" not in err, (name, err)
        assert seconds < 20 and peak < 400, (name, seconds, peak)
        if done.returncode == 2:
            assert err.count("\n") == 1 and name in err, (name, err)
        else:
            assert done.returncode == 0, (name, err)
            json.loads(done.stdout)
        (tmp_path / name).unlink()


def test_broken_dumps_are_reported_and_the_others_used(tmp_path):
    for rank in range(4):
        if rank == 2:
            continue  # rank 2 never entered collective 7: its dump is the hostile one
        (tmp_path / f"nccl_trace_rank_{rank}").write_bytes(pickle.dumps(real_like_dump(rank, 7)))
    (tmp_path / "nccl_trace_rank_2").write_bytes(dump_with(["pg_config", "0", "ranks"], nested(10_000)))
    (tmp_path / "nccl_trace_rank_5").write_bytes(hostile_dumps(tmp_path)["nccl_trace_rank_4.json"])
    rep = analyze_paths([str(tmp_path)])
    assert any("nccl_trace_rank_2" in p and "nested more than" in p for p in rep.problems)
    hang = rep.to_dict()
    assert hang["waiting_ranks"][:3] == [0, 1, 3] and hang["seq"] == 7
    done, _, _ = _cli("--log", str(tmp_path), "--json", "--no-input")
    assert done.returncode == 0 and "skipped" in done.stderr.decode() and "nccl_trace_rank_2" in done.stderr.decode()
    out = json.loads(done.stdout)
    assert [s["path"] for s in out["ingest"]["skipped"]] == [str(tmp_path / "nccl_trace_rank_2")]


def test_values_taken_from_a_dump_are_bounded(tmp_path):
    """Strings, sizes and frames are read by shape and cut: sharing tricks cannot grow the report."""
    path = tmp_path / "nccl_trace_rank_1"
    path.write_bytes(hostile_dumps(tmp_path)["nccl_trace_rank_1"])
    hang = analyze_paths([str(path)]).to_dict()
    assert len(json.dumps(hang)) < 20_000
    data = load_dump(str(path))
    assert isinstance(data, dict)
