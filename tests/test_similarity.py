"""Case-based evidence on a small purpose-built library: similar incidents, their bounded
evidence, leave-one-out, priors from the library, and the profiles kept in the KB artifact."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from nccl_doctor import knowledge
from nccl_doctor.engine import Doctor, Session, SessionError
from nccl_doctor.engine import session as session_module
from nccl_doctor.engine.priors import library_priors
from nccl_doctor.engine.relevance import LIBRARY_WEIGHT, RELEVANCE, incident_words
from nccl_doctor.engine.similarity import SIMILAR, WEIGHT
from nccl_doctor.kb.load import kb_files, load_files

VOCABULARY = """
facts:
  - {id: container, type: choice, choices: [docker, none], question: Which container?}
  - {id: multi_node, type: bool, question: More than one machine?}
  - {id: shm_error, type: bool}
  - {id: stuck_saving, type: bool, question: Does it hang while saving?}
  - {id: log_given, type: bool}
signatures:
  - id: shm_segment
    pattern: 'Error while creating shared memory segment'
    needles: [shared memory segment]
    sets: {shm_error: true}
symptoms:
  - {id: says_docker, phrases: [docker container], sets: {container: docker}}
rules:
  - id: shm_error_means_shm
    description: NCCL could not create a shared-memory segment.
    when: {fact: shm_error}
    then: {evidence: [{cause: shm_small, strength: 0.7}]}
  - id: saving_is_ambiguous
    description: A hang while saving has two explanations here.
    when: {fact: stuck_saving}
    then: {evidence: [{cause: wrong_nic, strength: 0.3}, {cause: rank_only_save, strength: 0.3}]}
"""

CAUSES = {
    "shm_small": ("resources", "The container's /dev/shm is too small.", "Raise --shm-size.", 0.05),
    "wrong_nic": ("network", "NCCL picked the wrong network interface.", "Set NCCL_SOCKET_IFNAME.", 0.05),
    "rank_only_save": ("program", "Only rank 0 calls a collective.", "Call it on every rank.", 0.02),
}

INCIDENTS = """
incidents:
  - id: shm-docker-bus-error
    source: https://example.org/issues/1
    summary: Docker's default 64 MB /dev/shm was too small; a larger --shm-size fixed it.
    reporter: Multi-GPU training inside a docker container crashes at start with a bus error.
    log: "Error while creating shared memory segment /dev/shm/nccl-x (size 9637888)"
    knows: {container: docker}
    cause: shm_small
    fix: fix_shm_small
  - id: shm-kubernetes-pod
    source: https://example.org/issues/2
    summary: The pod's shared memory was tiny; mounting an emptyDir of medium Memory fixed it.
    reporter: Training in a kubernetes pod dies when NCCL starts, something about shared memory.
    cause: shm_small
    fix: fix_shm_small
  - id: nic-two-hosts-hang
    source: https://example.org/issues/3
    summary: NCCL chose the docker0 bridge on two hosts; pinning NCCL_SOCKET_IFNAME fixed it.
    reporter: Two machines, training hangs at init_process_group forever, the hosts can ping each other.
    knows: {multi_node: true}
    cause: wrong_nic
    fix: fix_wrong_nic
  - id: nic-vpn-interface
    source: https://example.org/issues/4
    summary: A VPN tunnel interface was picked for the bootstrap; excluding it fixed the hang.
    reporter: Two node job hangs at init after installing a VPN client, ping between the hosts works.
    knows: {multi_node: true}
    cause: wrong_nic
    fix: fix_wrong_nic
  - id: save-checkpoint-rank0
    source: https://example.org/issues/5
    summary: save_checkpoint runs a barrier inside and was called on rank 0 only.
    reporter: Training hangs forever when it saves the first checkpoint; saving is guarded by is_main_process.
    cause: rank_only_save
    fix: fix_rank_only_save
