"""The shortcuts that make a session's view cheap give exactly what the plain computation gives.

Each fast path is checked against the slow one it replaces, on real incident texts of the
packaged library (a spread of them, with their logs and answers), so a speed change can never
quietly change a diagnosis, a similar incident or a question.
"""
from __future__ import annotations

import itertools
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
    for session in itertools.chain(_sessions(doctor, step=13), [zh]):  # each stage as it is reached
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


# ------------------------------------------------------------------ question ranking
def _plain_ready_rules(ckb, state, facts):
    """Every unfired rule reading the fact: no shortcut on what they need."""
    return {name: [i for i in ckb.rules_by_fact.get(name, ()) if ckb.rules[i].id not in state.fired_ids]
            for name in facts}


def _plain_consequences(ckb, state, new, ready=None):
    """What a simulated answer adds, by chaining a full copy of the inference (``extend``)."""
    from nccl_doctor.engine.chaining import extend

    after = extend(ckb, state, new)
    added = {name: record for name, record in after.facts.items() if name not in state.facts}
    evidence = {}
    for cause, items in after.evidence.items():
        fresh = [value for _, value in items[len(state.evidence.get(cause, ())):]]
        if fresh:
            evidence[cause] = fresh
    return added, evidence


def _plain_fact_gain(beliefs, moves, known=None):
    """The expected entropy drop exactly as the module docstring of engine.questions writes it."""
    n = len(moves)
    if n == 0:
        return 0.0
    known = known or (lambda cause, moved: 1.0)
    moved = set().union(*moves)
    norm = {x: sum(m.get(x, 1.0) for m in moves) for x in moved}
    chance = {x: known(x, True) for x in moved}
    unmoved = (beliefs.total - sum(beliefs.w.get(x, 0.0) for x in moved)) * known(None, False)
    gain = 0.0
    for move in moves:
        likely = unmoved / n + sum(beliefs.w.get(x, 0.0) * chance[x] * move.get(x, 1.0) / norm[x] for x in moved)
        gain += likely / beliefs.total * (beliefs.entropy - beliefs.entropy_with(move))
    return gain


def _ranked(session):
    from nccl_doctor.engine.questions import rank_questions

    state = session._inference()
    found = rank_questions(session.doctor.compiled, state, session._model(), skip=session.unknown, limit=10,
                           lang=session.language)
    return [(q.id, round(q.gain, 9), q.separates) for q in found]


def test_ranked_questions_are_those_of_the_plain_simulation(doctor, monkeypatch):
    """Question ranking simulates answers with shortcuts (only rules ready to fire, chaining that
    copies facts alone, answers that move nothing skipped in the gain); on real incident texts,
    logs and answers it picks the same questions, with the same gains and causes, as simulating
    each answer by chaining a full copy of the inference."""
    from nccl_doctor.engine import questions

    compared = 0
    for session in _sessions(doctor, step=9):  # each stage as it is reached
        fast = _ranked(session)
        with monkeypatch.context() as plain:
            plain.setattr(questions, "ready_rules", _plain_ready_rules)
            plain.setattr(questions, "consequences", _plain_consequences)
            plain.setattr(questions, "fact_gain", _plain_fact_gain)
            assert fast == _ranked(session)
        compared += len(fast)
    assert compared > 500  # the spread asks many questions
