"""Paths and sources handed to ``--log``: symlink loops, caps, unreadable files and folders,
binary files among logs, compressed logs, FIFOs and devices that never end.

Every case ends with a one-line message or a note, never a traceback or a hung tool."""
from __future__ import annotations

import ctypes
import gzip
import json
import os
import subprocess
import sys
import threading
import time

import pytest

from nccl_doctor import load_doctor
from nccl_doctor.ingest import ingest_paths
from nccl_doctor.log_paths import expand, short_names
from nccl_doctor.logs import LogProblem

DIAGNOSE = [sys.executable, "-m", "nccl_doctor.cli"]
VERSION = "node1:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"


def run(*args: str, drop_dac: bool = False, timeout: float = 60) -> subprocess.CompletedProcess:
    """The CLI; with ``drop_dac`` it runs without the power to read what its permissions deny
    (root keeps its uid but loses CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH)."""
    return subprocess.run([*DIAGNOSE, *args], capture_output=True, timeout=timeout,
                          preexec_fn=_drop_dac if drop_dac else None)


def _drop_dac() -> None:
    if os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
            if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
                os._exit(99)


def one_line_error(done: subprocess.CompletedProcess) -> str:
    err = done.stderr.decode().strip().splitlines()
    assert done.returncode == 2 and len(err) == 1 and "Traceback" not in done.stderr.decode(), done.stderr.decode()
    return err[0]


# ------------------------------------------------------------------------------- expansion
def test_symlink_loops_end_and_every_log_is_found_once(tmp_path):
    logs = tmp_path / "logs"
    (logs / "a" / "b").mkdir(parents=True)
    (logs / "a" / "rank0.log").write_text(VERSION)
    (logs / "a" / "b" / "rank1.log").write_text(VERSION)
    os.symlink(logs, logs / "a" / "b" / "up")  # a loop back to the top
    os.symlink(logs / "a", logs / "a" / "again")  # and a second way into the same folder
    for args in ([str(logs)], [f"{logs}/**/*.log"]):
        found = expand(args)
        assert sorted(os.path.basename(f) for f in found.files) == ["rank0.log", "rank1.log"], args


def test_recursive_glob_over_a_symlink_loop_stops_quickly(tmp_path):
    """Before: glob.glob('**', recursive=True) followed the loops (118k paths after 60 s, killed)."""
    root = tmp_path / "r"
    root.mkdir()
    for name in "abc":
        (root / name).mkdir()
        (root / name / f"{name}.log").write_text(VERSION)
        for other in "abc":
            os.symlink(root / other, root / name / f"to_{other}")
    done = run("--log", f"{root}/**/*.log", "--json", "--no-input", timeout=30)
    out = json.loads(done.stdout)
    assert sorted(os.path.basename(f) for f in out["ingest"]["files"]) == ["a.log", "b.log", "c.log"]


def test_file_count_is_capped_and_said(tmp_path, monkeypatch):
    import nccl_doctor.log_paths as log_paths

    monkeypatch.setattr(log_paths, "MAX_FILES", 5)
    for i in range(12):
        (tmp_path / f"rank{i}.log").write_text(VERSION)
    found = expand([str(tmp_path)])
    assert len(found.files) == 5 and any("stopped listing after 5 files" in n for n in found.notes)


def test_arguments_that_name_nothing_are_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    for arg, message in ((tmp_path / "nope.log", "no such file"), (tmp_path / "*.nope", "no file matches"),
                         (tmp_path / "empty", "directory has no files")):
        with pytest.raises(LogProblem, match=message):
            expand([str(arg)])


def test_short_names_tell_files_apart():
    names = short_names(["/a/attempt_0/0/stderr.log", "/a/attempt_0/1/stderr.log", "/x/rank0.log", "-"])
    assert names == {"/a/attempt_0/0/stderr.log": "0/stderr.log", "/a/attempt_0/1/stderr.log": "1/stderr.log",
                     "/x/rank0.log": "rank0.log", "-": "stdin"}


# ------------------------------------------------------------------------ unusable inputs
def test_binary_file_in_a_log_folder_is_skipped_with_a_note(tmp_path):
    """Before: one core dump among the logs made the whole run exit 2."""
    (tmp_path / "rank0.log").write_text(VERSION)
    (tmp_path / "core.1234").write_bytes(bytes(range(256)) * 64)
    done = run("--log", str(tmp_path), "--json", "--no-input")
    assert done.returncode == 0, done.stderr.decode()
    out = json.loads(done.stdout)
    assert out["facts"]["nccl_version"]["value"] == "2.21.5"
    assert [s["path"] for s in out["ingest"]["skipped"]] == [str(tmp_path / "core.1234")]
    assert "binary" in out["ingest"]["skipped"][0]["reason"]
    assert done.stderr.decode().count("\n") == 1 and "skipped" in done.stderr.decode()


def test_unreadable_file_is_said_not_silently_skipped(tmp_path):
    (tmp_path / "rank0.log").write_text(VERSION)
    secret = tmp_path / "rank1.log"
    secret.write_text(VERSION)
    secret.chmod(0)
    done = run("--log", str(tmp_path), "--json", "--no-input", drop_dac=True)
    if done.returncode == 99:
        pytest.skip("cannot drop the capability to read anything here")
    out = json.loads(done.stdout)
    assert out["ingest"]["skipped"] == [{"path": str(secret), "reason": "cannot open: permission denied"}]
    assert "permission denied" in done.stderr.decode()


