"""Probes that misbehave on purpose, to test the isolation (hidden from listings)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def ok(ctx) -> None:
    ctx.fact("selftest_ran", True)
    ctx.find("self-test probe ran")


def hang(ctx) -> None:
    ctx.step("starting a child that sleeps")
    # A grandchild holding our stdout open: the parent must still notice and kill it.
    token = ctx.env.get("NCCL_DOCTOR_SELFTEST_TOKEN", "")
    subprocess.Popen([sys.executable, "-c", f"import time; time.sleep(3600)  # {token}"])
    ctx.step("waiting forever on a lock that is never released")
    while True:
        time.sleep(3600)


def crash(ctx) -> None:
    ctx.step("about to segfault")
    os.kill(os.getpid(), signal.SIGSEGV)
    time.sleep(10)


def boom(ctx) -> None:
    ctx.step("about to raise")
    raise RuntimeError("deliberate failure")