"""


def _cause_file(cause_id: str) -> str:
    area, explanation, step, prior = CAUSES[cause_id]
    return yaml.safe_dump({
        "cause": {"id": cause_id, "title": cause_id, "area": area, "explanation": explanation,
                  "fixes": [f"fix_{cause_id}"], "references": [f"https://example.org/{cause_id}"], "prior": prior},
        "fixes": [{"id": f"fix_{cause_id}", "title": f"Fix {cause_id}", "steps": [step]}],
    })


def _kb_folder(root: Path, incidents: str = INCIDENTS) -> Path:
    (root / "vocabulary").mkdir(parents=True)
    (root / "vocabulary" / "core.yaml").write_text(VOCABULARY)
    for cause_id, (area, *_rest) in CAUSES.items():
        (root / "causes" / area).mkdir(parents=True, exist_ok=True)
        (root / "causes" / area / f"{cause_id}.yaml").write_text(_cause_file(cause_id))
    (root / "incidents").mkdir()
    (root / "incidents" / "library.yaml").write_text(incidents)
    return root


@pytest.fixture(scope="module")
def doctor(tmp_path_factory) -> Doctor:
    folder = _kb_folder(tmp_path_factory.mktemp("kb"))
    return Doctor(load_files(kb_files(folder), folder))


def _similar_evidence(session: Session, cause_id: str):
    return [e for d in session.diagnoses() if d.id == cause_id for e in d.evidence if e.rule == SIMILAR]


def test_words_like_a_reporters_find_that_incident_and_weigh_its_cause(doctor):
    session = doctor.session()
    session.tell("our two node run hangs at init_process_group; the machines ping each other fine")
    similar = session.similar()
    assert [i.cause for i in similar[:2]] == ["wrong_nic", "wrong_nic"]
    assert similar[0].source.startswith("https://example.org/issues/")
    assert all(0 < i.score <= 1 for i in similar)
    assert [s.score for s in similar] == sorted((s.score for s in similar), reverse=True)
    [item] = _similar_evidence(session, "wrong_nic")
    assert 0 < item.strength <= WEIGHT
    assert "nic-two-hosts-hang" in item.description and "https://example.org/issues/3" in item.description
    assert session.diagnoses()[0].id == "wrong_nic"


def test_how_names_the_incidents(doctor):
    session = doctor.session()
    session.tell("training hangs when it saves the first checkpoint, the save is under is_main_process")
    how = session.how("rank_only_save")
    [step] = [r for r in how.rules if r["rule"] == SIMILAR]
    assert [i["id"] for i in step["incidents"]] == ["save-checkpoint-rank0"]
    assert step["incidents"][0]["source"] == "https://example.org/issues/5"
    assert step["incidents"][0]["defined_at"].startswith("incidents/library.yaml:")
    assert "save-checkpoint-rank0" in step["description"]


def test_a_log_signature_alone_finds_incidents_that_hit_it(doctor):
    session = doctor.session()
    session.add_log(["[rank3] NCCL WARN Error while creating shared memory segment /dev/shm/nccl-q (size 1)"])
    assert session.similar()[0].id == "shm-docker-bus-error"


def test_a_fired_rule_outweighs_any_number_of_similar_incidents(doctor):
    """Words that read like the wrong-NIC reports, and a log line a rule reads as /dev/shm."""
    session = doctor.session()
    for incident in ("nic-two-hosts-hang", "nic-vpn-interface"):
        session.tell(doctor.kb.incidents[incident].reporter)
    session.set_fact("multi_node", True)
    session.add_log(["NCCL WARN Error while creating shared memory segment /dev/shm/nccl-a (size 4)"])
    by_id = {d.id: d for d in session.diagnoses()}
    [case_based] = [e for e in by_id["wrong_nic"].evidence if e.rule == SIMILAR]
    assert WEIGHT / 2 < case_based.strength <= WEIGHT  # near what similar incidents can give
    assert session.diagnoses()[0].id == "shm_small"


def test_small_talk_finds_no_incident(doctor):
    for text in ("hello", "thanks, it works now", "what is this tool"):
        session = doctor.session()
        session.tell(text)
        assert session.similar() == [], text
        assert not any(e.rule == SIMILAR for d in session.diagnoses() for e in d.evidence), text


def test_an_incidents_own_description_finds_it_first(doctor):
    for incident in doctor.kb.incidents.values():
        session = doctor.session()
        session.tell(incident.reporter)
        if incident.log:
            session.add_log(incident.log.splitlines())
        assert session.similar()[0].id == incident.id


def test_leave_one_out_by_id_or_source(doctor):
    incident = doctor.kb.incidents["save-checkpoint-rank0"]
    for exclude in ([incident.id], [incident.source]):
        session = doctor.session(leave_out=exclude)
        session.tell(incident.reporter)
        assert incident.id not in [i.id for i in session.similar()]
        assert not _similar_evidence(session, "rank_only_save")
    with pytest.raises(SessionError):
        doctor.session(leave_out="save-checkpoint-rank0")


def test_case_based_evidence_can_be_turned_off(doctor):
    session = doctor.session(case_based=False)
    session.tell("two machines, training hangs at init_process_group, the hosts can ping each other")
    assert session.similar() == []
    assert not any(e.rule == SIMILAR for d in session.diagnoses() for e in d.evidence)


def test_a_fact_known_otherwise_makes_an_incident_less_similar(doctor):
    def score(**facts) -> float:
        session = doctor.session()
        session.tell("the job hangs at init_process_group")
        for name, value in facts.items():
            session.set_fact(name, value)
        return next((i.score for i in session.similar() if i.id == "nic-two-hosts-hang"), 0.0)

    assert score(multi_node=True) > score() > score(multi_node=False)


def test_state_keeps_exclusions_and_finds_the_same_incidents(doctor):
    session = doctor.session(leave_out=["shm-kubernetes-pod"])
    session.tell("inside a docker container: NCCL WARN Error while creating shared memory segment /dev/shm/x")
    restored = Session.from_json(doctor, session.to_json())
    assert restored.similar() == session.similar()
    assert "shm-kubernetes-pod" not in [i.id for i in restored.similar()]
    assert restored.profile() == session.profile()
    plain = doctor.session()
    assert "leave_out" not in plain.to_dict() and "case_based" not in plain.to_dict()
    off = Session.from_json(doctor, doctor.session(case_based=False).to_json())
    off.tell("two machines hang at init_process_group and can ping each other")
    assert off.similar() == []


def test_report_lists_similar_incidents_with_links(doctor):
    session = doctor.session()
    session.tell("Training inside a docker container crashes at start with a bus error")
    similar = session.report()["similar"]
    assert similar and similar[0]["id"] == "shm-docker-bus-error"
    assert set(similar[0]) >= {"source", "summary", "cause", "score"}
    json.dumps(similar)


def test_priors_come_from_the_library_smoothed_by_the_stated_ones(doctor):
    kb = doctor.kb
    priors = doctor.compiled.priors
    assert sum(priors.values()) == pytest.approx(1.0)
    # 2 + 1.5*0.05/0.12 = 2.625 incidents' worth for shm_small out of 5 + 3
    assert priors["shm_small"] == pytest.approx((2 + 3 * 0.05 / 0.12) / 8)
    assert priors["rank_only_save"] == pytest.approx((1 + 3 * 0.02 / 0.12) / 8)
    assert priors["wrong_nic"] == priors["shm_small"]
    left_out = library_priors(kb.causes, kb.incidents, {"save-checkpoint-rank0"})
    assert left_out["rank_only_save"] == pytest.approx((0 + 3 * 0.02 / 0.12) / 7)
    empty = library_priors(kb.causes, {})
    assert empty == pytest.approx({c: cause.prior / 0.12 for c, cause in kb.causes.items()})


def test_leave_one_out_priors_decide_ties(doctor):
    """Two causes a rule supports equally: the one the library reports more often leads, until
    its incidents are left out."""
    def first(exclude: list[str]) -> str:
        session = doctor.session(leave_out=exclude, case_based=False)
        session.set_fact("stuck_saving", True)
        [a, b] = session.diagnoses()[:2]
        assert a.confidence == b.confidence
        return a.id

    assert first([]) == "wrong_nic"
    assert first(["nic-two-hosts-hang", "nic-vpn-interface"]) == "rank_only_save"


def test_profiles_are_kept_in_the_artifact_and_not_rebuilt_at_start(tmp_path, monkeypatch):
    folder = _kb_folder(tmp_path / "kb")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("NCCL_DOCTOR_NO_CACHE", raising=False)
    kb, extras = knowledge.load_knowledge(folder)
    state = extras["similarity"]
    assert set(state["vectors"]) == set(kb.incidents)
    assert "s:shm_segment" in state["vectors"]["shm-docker-bus-error"]
    assert state["facts"]["shm-docker-bus-error"]["container"] == "container=docker"

    def no_rescan(*args, **kwargs):
        raise AssertionError("incident profiles recomputed at start")

    monkeypatch.setattr(session_module, "incident_profile", no_rescan)
    kb, extras = knowledge.load_knowledge(folder)  # from the cache
    session = Doctor(kb, extras=extras).session()
    session.tell("docker container, bus error at start")
    assert session.similar()[0].id == "shm-docker-bus-error"
    session.questions()
    monkeypatch.undo()
    fresh = Doctor(kb).session()
    fresh.tell("docker container, bus error at start")
    assert fresh.similar() == session.similar()
    assert session.doctor.compiled.priors == fresh.doctor.compiled.priors
    assert set(session.doctor.compiled.priors) == set(kb.causes)


def test_a_kb_without_incidents_gives_no_case_based_evidence(tmp_path):
    folder = _kb_folder(tmp_path, "incidents: []\n")
    doctor = Doctor(load_files(kb_files(folder), folder))
    session = doctor.session()
    session.tell("two machines hang at init_process_group")
    assert session.similar() == [] and session.report()["similar"] == []
    assert sum(doctor.compiled.priors.values()) == pytest.approx(1.0)


# ------------------------------------------------------------------ front ends

def test_markdown_report_links_the_similar_incidents(doctor):
    from nccl_doctor.report import session_markdown

    session = doctor.session()
    session.tell("Training inside a docker container crashes at start with a bus error")
    for redact in (False, True):
        text = session_markdown(session, redact=redact)
        section = text[text.index("## Similar reported incidents"):]
        first = section.splitlines()[2]
        assert first.startswith("- Docker's default 64 MB /dev/shm was too small; a larger --shm-size fixed it. — ")
        assert "`shm_small`" in first and first.endswith("alike: <https://example.org/issues/1>")


def test_markdown_report_without_similar_incidents_has_no_section(doctor):
    from nccl_doctor.report import session_markdown

    session = doctor.session()
    session.tell("hello")
    assert "Similar reported incidents" not in session_markdown(session)


def test_one_shot_json_has_similar(tmp_path):
    import os
    import subprocess
    import sys

    folder = _kb_folder(tmp_path / "kb")
    done = subprocess.run(
        [sys.executable, "-m", "nccl_doctor.cli", "--symptom", "two machines hang at init_process_group, ping works",
         "--json", "--no-probes"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "NCCL_DOCTOR_KB": str(folder), "XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr
    similar = json.loads(done.stdout)["similar"]
    assert [i["cause"] for i in similar[:2]] == ["wrong_nic", "wrong_nic"]
    assert {"source", "summary", "cause", "score"} <= set(similar[0])
    assert similar[0]["source"].startswith("https://example.org/issues/")
    text = subprocess.run(
        [sys.executable, "-m", "nccl_doctor.cli", "--symptom", "two machines hang at init_process_group, ping works",
         "--no-probes", "--no-input"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "NCCL_DOCTOR_KB": str(folder), "XDG_CACHE_HOME": str(tmp_path / "cache")}).stdout
    shown = text[text.index("Similar reported incidents"):].splitlines()[1]
    assert similar[0]["summary"] in shown and shown.endswith(similar[0]["source"])


def test_facts_and_fired_rules_do_not_read_the_library(tmp_path, monkeypatch):
    """Lint and the example tests only need facts and fired rules: no incident is profiled."""
    folder = _kb_folder(tmp_path)
    doctor = Doctor(load_files(kb_files(folder), folder))

    def no_profiles(*args, **kwargs):
        raise AssertionError("incident profiles computed")

    monkeypatch.setattr(session_module, "incident_profile", no_profiles)
    session = doctor.session()
    session.add_log(["Error while creating shared memory segment /dev/shm/nccl-x"])
    assert session.facts()["shm_error"].value is True
    assert "shm_error_means_shm" in session.fired_rules()
    with pytest.raises(AssertionError, match="incident profiles computed"):
        session.diagnoses()


def test_a_state_with_bad_exclusions_is_refused(doctor):
    from nccl_doctor.errors import StateError

    good = json.loads(doctor.session(leave_out=["shm-kubernetes-pod"]).to_json())
    for key, bad in (("leave_out", "shm-kubernetes-pod"), ("leave_out", [3]),
                     ("case_based", "no")):
        with pytest.raises(StateError, match=key):
            Session.from_json(doctor, {**good, key: bad})


def test_similar_incidents_alone_do_not_make_a_cause_supported(doctor):
    session = doctor.session()
    session.tell("training hangs when it saves the first checkpoint, the save is under is_main_process")
    [diagnosis] = [d for d in session.diagnoses() if d.id == "rank_only_save"]
    assert any(e.rule == SIMILAR for e in diagnosis.evidence)
    assert not diagnosis.supported and not session.recognised()


def _relevance(session: Session, cause_id: str):
    return next((e for d in session.diagnoses() if d.id == cause_id for e in d.evidence if e.rule == RELEVANCE), None)


def test_the_words_of_a_causes_incidents_are_relevance_evidence_for_it(doctor):
    """Words only the reporters used (none in the cause's own text) still point at their cause,
    as case-based evidence: a session without it reads the KB's words alone."""
    text = "Two node job hangs at init after installing a VPN client, ping between the hosts works."
    with_library = doctor.session()
    with_library.tell(text)
    kb_only = doctor.session(case_based=False)
    kb_only.tell(text)
    found = _relevance(with_library, "wrong_nic")
    assert found is not None and "vpn" in found.description and 0 < found.strength <= LIBRARY_WEIGHT
    assert _relevance(kb_only, "wrong_nic") is None


def test_an_incident_left_out_lends_its_cause_none_of_its_words(doctor):
    text = "Two node job hangs at init after installing a VPN client, ping between the hosts works."
    whole = doctor.session()
    whole.tell(text)
    left_out = doctor.session(leave_out=["nic-vpn-interface"])
    left_out.tell(text)
    assert "vpn" in _relevance(whole, "wrong_nic").description
    kept = _relevance(left_out, "wrong_nic")  # the other incident's words are too few to count here
    assert kept is None or ("vpn" not in kept.description and kept.strength < _relevance(whole, "wrong_nic").strength)
    assert "vpn" not in doctor.library_relevance.evidence([text], {"wrong_nic": incident_words(
        doctor.kb.incidents["nic-vpn-interface"])}).get("wrong_nic", (0, ()))[1]


def test_an_answer_counts_through_the_rules_and_leaves_the_similar_incidents_alone(doctor):
    """The question was chosen for what its answer does to the rules; the answer does not also
    reshuffle the nearest incidents (which can take a cause's case-based evidence away even when
    the answer says nothing about it: bench_consultation's "made worse" cases)."""
    session = doctor.session()
    session.tell("the job hangs at init_process_group")
    before = [(i.id, i.score) for i in session.similar()]
    assert before
    session.answer("multi_node", True)
    assert session.facts()["multi_node"].value is True
    assert [(i.id, i.score) for i in session.similar()] == before
    stated = doctor.session()  # the same fact stated by the user (a flag, a report) does count
    stated.tell("the job hangs at init_process_group")
    stated.set_fact("multi_node", True)
    assert [(i.id, i.score) for i in stated.similar()] != before


def test_a_fact_the_user_stated_stays_in_the_profile_when_an_answer_repeats_it(doctor):
    session = doctor.session()
    session.tell("NCCL fails in a docker container")
    assert session.profile().facts["container"] == "container=docker"
    session.answer("container", "docker")
    assert session.profile().facts["container"] == "container=docker"


def test_whether_a_log_was_given_is_not_compared_with_the_library(doctor):
    """log_given describes the report, not the failure: a log pasted in an answer must not make
    every incident that came with a log more similar."""
    session = doctor.session()
    session.add_log(["Error while creating shared memory segment /dev/shm/nccl-x (size 9637888)"])
    assert session.facts()["log_given"].value is True
    assert "log_given" not in session.profile().facts
