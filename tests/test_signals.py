"""Every child dies with the tool, whatever the signal: probe interpreters, the commands they run
(here nvidia-smi and lspci that hang), what those start, and the self-test probe's sleeper."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from nccl_doctor.probes.runner import run_command

DIAGNOSE = [sys.executable, "-m", "nccl_doctor.cli"]
HANG = "#!/bin/sh\nsleep 3600\n"  # a shell that waits on a child: two processes per tool


def _ours(token: str) -> dict[int, str]:
    """pid -> command line of every process whose environment carries ``token``."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if f"NCCL_DOCTOR_TEST_TOKEN={token}".encode() not in handle.read():
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                found[int(entry)] = handle.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
    return found


def _wait_gone(token: str, seconds: float) -> dict[int, str]:
    stop = time.monotonic() + seconds
    while (left := _ours(token)) and time.monotonic() < stop:
        time.sleep(0.05)
    return left


def _states(pids) -> dict[int, str]:
    """pid -> the kernel's State line and parent, to tell a live survivor from one stuck exiting."""
    found = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as handle:
                fields = dict(line.split(":", 1) for line in handle if ":" in line)
            found[pid] = f"{fields.get('State', '?').strip()} ppid={fields.get('PPid', '?').strip()}"
        except OSError:
            found[pid] = "gone"
    return found


def _kill_leftovers(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@pytest.fixture()
def hanging_tools(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("nvidia-smi", "lspci"):
        (bin_dir / tool).write_text(HANG)
        (bin_dir / tool).chmod(0o755)
    return bin_dir


@pytest.mark.parametrize("how", ["ctrl-c", "SIGTERM", "SIGHUP", "SIGKILL"])
def test_no_child_outlives_the_tool(hanging_tools, how):
    token = uuid.uuid4().hex
    env = {**os.environ, "PATH": f"{hanging_tools}:{os.environ['PATH']}", "NCCL_DOCTOR_TEST_TOKEN": token,
           "NCCL_DOCTOR_SELFTEST_TOKEN": token, "FAKE_NVML": '{"init_error": "LibraryNotFound"}'}
    env.pop("PYTHONPATH", None)
    # start_new_session: the tool leads its own group, as a shell's foreground job does
    proc = subprocess.Popen([*DIAGNOSE, "--probe", "host.gpu", "host.p2p", "selftest.hang", "--probe-deadline", "120",
                             "--no-input"], env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        stop = time.monotonic() + 20
        while time.monotonic() < stop:  # both tools hang (sh + sleep each) and the sleeper is up
            alive = _ours(token).values()
            if sum("sleep 3600" in c for c in alive) >= 2 and any("time.sleep(3600)" in c for c in alive):
                break
            time.sleep(0.02)
        else:
            pytest.fail(f"the probes never got going: {_ours(token)}")
        if how == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)  # what the terminal sends on Ctrl-C
        else:
            proc.send_signal(getattr(signal, how))
        proc.communicate(timeout=30)
        # Everything is killed at once; the bound only catches a survivor (it would sleep an hour)
        # and is generous because a SIGKILLed process on a loaded machine can take seconds to exit.
        left = _wait_gone(token, 30)
        assert not left, f"alive after {how}: {left} {_states(left)}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        _kill_leftovers(_ours(token))
    expected = {"ctrl-c": 0, "SIGTERM": 128 + signal.SIGTERM, "SIGHUP": 128 + signal.SIGHUP, "SIGKILL": -signal.SIGKILL}
    assert proc.returncode == expected[how]


def test_a_timed_out_command_is_killed_with_what_it_started(monkeypatch):
    token = uuid.uuid4().hex
    monkeypatch.setenv("NCCL_DOCTOR_TEST_TOKEN", token)
    try:
        result = run_command(["sh", "-c", "sleep 3600 & sleep 3600; wait"], 0.5)
        assert result.error.startswith("timeout")
        assert not _wait_gone(token, 5)
    finally:
        _kill_leftovers(_ours(token))
