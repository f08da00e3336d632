"""Logs piped into ``diagnose --log -``: the same bytes, lines and hang report as the file read
directly, whatever pieces and pauses the writer makes; the pipe is widened where it can be and
nothing else is touched (a file, a terminal, a pipe whose size cannot change)."""
from __future__ import annotations

import fcntl
import json
import os
import pty
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import nccl_doctor.logs as logs
from nccl_doctor.logs import chunks, open_source, stdin_source

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from bench_ingest import lockstep  # noqa: E402 - the benchmark's own generator

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pipe sizes are a Linux feature")

DIAGNOSE = [sys.executable, "-m", "nccl_doctor.cli"]
F_GETPIPE_SZ = getattr(fcntl, "F_GETPIPE_SZ", 1032)


class PipedStdin:
    """``sys.stdin`` replaced by the read end of a pipe that a thread fills with ``data`` in
    pieces of the given sizes, pausing where asked (a writer such as ``kubectl logs``)."""

    def __init__(self, data: bytes, pieces: list[int], pauses: dict[int, float] | None = None) -> None:
        self.read_fd, self.write_fd = os.pipe()
        self.buffer = self  # sys.stdin.buffer.fileno() is all stdin_source asks for
        self.thread = threading.Thread(target=self._write, args=(data, pieces, pauses or {}), daemon=True)
        self.thread.start()

    def fileno(self) -> int:
        return self.read_fd

    def _write(self, data: bytes, pieces: list[int], pauses: dict[int, float]) -> None:
        at, index = 0, 0
        try:
            while at < len(data):
                size = pieces[index % len(pieces)]
                os.write(self.write_fd, data[at:at + size])
                at += size
                index += 1
                if index in pauses:
                    time.sleep(pauses[index])
        finally:
            os.close(self.write_fd)

    def close(self) -> None:
        self.thread.join(timeout=30)
        os.close(self.read_fd)


def stream_of(source, chunk_bytes: int) -> tuple[bytes, list[tuple[int, int]]]:
    """The bytes a reader hands out (each chunk's own lines, once) and (first line, lines) per
    chunk, checking on the way that each chunk's line count is that of its bytes."""
    body, numbers = [], []
    for chunk in chunks(source, chunk_bytes=chunk_bytes, keep=0, buffers=[]):
        body.append(bytes(chunk.data[chunk.start:chunk.end]))
        numbers.append((chunk.first_line, chunk.lines))
        assert chunk.lines == body[-1].count(b"\n")
    return b"".join(body), numbers


def within(seconds: float, work, *args):
    """``work(*args)`` in a thread, failing the test instead of hanging it past ``seconds``."""
    out: list = []
    thread = threading.Thread(target=lambda: out.append(work(*args)), daemon=True)
    thread.start()
    thread.join(seconds)
    assert out, f"still reading after {seconds} s"
    return out[0]


@pytest.fixture(params=["bytes.count", "numpy"])
def counting(request, monkeypatch):
    """Newlines counted both ways: bytes.count (small runs) and numpy (past 64 MB in a process)."""
    if request.param == "numpy":
        pytest.importorskip("numpy")
        monkeypatch.setattr(logs, "_COUNTED", [1 << 40])
    else:
        monkeypatch.setattr(logs, "_COUNTED", [0])
        monkeypatch.setattr(logs, "_NUMPY", [None])
    return request.param


def sample_log(size: int) -> bytes:
    lines, n, total = [], 0, 0
    while total < size:
        n += 1
        lines.append(b"[rank%d]:NCCL INFO AllReduce: opCount %x %s\n" % (n % 8, n, b"x" * (n * 7919 % 300)))
        if n % 5000 == 0:  # longer than MAX_LINE_BYTES: its head is kept, the rest dropped
            lines.append(b"a line with no end in sight " + b"y" * (logs.MAX_LINE_BYTES + 4096) + b"\n")
        total += len(lines[-1])
    return b"".join(lines)


