"""The probe API that the CLI and the TUI call.

Every probe runs in a child process in its own session (process group) under a hard deadline;
a probe that hangs, crashes or segfaults is reported as such, its whole process group is
killed, and Ctrl-C kills the children and returns what finished.
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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .registry import SPECS, ProbeSpec, host_probe_names, spec

__all__ = ["ProbeInfo", "ProbeResult", "list_probes", "run_probes", "apply_results", "load_report",
           "REPORT_FORMAT", "STATUSES", "relevant_env"]

STATUSES = ("ok", "failed", "timeout", "crashed", "skipped")
REPORT_FORMAT = "nccl-doctor-probe-report"
_ENV_PREFIXES = ("NCCL_", "TORCH_", "MASTER_", "GLOO_", "FI_", "UCX_", "OMPI_", "SLURM_", "PMIX_", "PMI_",
                 "TORCHELASTIC_", "CUDA_", "NVIDIA_", "KUBERNETES_")
_ENV_NAMES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK",
              "LD_LIBRARY_PATH", "LD_PRELOAD", "HOSTNAME", "container")
_GRACE = 0.05


@dataclass
class ProbeInfo:
    name: str
    title: str
    facts: list[str]
    needs: list[str]
    deadline: float


@dataclass
class ProbeResult:
    name: str
    status: str  # "ok" | "failed" | "timeout" | "crashed" | "skipped"
    facts: dict[str, bool | int | float | str] = field(default_factory=dict)
    findings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    detail: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["seconds"] = round(self.seconds, 3)
        return out


def list_probes() -> list[ProbeInfo]:
    """Every probe a user may run, with the facts it can establish."""
    return [ProbeInfo(s.name, s.title, list(s.facts), list(s.needs), s.deadline) for s in SPECS if not s.hidden]


def relevant_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables that matter to distributed communication (others are not sent anywhere)."""
    return {k: v for k, v in env.items() if k.startswith(_ENV_PREFIXES) or k in _ENV_NAMES}


def run_probes(names: list[str] | None = None, *, deadline: float = 5.0, env: Mapping[str, str] | None = None,
               on_result: Callable[[ProbeResult], None] | None = None) -> list[ProbeResult]:
    """Run probes in parallel, each isolated, and return their results in the order asked.

    ``names`` None runs every host probe. Each probe gets ``max(deadline, its own deadline)``
    seconds (collective probes need more than host probes); ``env`` is the environment to judge
    (default: this process's).
    """
    chosen = [spec(n) for n in (names if names is not None else host_probe_names())]
    judged = relevant_env(os.environ if env is None else env)
    return _run_isolated([(s, max(float(deadline), s.deadline)) for s in chosen], judged, on_result)


# ----------------------------------------------------------------------------- isolation
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
    out: bytearray = field(default_factory=bytearray)
    err: bytearray = field(default_factory=bytearray)
    step: str = "starting"
    result: dict | None = None
    open_fds: int = 2


def _killpg(proc: subprocess.Popen) -> None:
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
    try:
        assert proc.stdin is not None
        proc.stdin.write(request.encode())
        proc.stdin.close()
    except OSError:
        pass
    return _Running(s, deadline, proc, time.monotonic())


def _parse_lines(run: _Running) -> None:
    *lines, rest = bytes(run.out).split(b"\n")
    run.out = bytearray(rest)
    for raw in lines:
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if "step" in obj:
            run.step = str(obj["step"])
        if "result" in obj:
            run.result = obj["result"]


def _finish(run: _Running, now: float, *, timed_out: bool = False, interrupted: bool = False) -> ProbeResult:
    _killpg(run.proc)  # grandchildren too, whatever happened
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


