"""One way to run external commands: argument lists, a timeout on every call, injectable.

Probes never build shell strings; they call ``ctx.run`` (:class:`~.registry.Context`), whose
runner is :func:`run_command` unless a test hands the context a fake that returns canned
output, the way ``torch.utils.collect_env`` is tested, so each probe can be checked without
the real tool.

A command stays in its caller's process group, so when a probe's group is killed (deadline,
Ctrl-C, the tool dying) its commands and whatever they started die with it; a command past its
own timeout is killed here with its descendants.
"""
from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["CmdResult", "Runner", "run_command", "DEFAULT_TIMEOUT"]

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


def run_command(args: Sequence[str], timeout: float = DEFAULT_TIMEOUT) -> CmdResult:
    """Run ``args`` (no shell); past ``timeout`` seconds kill it and everything it started."""
    argv = tuple(str(a) for a in args)
    if not argv:
        raise ValueError("empty command")
    if shutil.which(argv[0]) is None:
        return CmdResult(argv, None, error="not found")
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, errors="replace")
    except OSError as exc:
        return CmdResult(argv, None, error=str(exc))
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_tree(proc)
        out, err = proc.communicate()
        return CmdResult(argv, None, out, err, error=f"timeout after {timeout:g} s")
    return CmdResult(argv, proc.returncode, out, err)


def _kill_tree(proc: subprocess.Popen) -> None:
    """Kill ``proc`` and its descendants (they hold its output pipes open)."""
    import psutil

    victims = []
    with contextlib.suppress(psutil.Error):
        victims = psutil.Process(proc.pid).children(recursive=True)
    proc.kill()
    for child in victims:
        with contextlib.suppress(psutil.Error):
            child.kill()
