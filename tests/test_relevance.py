"""Relevance evidence: the user's words against each cause's own explanation and fixes."""
from __future__ import annotations

from nccl_doctor.engine.certainty import combine
from nccl_doctor.engine.relevance import LIBRARY_WEIGHT, RELEVANCE, WEIGHT
from nccl_doctor.engine.similarity import SIMILAR


def _relevance(session, cause_id):
    return [e for d in session.diagnoses() if d.id == cause_id for e in d.evidence if e.rule == RELEVANCE]


def test_named_setting_raises_its_cause_and_says_which_words(doctor):
    session = doctor.session()
    session.tell("MPI_Init fails with UCX memory errors on InfiniBand; limits.conf still says memlock unlimited")
    [item] = _relevance(session, "memlock_limit_too_low")
    assert 0 < item.strength <= round(combine(WEIGHT, LIBRARY_WEIGHT), 3)  # the KB's words and the library's (shown to 3 places)
    assert "memlock" in item.description and "limits.conf" in item.description
    how = session.how("memlock_limit_too_low")
    assert any(r["rule"] == RELEVANCE and "memlock" in r["description"] for r in how.rules)


def test_small_talk_raises_nothing(doctor):
    for text in ("hello", "everything works fine now, thanks", "what is nccl"):
        session = doctor.session()
        session.tell(text)
        assert not any(e.rule == RELEVANCE for d in session.diagnoses() for e in d.evidence), text


def test_words_alone_stay_below_a_fired_rule(doctor):
    session = doctor.session()
    session.tell("I set NCCL_SOCKET_IFNAME=eth9 and now init fails at once")
    session.add_log(["NCCL WARN Bootstrap : no socket interface found"])
    top = session.diagnoses()[0]
    assert top.id == "nccl_ifname_wrong"
    assert any(e.rule != RELEVANCE and e.strength > combine(WEIGHT, LIBRARY_WEIGHT) for e in top.evidence)


def test_causes_raised_only_by_words_do_not_prolong_a_confident_conversation(doctor):
    session = doctor.session()
    session.tell("my own all-to-all with isend/irecv hangs; some sends have no matching recv; memlock, GID index")
    top = session.diagnoses()[0]
    assert top.id == "p2p_send_recv_unpaired" and top.confidence >= 0.5
    word_only = {d.id for d in session.diagnoses() if all(e.rule in (RELEVANCE, SIMILAR) for e in d.evidence)}
    assert word_only, "the test needs causes raised by words alone"
    leading = [d.id for d in session.diagnoses()[:8]]
    assert set(leading) & word_only
    for question in session.questions(limit=10):
        # every question is asked for causes with support of their own, never for word matches alone
        assert set(question.separates) - word_only, f"{question.id} only moves causes raised by words"
