"""The shortcuts that make a session's view cheap give exactly what the plain computation gives.

Each fast path is checked against the slow one it replaces, on real incident texts of the
packaged library (a spread of them, with their logs and answers), so a speed change can never
quietly change a diagnosis, a similar incident or a question.
"""
from __future__ import annotations

import math

import pytest

from nccl_doctor.engine.session import incident_profile


def _spread(doctor, step: int = 7) -> list[str]:
    return sorted(doctor.kb.incidents)[::step]


def test_similarity_from_postings_equals_the_pairwise_comparison(doctor):
    index = doctor.incidents
    profiles = []
    for incident_id in _spread(doctor):
        session = doctor.session()
        session.tell(doctor.kb.incidents[incident_id].reporter)
        profiles.append((incident_id, session.profile()))
        profiles.append((incident_id, incident_profile(doctor, incident_id)))
    compared = 0
    for incident_id, profile in profiles:
        query = index._vector(profile)
        norm = math.sqrt(sum(w * w for w in query.values()))
        for exclude in ((), (incident_id,), (doctor.kb.incidents[incident_id].source,)):
            fast = index.scores(profile, exclude)
            plain = index._pairwise_scores(profile, query, norm, exclude)
            assert fast == plain and list(fast) == list(plain), incident_id
            compared += len(plain)
    assert index._postings is not None  # the postings path was the one taken
    assert compared > 1000  # the spread really compares incidents


def _sessions(doctor, step: int = 7):
    """Sessions at several stages: a reporter's words, then the incident's log, then an answer."""
    for incident_id in _spread(doctor, step):
        incident = doctor.kb.incidents[incident_id]
        session = doctor.session()
        session.tell(incident.reporter)
        yield session
        if incident.log:
            session.add_log(incident.log.splitlines(), name=f"{incident_id}.log")
            yield session
        asked = session.next_question()
        if asked is not None:
            if asked.type == "bool":
                session.answer(asked.id, True)
            elif asked.type == "choice":
                session.answer(asked.id, asked.choices[-1])
            else:
                session.dont_know(asked.id)
            yield session


def test_a_views_json_is_the_plain_encoding_of_the_report(doctor):
    """The server encodes each diagnosis with its KB part kept per cause; the bytes are those of
    encoding the whole report dict (English and Chinese sessions, every stage)."""
    from nccl_doctor.server import work

    zh = doctor.session()
    zh.tell("两台机器训练时 NCCL 超时，all_reduce 卡住，日志里有 Connection refused")
    checked = 0
    for session in [*_sessions(doctor, step=13), zh]:
        for questions in (0, 3):
            report = session.report(questions=max(questions, 1))
            asked = report["questions"]
            report["next_question"] = asked[0] if asked else None
            report["questions"] = asked[:questions]
            report["answers"] = session.answers()
            report["unknown"] = session.unknown
            assert work._view(session, questions) == work._encode(report)
            checked += len(report["diagnoses"])
    assert zh.language == "zh" and checked > 100
