"""One way to run external commands: argument lists, a timeout on every call, injectable.

Probes never build shell strings. Tests replace the runner (:func:`set_runner`) with a fake
that returns canned output, the way ``torch.utils.collect_env`` is tested, so each probe can
be checked without the real tool.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["CmdResult", "Runner", "default_runner", "set_runner", "get_runner", "run_cmd"]

DEFAULT_TIMEOUT = 3.0


@dataclass(frozen=True)
class CmdResult:
    """What a command did. ``error`` is "" on a normal exit, else "not found" / "timeout" / a message."""

    args: tuple[str, ...]
    returncode: int | None
    stdout: str = ""
    stderr: str = ""
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and self.returncode == 0


Runner = Callable[[Sequence[str], float], CmdResult]


def default_runner(args: Sequence[str], timeout: float = DEFAULT_TIMEOUT) -> CmdResult:
    """Run ``args`` (no shell) in its own session; on timeout kill its whole process group."""
    argv = tuple(str(a) for a in args)
    if not argv:
        raise ValueError("empty command")
    if shutil.which(argv[0]) is None:
        return CmdResult(argv, None, error="not found")
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, errors="replace",
                                start_new_session=True)
    except OSError as exc:
        return CmdResult(argv, None, error=str(exc))
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        out, err = proc.communicate()
        return CmdResult(argv, None, out, err, error=f"timeout after {timeout:g} s")
    return CmdResult(argv, proc.returncode, out, err)


_runner: Runner = default_runner


def set_runner(runner: Runner | None) -> Runner:
    """Replace the process-wide runner (``None`` restores the default); returns the old one."""
    global _runner
    old = _runner
    _runner = runner or default_runner
    return old


def get_runner() -> Runner:
    return _runner


def run_cmd(args: Sequence[str], timeout: float = DEFAULT_TIMEOUT) -> CmdResult:
    """Run a command through the current runner."""
    return _runner(args, timeout)
