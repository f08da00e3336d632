"""Each probe in a child interpreter of its own, under a hard deadline.

A probe runs in a child process that leads a process group of its own; the commands it runs and
anything they start stay in that group. Whatever happens — the probe answers, hangs past its
deadline, crashes, or the user presses Ctrl-C — the parent kills the whole group. If the parent
itself dies (SIGTERM, SIGKILL, a closed terminal), each child sees its stdin close and kills its
own group: nothing the tool started outlives it.

Protocol: the parent writes one JSON request line on the child's stdin and keeps stdin open;
the child answers with JSON lines on stdout (see :mod:`._child`).
"""
from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from .registry import ProbeSpec
from .results import STATUSES, ProbeResult

__all__ = ["python_command", "run_isolated"]

_BOOT = (
    "import sys, types, importlib.util\n"
    "root, pdir = sys.argv[1], sys.argv[2]\n"
    "if 'nccl_doctor' not in sys.modules:\n"
    "    pkg = types.ModuleType('nccl_doctor'); pkg.__path__ = [root]; sys.modules['nccl_doctor'] = pkg\n"
    "spec = importlib.util.spec_from_file_location('nccl_doctor.probes', pdir + '/__init__.py',"
    " submodule_search_locations=[pdir])\n"
    "mod = importlib.util.module_from_spec(spec); sys.modules['nccl_doctor.probes'] = mod\n"
    "spec.loader.exec_module(mod)\n"
    "import importlib; importlib.import_module(sys.argv[3]).main(sys.argv[4:])\n"
)


def python_command(module: str, *args: str) -> list[str]:
    """argv that runs ``module.main(args)`` without importing the engine (fast start)."""
    import nccl_doctor

    root = str(Path(list(nccl_doctor.__path__)[0]).resolve())
    pdir = str(Path(__file__).resolve().parent)
    return [sys.executable, "-c", _BOOT, root, pdir, module, *args]


@dataclass
class _Running:
    spec: ProbeSpec
    deadline: float
    proc: subprocess.Popen
    started: float
    lifeline: IO[bytes] | None  # the child's stdin: closing it (or dying) tells the child to stop
    out: bytearray = field(default_factory=bytearray)
    err: bytearray = field(default_factory=bytearray)
    step: str = "starting"
    result: dict | None = None
    open_fds: int = 2


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


def _start(s: ProbeSpec, deadline: float, env: Mapping[str, str]) -> _Running:
    child_env = dict(os.environ)
    child_env["PYTHONUNBUFFERED"] = "1"
    proc = subprocess.Popen(python_command("nccl_doctor.probes._child"), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            env=child_env, close_fds=True)
    request = json.dumps({"target": s.target, "env": dict(env), "deadline": deadline, "name": s.name})
    assert proc.stdin is not None
    try:
        proc.stdin.write(request.encode() + b"\n")
        proc.stdin.flush()
    except OSError:
        pass  # it died at once: reported as crashed
    return _Running(s, deadline, proc, time.monotonic(), proc.stdin)


def _parse_lines(run: _Running) -> None:
    *lines, rest = bytes(run.out).split(b"\n")
    run.out = bytearray(rest)
    for raw in lines:
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        if "step" in obj:
            run.step = str(obj["step"])[:300]
        if isinstance(obj.get("result"), dict):
            run.result = obj["result"]


def _finish(run: _Running, now: float, *, timed_out: bool = False, interrupted: bool = False) -> ProbeResult:
    _kill_group(run.proc)  # what the probe started too, whatever happened
    seconds = now - run.started
    name = run.spec.name
    stderr_tail = bytes(run.err[-2000:]).decode(errors="replace").strip()
    if interrupted:
        return ProbeResult(name, "skipped", seconds=seconds, detail=f"interrupted (Ctrl-C) while {run.step}")
    if run.result is not None and not timed_out:
        r = run.result
        status = r.get("status", "failed")
        return ProbeResult(name, status if status in STATUSES else "failed", dict(r.get("facts") or {}),
                           list(r.get("findings") or []), seconds, str(r.get("detail") or ""),
                           dict(r.get("data") or {}))
    if timed_out:
        return ProbeResult(name, "timeout", seconds=seconds,
                           detail=f"no answer within its deadline of {run.deadline:g} s; it was {run.step}; "
                                  f"its process group was killed",
                           findings=[f"{name} did not finish within {run.deadline:g} s (it was {run.step})"])
    rc = run.proc.returncode
    if rc is not None and rc < 0:
        try:
            sig = signal.Signals(-rc).name
        except ValueError:
            sig = f"signal {-rc}"
        how = f"killed by {sig}"
    else:
        how = f"exited with code {rc} without a result"
    detail = f"{how} while {run.step}"
    if stderr_tail:
        detail += "; stderr: " + stderr_tail.splitlines()[-1][:300]
    return ProbeResult(name, "crashed", seconds=seconds, detail=detail,
                       findings=[f"{name} crashed ({how}) while {run.step}"])


