"""Benchmark: the engine CPU of the load benchmark's sessions, this checkout against another
commit, in one process with the two versions' sessions interleaved.

On a shared machine two runs back to back see different loads; here each session is run by
both versions in turn (alternating which goes first), so both see the same load and the ratio
holds even when the absolute figures do not. With ``--round-robin`` the sessions are taken turn
by turn (every session's create, then every log, then the answers), as an engine worker of a
loaded server sees them: what a version keeps between a session's turns must outlast the turns of
all the others. Each version is copied under its own package name
(``ncd_a`` for the commit, ``ncd_b`` for this checkout) into a temporary folder, with ``kb/``,
``engine/``, ``tui/`` and ``probes/`` placed as the installed package has them; each loads its
own KB and is prepared as the server's workers are (``Doctor.prepare``).

    python benchmarks/bench_engine_ab.py main [--sessions 200] [--round-robin]
"""
from __future__ import annotations

import argparse
import importlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_server_load import session_inputs  # noqa: E402  (the same sessions)

_PARTS = ("engine", "kb", "tui", "probes")  # folders the installed package holds under nccl_doctor/


def _copy(tree: Path, into: Path) -> None:
    shutil.copytree(tree / "src" / "nccl_doctor", into)
    for part in _PARTS:
        shutil.copytree(tree / part, into / part)


def _versions(commit: str, folder: Path) -> dict[str, tuple]:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True).stdout
    old = folder / "old"
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(old)
    _copy(old, folder / "ncd_a")
    _copy(ROOT, folder / "ncd_b")
    sys.path.insert(0, str(folder))
    versions = {}
    for name in ("ncd_a", "ncd_b"):
        package = importlib.import_module(name)
        jobs = importlib.import_module(name + ".server.work").JOBS
        limits = importlib.import_module(name + ".server.limits").Limits()
        doctor = package.load_doctor()
        doctor.prepare()
        versions[name] = (doctor, jobs["turn"], limits)
    return versions


def _zero(versions: dict[str, tuple]) -> dict[str, dict[str, float]]:
    return {name: {"create": 0.0, "log": 0.0, "answer": 0.0} for name in versions}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("commit", help="the version to compare with (e.g. main)")
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--round-robin", action="store_true",
                        help="each turn of every session before the next turn of any (a loaded server's order)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        versions = _versions(args.commit, Path(folder))
        inputs = list(session_inputs(args.sessions + 40, True, 0))
        took = _zero(versions)

        def turns(inputs, i: int) -> list[tuple[str, dict]]:
            kinds = [("create", {"text": inputs.text}), ("log", {"log": inputs.log, "log_name": f"rank{i}.log"})]
            return kinds + [("answer", {"answers": [{"fact": fact, "value": value}]}) for fact, value in inputs.answers]

        def step(name: str, state, kind: str, data: dict):
            doctor, turn, limits = versions[name]
            started = time.process_time()
            state, _ = turn(doctor, state, {**data, "questions": 3}, limits)
            took[name][kind] += time.process_time() - started
            return state

        def session(name: str, inputs, i: int) -> None:
            state = None
            for kind, data in turns(inputs, i):
                state = step(name, state, kind, data)

        order = list(versions)
        for i, each in enumerate(inputs[args.sessions:]):  # warm both: lazy parts, indexes
            for name in order:
                session(name, each, i)
        took = _zero(versions)  # the warm-up's times left out
        if args.round_robin:
            planned = [turns(each, i) for i, each in enumerate(inputs[:args.sessions])]
            states = {name: [None] * len(planned) for name in order}
            for position in range(max(map(len, planned))):
                for i, steps in enumerate(planned):
                    if position < len(steps):
                        for name in (order if i % 2 == 0 else order[::-1]):
                            states[name][i] = step(name, states[name][i], *steps[position])
        else:
            for i, each in enumerate(inputs[:args.sessions]):
                for name in (order if i % 2 == 0 else order[::-1]):
                    session(name, each, i)
    n = args.sessions
    for name, label in (("ncd_a", args.commit), ("ncd_b", "this checkout")):
        t = took[name]
        print(f"{label}: create {t['create'] / n * 1000:.2f} ms, log {t['log'] / n * 1000:.2f} ms, "
              f"answer {t['answer'] / n / 2 * 1000:.2f} ms (CPU, mean over {n} sessions)")
    a, b = took["ncd_a"], took["ncd_b"]
    print("this checkout / " + args.commit + ": " + ", ".join(f"{k} {b[k] / a[k]:.3f}" for k in a)
          + f", a session's four jobs {sum(b.values()) / sum(a.values()):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