def _run_isolated(todo: list[tuple[ProbeSpec, float]], env: Mapping[str, str],
                  on_result: Callable[[ProbeResult], None] | None) -> list[ProbeResult]:
    results: dict[str, ProbeResult] = {}
    running: dict[int, _Running] = {}
    sel = selectors.DefaultSelector()

    def done(run: _Running, result: ProbeResult) -> None:
        for stream in (run.proc.stdout, run.proc.stderr):
            if stream is None:
                continue
            try:
                sel.unregister(stream)
            except (KeyError, ValueError):
                pass
            stream.close()
        running.pop(run.proc.pid, None)
        try:
            run.proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            pass
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
                exited = run.proc.poll() is not None
                if run.result is not None or exited or run.open_fds == 0:
                    if exited or run.result is not None:
                        if run.result is None:
                            _drain(run)
                        done(run, _finish(run, now))
                        continue
                if now >= run.started + run.deadline:
                    _drain(run)
                    done(run, _finish(run, now, timed_out=run.result is None))
    except KeyboardInterrupt:
        now = time.monotonic()
        for run in list(running.values()):
            done(run, _finish(run, now, interrupted=True))
    finally:
        for run in list(running.values()):
            _killpg(run.proc)
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


# ----------------------------------------------------------------------------- into a session
def apply_results(session, results: list[ProbeResult]) -> None:
    """Put every probe fact the KB knows into ``session`` (source "probe", detail = probe name).

    Facts the KB does not define are skipped; a value that does not fit the fact's type is
    skipped too (a probe must never break a diagnosis).
    """
    known = session.doctor.kb.facts
    for result in results:
        for name, value in result.facts.items():
            if name not in known:
                continue
            try:
                session.set_fact(name, value, source="probe", detail=result.name)
            except ValueError:
                continue


def load_report(path: str) -> list[ProbeResult]:
    """Read a cluster REPORT.json (or a plain ``{"facts": {...}}`` file) as probe results."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{path} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object with \"facts\" or \"results\", got {type(data).__name__}")
    out: list[ProbeResult] = []
    if "results" in data:
        items = data["results"]
        if not isinstance(items, list):
            raise ValueError(f"{path}: \"results\" must be a list")
        for i, item in enumerate(items):
            if not isinstance(item, dict) or "name" not in item:
                raise ValueError(f"{path}: results[{i}] must be an object with a \"name\"")
            status = item.get("status", "ok")
            if status not in STATUSES:
                raise ValueError(f"{path}: results[{i}] has unknown status {status!r}")
            out.append(ProbeResult(str(item["name"]), status, _facts(item.get("facts", {}), path, f"results[{i}]"),
                                   [str(f) for f in item.get("findings", []) or []],
                                   float(item.get("seconds", 0) or 0), str(item.get("detail", "") or "")))
    if "facts" in data:
        name = "cluster" if data.get("format") == REPORT_FORMAT else "report"
        findings = data.get("findings", [])
        if not isinstance(findings, list):
            raise ValueError(f"{path}: \"findings\" must be a list of sentences")
        status = data.get("status", "ok")
        out.insert(0, ProbeResult(name, status if status in STATUSES else "failed", _facts(data["facts"], path, "facts"),
                                  [str(f) for f in findings], float(data.get("seconds", 0) or 0),
                                  str(data.get("detail", "") or "")))
    if not out:
        raise ValueError(f"{path}: no \"facts\" or \"results\" in it; expected a REPORT.json written by "
                         f"`python -m nccl_doctor.probes.cluster` or {{\"facts\": {{\"name\": value}}}}")
    return out


def _facts(raw: object, path: str, where: str) -> dict[str, bool | int | float | str]:
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: {where} must be an object mapping fact names to values")
    facts: dict[str, bool | int | float | str] = {}
    for key, value in raw.items():
        if isinstance(value, dict) and "value" in value:  # the --json "facts" form
            value = value["value"]
        if not isinstance(value, (bool, int, float, str)):
            raise ValueError(f"{path}: {where}.{key} must be true/false, a number or a string, "
                             f"got {type(value).__name__}")
        facts[str(key)] = value
    return facts
