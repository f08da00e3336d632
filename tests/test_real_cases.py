"""Real failure cases (tests/cases/real_cases.yaml) scored through the session API, the way
../shared/eval/score.py scores the CLI: a case counts when a top-ranked diagnosis carries a fix
whose text matches one of the case's regexes.

The floor is for the set as a whole - no single case is pinned, so no rule can be written to
pass one case - and a failure lists every miss with what was ranked instead.
"""
from __future__ import annotations

import re
from pathlib import Path

import yaml

from nccl_doctor import load_doctor

CASES = yaml.safe_load((Path(__file__).parent / "cases" / "real_cases.yaml").read_text())
MIN_TOP1, MIN_TOP3 = 0.70, 0.82


def _fix_text(diagnosis) -> str:
    parts = []
    for fix in diagnosis.fixes:
        parts.append(str(fix.get("title", "")))
        parts.extend(str(s) for s in fix.get("steps") or [])
        parts.extend(str(c) for c in fix.get("commands") or [])
    return "\n".join(parts)


def _rank(case: dict) -> tuple[int | None, list[str]]:
    session = load_doctor().session()
    if case.get("symptom"):
        session.tell(case["symptom"])
    if case.get("log"):
        session.add_log(case["log"].splitlines())
    diagnoses = session.diagnoses()
    patterns = [re.compile(p, re.IGNORECASE) for p in case["expected_remedy_any"]]
    for rank, diagnosis in enumerate(diagnoses):
        if any(p.search(_fix_text(diagnosis)) for p in patterns):
            return rank, [d.id for d in diagnoses[:3]]
    return None, [d.id for d in diagnoses[:3]]


def test_cases_are_well_formed():
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids)) and len(ids) >= 60
    for case in CASES:
        assert case["source"].startswith("https://"), case["id"]
        assert case["symptom"] and case["expected_remedy_any"], case["id"]
        for pattern in case["expected_remedy_any"]:
            re.compile(pattern)


def test_real_cases_rank_the_right_fix():
    ranks = {c["id"]: _rank(c) for c in CASES}
    top1 = sum(r == 0 for r, _ in ranks.values()) / len(CASES)
    top3 = sum(r is not None and r < 3 for r, _ in ranks.values()) / len(CASES)
    misses = "\n".join(f"  {cid}: rank {r}, ranked {top}" for cid, (r, top) in ranks.items()
                       if r is None or r > 0)
    assert top1 >= MIN_TOP1 and top3 >= MIN_TOP3, f"top1 {top1:.0%} top3 {top3:.0%}; not first:\n{misses}"

