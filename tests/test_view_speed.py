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
