"""Benchmark: the engine CPU behind each request of ``bench_server_load.py``, and where it goes.

Replays the load benchmark's sessions in this process (no HTTP, no worker processes): a create
with the user's words, a log upload, two answers. Prints the CPU milliseconds of each job as an
engine worker runs it, then splits one view (what every turn returns) into its parts, measured
one after the other on the same restored state, so the parts add up to the whole:

- ``restore``: the session rebuilt from its JSON state;
- ``chain``: the rules chained to a fixpoint, and relevance evidence from the words;
- ``similar``: the session's profile and the incidents most like it;
- ``questions``: ranking the next questions (answers simulated);
- ``report``: diagnoses, plan, facts and the rest of the view, encoded as JSON;
- ``state``: the new state, encoded to check its size.

Compare two versions of the code by running the script against each, back to back, e.g. a copy
of the old tree on ``PYTHONPATH`` (the figures in BENCHMARKS.md were taken that way).

    python benchmarks/bench_server_view.py [--sessions 100] [--repeat 3] [--fixed] [--prepare]
    python benchmarks/bench_server_view.py --dump FILE [--prepare]   # then diff FILE with another version's
"""
from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_server_load import session_inputs  # noqa: E402  (the same sessions)

from nccl_doctor import load_doctor  # noqa: E402
from nccl_doctor.server.limits import Limits  # noqa: E402
from nccl_doctor.server.work import JOBS, _state, _view, restore  # noqa: E402


def jobs(doctor, limits: Limits, sessions: int, varied: bool = True,
         start: int = 0) -> tuple[dict[str, list[float]], list[dict]]:
    """CPU ms per job kind, and every state a view is built on (sessions from ``start`` on in
    the load benchmark's list: each run takes incidents no earlier run took)."""
    took: dict[str, list[float]] = {"create": [], "log": [], "answer": []}
    states = []

    def run(kind: str, state, data):
        started = time.process_time()
        state, _ = JOBS["turn"](doctor, state, {**data, "questions": 3}, limits)
        took[kind].append((time.process_time() - started) * 1000)
        states.append(state)
        return state

    for i, inputs in enumerate(session_inputs(sessions, varied, start)):
        state = run("create", None, {"text": inputs.text})
        state = run("log", state, {"log": inputs.log, "log_name": f"rank{i}.log"})
        for fact, value in inputs.answers:
            state = run("answer", state, {"answers": [{"fact": fact, "value": value}]})
    return took, states


def view_parts(doctor, limits: Limits, states: list[dict]) -> dict[str, float]:
    """Mean CPU ms of each part of a view over ``states``."""
    parts: dict[str, float] = {}

    def timed(name: str, work):
        started = time.process_time()
        out = work()
        parts[name] = parts.get(name, 0.0) + (time.process_time() - started) * 1000
        return out

    for state in states:
        session = timed("restore", lambda: restore(doctor, state))
        timed("chain", session._chained)
        timed("similar", session._inference)
        timed("questions", lambda: session.questions(limit=3))
        timed("report", lambda: _view(session, 3))
        timed("state", lambda: _state(session, limits))
    return {name: total / len(states) for name, total in parts.items()}


def dump(doctor, limits: Limits):
    """Per incident of the library, a digest of each view and state of a consultation run as the
    server runs it: the reporter's words, the incident's log (if any), three answers to the
    question each view puts first (yes, the last choice, else "don't know"), then a view of ten
    questions. Two versions of the code that give the same file show every client the same."""
    for incident_id in sorted(doctor.kb.incidents):
        incident = doctor.kb.incidents[incident_id]
        turns = [{"text": incident.reporter}] + ([{"log": incident.log, "log_name": "rank0.log"}] if incident.log else [])
        state, view = None, b""
        for stage in range(len(turns) + 3):
            if stage < len(turns):
                data = turns[stage]
            else:
                asked = json.loads(view)["next_question"]
                if asked is None:
                    break
                if asked["type"] == "bool":
                    answer = {"fact": asked["id"], "value": True}
                elif asked["type"] == "choice":
                    answer = {"fact": asked["id"], "value": asked["choices"][-1]}
                else:
                    answer = {"fact": asked["id"], "dont_know": True}
                data = {"answers": [answer]}
            state, view = JOBS["turn"](doctor, state, {**data, "questions": 3}, limits)
            yield f"{incident_id} {stage} {_digest(view)} {_digest(json.dumps(state, sort_keys=True).encode())}\n"
        yield f"{incident_id} view10 {_digest(JOBS['view'](doctor, state, {'questions': 10}, limits))}\n"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    parser.add_argument("--fixed", action="store_true", help="the load benchmark's five fixed sessions")
    parser.add_argument("--prepare", action="store_true",
                        help="prepare the Doctor first, as the server's engine workers do (every condition and regex compiled)")
    parser.add_argument("--dump", metavar="FILE",
                        help="write a digest of every view and state of every incident's consultation and stop")
    args = parser.parse_args()
    doctor, limits = load_doctor(), Limits()
    if args.prepare:
        doctor.prepare()
    if args.dump:
        Path(args.dump).write_text("".join(dump(doctor, limits)))
        return 0
    varied = not args.fixed
    jobs(doctor, limits, 10, varied, start=args.sessions * args.repeat)  # warm: lazy regexes, conditions, indexes
    best_jobs: dict[str, float] = {}
    best_parts: dict[str, float] = {}
    for run in range(args.repeat):
        took, states = jobs(doctor, limits, args.sessions, varied, start=run * args.sessions)
        for kind, values in took.items():
            best_jobs[kind] = min(best_jobs.get(kind, float("inf")), statistics.mean(values))
        for name, value in view_parts(doctor, limits, states).items():
            best_parts[name] = min(best_parts.get(name, float("inf")), value)
    per_session = best_jobs["create"] + best_jobs["log"] + 2 * best_jobs["answer"]
    print(f"engine CPU per job (mean over {args.sessions} sessions, best of {args.repeat}): "
          + ", ".join(f"{kind} {value:.2f} ms" for kind, value in best_jobs.items())
          + f"; a session's four jobs {per_session:.1f} ms")
    whole = sum(best_parts.values())
    print(f"one view, {whole:.2f} ms: " + ", ".join(f"{name} {value:.2f} ms ({value / whole:.0%})"
                                                    for name, value in best_parts.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