@pytest.mark.parametrize("pattern", ["locked/rank0.log", "locked/*.log", "locked"])
def test_path_under_an_unreadable_folder_is_one_line(tmp_path, pattern):
    """Before: a path or glob under a folder without permission ended in a PermissionError traceback."""
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "rank0.log").write_text(VERSION)
    locked.chmod(0)
    try:
        done = run("--log", str(tmp_path / pattern), "--no-input", drop_dac=True)
        if done.returncode == 99:
            pytest.skip("cannot drop the capability to read anything here")
        assert "permission denied" in one_line_error(done)
        # with another log beside it, the run goes on and says what it skipped
        (tmp_path / "ok.log").write_text(VERSION)
        done = run("--log", str(tmp_path / pattern), str(tmp_path / "ok.log"), "--json", "--no-input", drop_dac=True)
        assert done.returncode == 0 and json.loads(done.stdout)["facts"]["nccl_version"]["value"] == "2.21.5"
        assert "skipped" in done.stderr.decode() and "permission denied" in done.stderr.decode()
    finally:
        locked.chmod(0o755)


def test_refused_dump_as_the_only_input_says_why(tmp_path):
    """Before: exit 0 and "No cause raised yet" for a pickle that was refused (issue 16)."""
    import pickle

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path}/pwned",))

    bad = tmp_path / "nccl_trace_rank_0"
    bad.write_bytes(pickle.dumps({"version": "2.10", "entries": [Evil()], "pg_status": {}}, protocol=2))
    line = one_line_error(run("--log", str(bad), "--no-input"))
    assert "nccl_trace_rank_0" in line and "refusing to load posix.system" in line
    assert not (tmp_path / "pwned").exists()


def test_gzip_logs_are_read_and_zstd_is_refused_with_advice(tmp_path):
    with gzip.open(tmp_path / "rank0.log.gz", "wt") as handle:
        handle.write("filler\n" * 1000 + VERSION)
    out = json.loads(run("--log", str(tmp_path / "rank0.log.gz"), "--json", "--no-input").stdout)
    assert out["facts"]["nccl_version"]["value"] == "2.21.5"
    assert out["facts"]["nccl_version"]["source"]["detail"] == "rank0.log.gz:1001"
    (tmp_path / "rank1.log.zst").write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 64)
    assert "zstd -d" in one_line_error(run("--log", str(tmp_path / "rank1.log.zst"), "--no-input"))


def test_gzip_bomb_is_refused_as_binary_without_expanding_it(tmp_path):
    bomb = tmp_path / "rank0.log.gz"
    with gzip.open(bomb, "wb") as handle:
        for _ in range(64):
            handle.write(b"\x00" * (1 << 20))
    assert "binary" in one_line_error(run("--log", str(bomb), "--no-input"))


# --------------------------------------------------------------- sources that never end
def test_fifo_whose_writer_goes_quiet_is_read_then_left(tmp_path):
    """A FIFO (or /proc/kmsg) never ends: what came is used, and reading stops after a quiet spell."""
    fifo = tmp_path / "kmsg"
    os.mkfifo(fifo)
    stop = threading.Event()

    def writer() -> None:
        with open(fifo, "w") as handle:
            handle.write(VERSION)
            handle.flush()
            stop.wait(30)  # the writer stays: the FIFO never ends

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        started = time.monotonic()
        done = run("--log", str(fifo), "--json", "--no-input", timeout=30)
        assert time.monotonic() - started < 20
    finally:
        stop.set()
    out = json.loads(done.stdout)
    assert out["facts"]["nccl_version"]["value"] == "2.21.5"
    assert out["ingest"]["partial"] is True and "does not end" in out["ingest"]["partial_reasons"][0]


def test_proc_files_that_never_end_are_treated_like_fifos():
    from nccl_doctor.logs import open_source

    source = open_source("/proc/self/status")  # a pseudo-file: size 0, read with a quiet-spell limit
    try:
        assert source.endless and b"Name:" in source.head
    finally:
        source.close()


def test_ingest_paths_skips_and_reads_in_one_call(tmp_path):
    (tmp_path / "rank0.log").write_text(VERSION)
    (tmp_path / "core").write_bytes(b"\x7fELF" + b"\x00" * 4096)
    session = load_doctor().session()
    result = ingest_paths(session, [str(tmp_path)])
    assert result.files == [str(tmp_path / "rank0.log")] and [s.path for s in result.skipped] == [str(tmp_path / "core")]
    assert session.facts()["nccl_version"].value == "2.21.5"
    assert session.logs[0].name == "rank0.log"


def test_fifo_nobody_writes_to_does_not_hang(tmp_path):
    fifo = tmp_path / "nobody.log"
    os.mkfifo(fifo)
    (tmp_path / "rank0.log").write_text(VERSION)
    started = time.monotonic()
    done = run("--log", str(fifo), str(tmp_path / "rank0.log"), "--json", "--no-input", timeout=30)
    assert time.monotonic() - started < 20 and done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout)["facts"]["nccl_version"]["value"] == "2.21.5"
