"""Real signals sent to a real ``diagnose`` while it reads: Ctrl-C gives a partial result said to
be partial, and no worker process outlives the tool, whatever signal ends it."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to see processes")

DIAGNOSE = [sys.executable, "-m", "nccl_doctor.cli"]
WATCHDOG = ("[rank{r}]:[E1109 16:13:20.1 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600038 "
            "milliseconds before timing out.\n")
FILLER = b"[rank0]:2024-11-09 15:00:00,123 INFO train.py:211 step 1 loss 2.31 lr 3.0e-04 tokens/s 181234\n"


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


class SlowWriter:
    """Keeps writing a line every 0.2 s to a FIFO (or pipe) until stopped: a stream that never ends."""

    def __init__(self, path: Path | None = None, stream=None, first: str = "") -> None:
        self.path, self.stream, self.first = path, stream, first
        self.stop = threading.Event()
        self.started = threading.Event()  # set once the first lines are written
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        try:
            handle = self.stream or open(self.path, "w")  # noqa: SIM115 - closed below
            handle.write(self.first)
            handle.flush()
            self.started.set()
            while not self.stop.wait(0.2):
                handle.write("[rank9]: still training\n")
                handle.flush()
            handle.close()
        except (BrokenPipeError, OSError, ValueError):
            pass


def big_logs(folder: Path) -> list[str]:
    """Two logs large enough (80 MB in all) for the tool to read them in worker processes."""
    paths = []
    for rank in range(2):
        path = folder / f"rank{rank}.log"
        path.write_bytes(FILLER * (40 * (1 << 20) // len(FILLER)) + WATCHDOG.format(r=rank).encode())
        paths.append(str(path))
    return paths


def _hangup_as_in_a_terminal() -> None:
    """The tool starts with SIGHUP's default action, as from a login shell: a suite run under
    `nohup` would otherwise hand it an ignored SIGHUP, which it rightly keeps ignoring."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def start_with_workers(tmp_path: Path) -> tuple[subprocess.Popen, set[int], SlowWriter]:
    fifo = tmp_path / "stream.log"
    os.mkfifo(fifo)
    writer = SlowWriter(fifo)
    proc = subprocess.Popen([*DIAGNOSE, "--log", *big_logs(tmp_path), str(fifo), "--json", "--no-input"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=_hangup_as_in_a_terminal)
    deadline = time.monotonic() + 60
    kids: set[int] = set()
    while time.monotonic() < deadline and proc.poll() is None:
        kids = descendants(proc.pid)
        if len(kids) >= 2:  # the pool's workers are up; one of them is stuck on the endless FIFO
            break
        time.sleep(0.1)
    time.sleep(1.0)  # let the workers get into their files
    kids |= descendants(proc.pid)
    assert proc.poll() is None and len(kids) >= 2, "the tool should be reading in worker processes"
    return proc, kids, writer


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL, signal.SIGHUP], ids=lambda s: s.name)
def test_no_child_outlives_the_tool(tmp_path, sig):
    """Before: after SIGTERM during forensics of a directory, two pool workers were still alive
    30 s later (orphaned to init)."""
    proc, kids, writer = start_with_workers(tmp_path)
    try:
        proc.send_signal(sig)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(alive(k) for k in kids):
            time.sleep(0.1)
        assert not [k for k in kids if alive(k)], "worker processes outlived the tool"
    finally:
        writer.stop.set()
        for k in kids:
            if alive(k):
                os.kill(k, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()


def test_ctrl_c_while_workers_read_gives_a_partial_result(tmp_path):
    proc, kids, writer = start_with_workers(tmp_path)
    try:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        writer.stop.set()
    assert proc.returncode == 0, err.decode()
    report = json.loads(out)
    assert report["ingest"]["partial"] is True and "interrupted" in report["ingest"]["partial_reasons"][0]
    assert "partial result" in err.decode()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(alive(k) for k in kids):
        time.sleep(0.1)
    assert not [k for k in kids if alive(k)]


def test_ctrl_c_on_a_piped_log_uses_what_came(tmp_path):
    """``kubectl logs -f | diagnose --log -`` never ends: Ctrl-C stops it and what came is read."""
    proc = subprocess.Popen([*DIAGNOSE, "--log", "-", "--json", "--no-input"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    writer = SlowWriter(stream=proc.stdin, first=WATCHDOG.format(r=3))
    try:
        assert writer.started.wait(30)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _unread(proc.stdin) != 0:
            time.sleep(0.05)  # the tool has taken the first lines from the pipe
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        writer.stop.set()
    assert proc.returncode == 0, err
    report = json.loads(out)
    assert report["ingest"]["partial"] is True
    assert report["facts"]["collective_op"]["value"] == "ALLREDUCE"


def _unread(stream) -> int:
    """Bytes written to a pipe and not read yet (FIONREAD works on either end on Linux)."""
    import fcntl
    import struct
    import termios

    try:
        return struct.unpack("i", fcntl.ioctl(stream.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]
    except (OSError, ValueError):
        return -1