@pytest.mark.parametrize("pieces, pauses", [
    ([128 << 10], {}),                       # cat: steady 128 KB writes
    ([1, 4095, 65536, 333333, 7], {}),       # odd sizes, lines split across writes
    ([40 << 10], {3: 0.15, 20: 0.3, 41: 0.12}),  # a writer that pauses past PAUSE_SECONDS mid-chunk
])
def test_piped_stdin_hands_out_what_the_file_does(tmp_path, monkeypatch, counting, pieces, pauses):
    data = sample_log(5 << 20)
    path = tmp_path / "job.log"
    path.write_bytes(data)
    file_body, file_numbers = stream_of(open_source(str(path)), 1 << 20)
    assert stream_of(logs.text_source(data), 1 << 20) == (file_body, file_numbers)  # read whole, not in pieces
    stdin = PipedStdin(data, pieces, pauses)
    monkeypatch.setattr(sys, "stdin", stdin)
    try:
        pipe_body, pipe_numbers = within(60, lambda: stream_of(stdin_source(), 1 << 20))
    finally:
        stdin.close()
    assert pipe_body == file_body  # long lines cut the same way, nothing lost or doubled
    for numbers in (file_numbers, pipe_numbers):  # each chunk's line numbers follow on from the last
        assert all(first == prev_first + prev_lines for (prev_first, prev_lines), (first, _) in
                   zip(numbers, numbers[1:]))
    assert sum(n for _, n in pipe_numbers) == sum(n for _, n in file_numbers)


def test_pipe_is_widened_and_other_stdins_are_left_alone(tmp_path):
    read_fd, write_fd = os.pipe()
    try:
        before = fcntl.fcntl(read_fd, F_GETPIPE_SZ)
        size = logs._wider_pipe(read_fd)
        assert size == fcntl.fcntl(read_fd, F_GETPIPE_SZ) >= before
        if logs._pipe_max() > before:
            assert size > before
    finally:
        os.close(read_fd)
        os.close(write_fd)
    path = tmp_path / "job.log"
    path.write_text("NCCL INFO hello\n")
    with open(path, "rb") as handle:
        assert logs._wider_pipe(handle.fileno()) is None
    parent, child = pty.openpty()
    try:
        assert logs._wider_pipe(child) is None  # a terminal
    finally:
        os.close(parent)
        os.close(child)
    with open(os.devnull, "rb") as handle:
        assert logs._wider_pipe(handle.fileno()) is None
    assert logs._wider_pipe(10_000) is None  # not even open


def test_pipe_whose_size_cannot_change_is_read_all_the_same(tmp_path, monkeypatch):
    real = fcntl.fcntl
    refused = []

    def fcntl_refusing_sizes(fd, cmd, *args):
        if cmd == getattr(fcntl, "F_SETPIPE_SZ", 1031):
            refused.append(args)
            raise PermissionError(1, "Operation not permitted")
        return real(fd, cmd, *args)

    data = sample_log(2 << 20)
    path = tmp_path / "job.log"
    path.write_bytes(data)
    monkeypatch.setattr(fcntl, "fcntl", fcntl_refusing_sizes)
    stdin = PipedStdin(data, [128 << 10])
    monkeypatch.setattr(sys, "stdin", stdin)
    try:
        size = real(stdin.read_fd, F_GETPIPE_SZ)
        assert logs._wider_pipe(stdin.read_fd) == size  # refused: the size it has, no error
        body, _ = within(60, lambda: stream_of(stdin_source(), 1 << 20))
    finally:
        stdin.close()
    assert refused
    assert body == stream_of(open_source(str(path)), 1 << 20)[0]


def test_piped_log_gives_the_report_of_the_file(tmp_path):
    """End to end: a lockstep log with one rank behind, through a pipe that ``cat`` writes into,
    and as a file: the same report, but for the name the evidence is cited under."""
    path = tmp_path / "job.log"
    lockstep(str(path), 12 << 20, ranks=16, behind=5)
    by_file = subprocess.run([*DIAGNOSE, "--log", str(path), "--json", "--no-input"], capture_output=True,
                             timeout=120)
    with open(path, "rb") as log:
        cat = subprocess.Popen(["cat"], stdin=log, stdout=subprocess.PIPE)
        by_pipe = subprocess.run([*DIAGNOSE, "--log", "-", "--json", "--no-input"], stdin=cat.stdout,
                                 capture_output=True, timeout=120)
        cat.stdout.close()
        cat.wait(timeout=30)
    assert by_file.returncode == 0 and by_pipe.returncode == 0, by_pipe.stderr.decode()
    file_report = json.loads(by_file.stdout.decode().replace(str(path), "stdin").replace(path.name, "stdin"))
    pipe_report = json.loads(by_pipe.stdout)
    assert pipe_report["hang"]["culprit"]["ranks"] == [5]
    assert pipe_report == file_report


