"""Benchmark: the incident library scored leave-one-out, with and without case-based evidence.

Each incident of ``kb/incidents/`` is told to a fresh session the way a user would give it (its
``reporter`` words as ``tell``, its ``log`` lines as a log; with ``--knows`` its ``knows`` facts
too), with the incident itself left out of the library (``leave_out``), so it is never
its own evidence and does not count in the priors. It counts as found at rank k when the k-th
diagnosis carries a fix whose text (title, steps, commands) matches one of its
``expected_remedy_any`` regexes, as ../shared/eval/score.py does; an incident without regexes
counts when the diagnosis carries its recorded ``fix``. Prints top-1 / top-3 with and without
case-based evidence, and how many incidents are among the similar incidents shown for their own
description (nothing left out).

``--cases FILE`` scores a file of cases in the dev set's format instead (symptom, log,
expected_remedy_any), leaving out every incident with the same ``source``, so a blind round
stays blind after its cases join the library. ``--round NAME`` does the same for the library's
own incidents collected by that review round (``collected: NAME``, or ``NAME-…``).

Leaving a round's incidents out is not enough to see it as unseen: the rules written for its
misses still fit it (rounds 11 and 12 score 96-98 % top-1 that way, against 42 % and 33 % blind).
``--kb-at REV`` scores against the KB as it was at a git revision (``git archive REV kb``) with
today's engine, so a round is judged by the KB it was blind to and a change to the engine by how
it does on reports nobody wrote rules for (BENCHMARKS.md (12) has the revisions of each round):

    python benchmarks/bench_library.py [--kb DIR | --kb-at REV] [--knows] [--misses] [--cases FILE | --round NAME]
    python benchmarks/bench_library.py --kb-at 430ca41 --round round-11
"""
from __future__ import annotations

import argparse
import io
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from nccl_doctor import load_doctor


def fix_text(fix: dict[str, Any]) -> str:
    return "\n".join([str(fix.get("title", "")), *map(str, fix.get("steps") or []), *map(str, fix.get("commands") or [])])


def rank(session, expected: list[str], fix_id: str = "") -> int | None:
    """The 0-based rank of the first diagnosis with a matching fix, or None."""
    patterns = [re.compile(p, re.IGNORECASE) for p in expected]
    for index, diagnosis in enumerate(session.diagnoses()):
        for fix in diagnosis.fixes:
            if (any(p.search(fix_text(fix)) for p in patterns) if patterns else fix["id"] == fix_id):
                return index
    return None


def tell(session, text: str, log: str, facts: dict[str, Any] | None = None) -> None:
    if text:
        session.tell(text)
    if log:
        session.add_log(log.splitlines(), name="log")
    for name, value in (facts or {}).items():
        if name in session.doctor.kb.facts:
            try:
                session.set_fact(name, value)
            except Exception:  # noqa: BLE001 - a value the KB's fact type does not take says nothing
                pass


def cases_of(doctor, path: Path | None, knows: bool) -> list[dict[str, Any]]:
    """(id, text, log, facts, expected, fix, exclude) for each incident or case."""
    if path is None:
        return [{"id": i.id, "text": i.reporter, "log": i.log, "facts": dict(i.knows) if knows else {},
                 "expected": list(i.expected_remedy_any), "fix": i.fix, "exclude": [i.id], "cause": i.cause}
                for i in doctor.kb.incidents.values()]
    import yaml

    return [{"id": c["id"], "text": c.get("symptom", ""), "log": c.get("log") or "",
             "facts": dict(c.get("facts") or {}) if knows else {}, "expected": list(c["expected_remedy_any"]),
             "fix": "", "exclude": [c["source"]], "cause": ""}
            for c in yaml.safe_load(path.read_text())]


def round_cases(doctor, name: str, knows: bool) -> list[dict[str, Any]]:
    """The library's incidents collected by review round ``name``, as unseen cases: each leaves out
    every incident of its source thread."""
    return [{"id": i.id, "text": i.reporter, "log": i.log, "facts": dict(i.knows) if knows else {},
             "expected": list(i.expected_remedy_any), "fix": i.fix, "exclude": [i.source], "cause": i.cause}
            for i in doctor.kb.incidents.values() if i.collected == name or i.collected.startswith(f"{name}-")]


def kb_at(revision: str, into: Path) -> Path:
    """Extract the ``kb`` folder of this checkout at a git revision into ``into``; its path.
    Raises ValueError with git's one-line reason when the revision has none."""
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(["git", "-C", str(root), "archive", "--format=tar", revision, "kb"],
                          capture_output=True, check=False)
    if done.returncode != 0:
        reason = done.stderr.decode(errors="replace").strip().splitlines()
        raise ValueError(f"no KB at {revision!r}: {reason[-1] if reason else 'git archive failed'}")
    with tarfile.open(fileobj=io.BytesIO(done.stdout)) as archive:
        archive.extractall(into, filter="data")
    return into / "kb"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--kb", type=Path, help="KB folder (default: the packaged one)")
    where.add_argument("--kb-at", metavar="REV", help="the KB of this checkout at a git revision")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--cases", type=Path, help="score a dev-format case file instead of the library")
    what.add_argument("--round", metavar="NAME", help="score the library's incidents of one review round, unseen")
    parser.add_argument("--knows", action="store_true", help="also set the facts each incident knows")
    parser.add_argument("--misses", action="store_true", help="list what is not first with case-based evidence")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-library-") as scratch:
        try:
            folder = kb_at(opts.kb_at, Path(scratch)) if opts.kb_at else opts.kb
        except ValueError as exc:
            print(exc, file=sys.stderr)
            return 2
        doctor = load_doctor(folder)
        if opts.round:
            cases = round_cases(load_doctor(opts.kb) if opts.kb_at else doctor, opts.round, opts.knows)
        else:
            cases = cases_of(doctor, opts.cases, opts.knows)
        return score(doctor, cases, opts)


def score(doctor, cases: list[dict[str, Any]], opts: argparse.Namespace) -> int:
    if not cases:
        print("no incidents to score", file=sys.stderr)
        return 2
    figures = {}
    for case_based in (False, True):
        top1 = top3 = 0
        for case in cases:
            session = doctor.session(leave_out=case["exclude"], case_based=case_based)
            tell(session, case["text"], case["log"], case["facts"])
            found = rank(session, case["expected"], case["fix"])
            top1 += found == 0
            top3 += found is not None and found < 3
            if case_based and opts.misses and found != 0:
                shown = [d.id for d in session.diagnoses()[:3]]
                print(f"miss {case['id']} [{case['cause']}]: rank {None if found is None else found + 1}, "
                      f"top {shown}, similar {[(i.cause, round(i.score, 2)) for i in session.similar()[:3]]}")
        figures[case_based] = (top1, top3)
    n = len(cases)
    what = (opts.cases.name if opts.cases else f"{opts.round}, its threads left out" if opts.round
            else f"{n} incidents, leave-one-out")
    if opts.kb_at:
        what += f", KB at {opts.kb_at}"
    for case_based, label in ((False, "rules and words only  "), (True, "with similar incidents")):
        top1, top3 = figures[case_based]
        print(f"{label}: top1 {100 * top1 / n:.0f}% ({top1}/{n}) top3 {100 * top3 / n:.0f}% ({top3}/{n})  [{what}]")
    if opts.cases is None and opts.round is None:
        own = 0
        for case in cases:
            session = doctor.session()
            tell(session, case["text"], case["log"], case["facts"])
            own += any(i.id == case["id"] for i in session.similar())
        print(f"shown among the similar incidents for its own description: {own}/{n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