def _close(run: _Running) -> None:
    """Kill the group, close every pipe and reap the child (it is dead or about to be)."""
    _kill_group(run.proc)
    for stream in (run.lifeline, run.proc.stdout, run.proc.stderr):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass
    try:
        run.proc.wait(timeout=1)
    except subprocess.TimeoutExpired:
        pass


def run_isolated(todo: list[tuple[ProbeSpec, float]], env: Mapping[str, str],
                 on_result: Callable[[ProbeResult], None] | None) -> list[ProbeResult]:
    """Run each (spec, deadline) in its own child, in parallel; results in the order given.

    Ctrl-C (KeyboardInterrupt) kills every child's group and returns what finished, the rest
    marked skipped; any other exception kills every group and propagates.
    """
    results: dict[str, ProbeResult] = {}
    running: dict[int, _Running] = {}
    sel = selectors.DefaultSelector()

    def done(run: _Running, result: ProbeResult) -> None:
        for stream in (run.proc.stdout, run.proc.stderr):
            try:
                sel.unregister(stream)
            except (KeyError, ValueError):
                pass
        running.pop(run.proc.pid, None)
        _close(run)
        results[run.spec.name] = result
        if on_result is not None:
            on_result(result)

    try:
        for s, deadline in todo:
            if s.kind == "cluster":
                results[s.name] = ProbeResult(s.name, "skipped", detail=(
                    "runs under your launcher on every node: torchrun --nnodes=N --nproc-per-node=1 ... "
                    "-m nccl_doctor.probes.cluster --out DIR, then diagnose --facts DIR/REPORT.json"))
                if on_result is not None:
                    on_result(results[s.name])
                continue
            run = _start(s, deadline, env)
            running[run.proc.pid] = run
            for stream, which in ((run.proc.stdout, "out"), (run.proc.stderr, "err")):
                sel.register(stream, selectors.EVENT_READ, (run, which))
        while running:
            now = time.monotonic()
            wait = min(r.started + r.deadline for r in running.values()) - now
            for key, _ in sel.select(timeout=min(max(wait, 0.0), 0.1)):
                run, which = key.data
                try:
                    chunk = os.read(key.fd, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    sel.unregister(key.fileobj)
                    run.open_fds -= 1
                    continue
                if which == "out":
                    run.out += chunk
                    _parse_lines(run)
                else:
                    run.err += chunk
                    del run.err[:-8000]
            now = time.monotonic()
            for run in list(running.values()):
                if run.result is not None or run.proc.poll() is not None:
                    if run.result is None:
                        _drain(run)
                    done(run, _finish(run, now))
                elif now >= run.started + run.deadline:
                    _drain(run)
                    done(run, _finish(run, now, timed_out=run.result is None))
    except KeyboardInterrupt:
        now = time.monotonic()
        for run in list(running.values()):
            done(run, _finish(run, now, interrupted=True))
    finally:
        for run in list(running.values()):
            _close(run)
        sel.close()
    return [results[s.name] for s, _ in todo if s.name in results]


def _drain(run: _Running) -> None:
    """Read what is already in the pipes without blocking."""
    for stream, buf in ((run.proc.stdout, run.out), (run.proc.stderr, run.err)):
        if stream is None or stream.closed:
            continue
        try:
            os.set_blocking(stream.fileno(), False)
            while True:
                chunk = os.read(stream.fileno(), 65536)
                if not chunk:
                    break
                buf += chunk
        except (BlockingIOError, OSError, ValueError):
            pass
    _parse_lines(run)