def test_numpy_import_leaves_the_environment_as_it_was():
    code = ("import os, sys; from nccl_doctor.logs import _import_numpy; _import_numpy(); "
            "print(os.environ.get('OPENBLAS_THREAD_TIMEOUT'))")
    for preset, expected in ((None, "None"), ("7", "7")):
        env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
        if preset is not None:
            env["OPENBLAS_THREAD_TIMEOUT"] = preset
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
        assert done.stdout.strip() == expected, done.stderr


def test_stdin_is_big_only_for_a_big_file_or_a_filled_pipe(tmp_path, monkeypatch):
    class Stdin:
        def __init__(self, fd: int) -> None:
            self.buffer, self.fd = self, fd

        def fileno(self) -> int:
            return self.fd

    read_fd, write_fd = os.pipe()
    try:
        monkeypatch.setattr(sys, "stdin", Stdin(read_fd))
        os.set_blocking(write_fd, False)  # a test that cannot hang on a full pipe
        sent = os.write(write_fd, b"NCCL INFO a few lines\n" * 100)
        assert not logs.stdin_is_big()
        os.write(write_fd, b"x" * ((64 << 10) - sent))  # what a writer such as cat leaves in a 64 KB pipe
        assert logs.stdin_is_big()
    finally:
        os.close(read_fd)
        os.close(write_fd)
    for size, big in ((1 << 20, False), (logs.BIG_READ_BYTES, True)):
        path = tmp_path / f"{size}.log"
        with open(path, "wb") as handle:
            handle.truncate(size)
        with open(path, "rb") as handle:
            monkeypatch.setattr(sys, "stdin", Stdin(handle.fileno()))
            assert logs.stdin_is_big() is big
    parent, child = pty.openpty()
    try:
        monkeypatch.setattr(sys, "stdin", Stdin(child))
        assert not logs.stdin_is_big()
    finally:
        os.close(parent)
        os.close(child)
    monkeypatch.setattr(sys, "stdin", None)  # no stdin at all (a daemon)
    assert not logs.stdin_is_big()


def test_numpy_loaded_ahead_leaves_no_thread_behind():
    """The background import is waited for before workers fork (they are forked only from a
    process with no other thread)."""
    code = ("import sys, threading; from nccl_doctor.logs import expect_big_reads; "
            "expect_big_reads(wait=False); expect_big_reads(); "
            "print(threading.active_count(), 'numpy' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    expected = "1 True" if subprocess.run([sys.executable, "-c", "import numpy"]).returncode == 0 else "1 False"
    assert done.stdout.strip() == expected, done.stderr


def test_a_writer_quiet_after_whole_read_pieces_still_gets_its_lines_read(monkeypatch):
    """``kubectl logs -f`` writes 3 MB, exactly three read pieces after the sniffed head, then
    says nothing more for a while: those lines are handed out within the pause, not when the
    writer next writes (or never, for a stream Ctrl-C ends: what came must be used)."""
    line = b"[rank1]:NCCL INFO AllReduce: opCount 1f sendbuff 0x7f00 count 262144 datatype 7 op 0\n"
    line = line[:-1].ljust(127, b" ") + b"\n"
    data = line * ((logs.HEAD_BYTES + 3 * logs.READ_PIECE) // len(line))
    assert len(data) == logs.HEAD_BYTES + 3 * logs.READ_PIECE
    closed, release = threading.Event(), threading.Event()
    read_fd, write_fd = os.pipe()

    def write() -> None:
        os.write(write_fd, data[:logs.HEAD_BYTES])
        time.sleep(0.2)
        with open(write_fd, "wb", closefd=True) as out:
            out.write(data[logs.HEAD_BYTES:])
            out.flush()
            release.wait(20)  # quiet, the pipe still open
            closed.set()

    class Stdin:
        buffer = None

        def fileno(self) -> int:
            return read_fd

    stdin = Stdin()
    stdin.buffer = stdin
    monkeypatch.setattr(sys, "stdin", stdin)
    writer = threading.Thread(target=write, daemon=True)
    writer.start()

    def read_until_all_came() -> bool:
        got = 0
        for chunk in chunks(stdin_source(), keep=0, buffers=[]):
            got += chunk.end - chunk.start
            if got == len(data):
                return not closed.is_set()
        return False

    try:
        assert within(60, read_until_all_came), "the lines were handed out only once the writer closed"
    finally:
        release.set()
        writer.join(30)
        os.close(read_fd)
