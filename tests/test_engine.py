"""The engine on a small purpose-built KB: chaining, termination, evidence, questions, HOW/WHY."""
from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nccl_doctor.engine import Doctor, Session, SessionError, StateError, UnknownFact
from nccl_doctor.engine.certainty import combine, combine_all
from nccl_doctor.kb.load import load_files

KB = """
facts:
  - {id: a, type: bool, question: Is A true?}
  - {id: b, type: bool, question: Is B true?}
  - {id: c, type: bool}
  - {id: d, type: bool}
  - {id: loop1, type: bool}
  - {id: loop2, type: bool}
  - {id: size, type: number, question: How big?}
  - {id: ver, type: version, question: Which version?}
  - {id: mode, type: choice, choices: [red, blue], question: Which mode?}
symptoms:
  - {id: says_a, phrases: [alpha failure], sets: {a: true}}
signatures:
  - {id: sig_b, pattern: 'BETA (?P<n>\\d+)', needles: [BETA], sets: {b: true, size: "{n}"}}
rules:
  - id: a_and_b_gives_c
    description: A and B together mean C.
    when: {all: [{fact: a}, {fact: b}]}
    then: {set: {c: true}}
  - id: c_supports_x
    description: C points at X.
    when: {fact: c}
    then: {evidence: [{cause: x, strength: 0.6}]}
  - id: a_supports_y
    description: A points at Y.
    when: {fact: a}
    then: {evidence: [{cause: y, strength: 0.5}]}
  - id: mode_blue_against_y
    description: Blue mode rules Y out.
    when: {fact: mode, eq: blue}
    then: {evidence: [{cause: y, strength: -0.8}]}
  - id: mode_red_for_y
    description: Red mode supports Y.
    when: {fact: mode, eq: red}
    then: {evidence: [{cause: y, strength: 0.3}]}
  - id: big_size_for_x
    when: {fact: size, gt: 100}
    then: {evidence: [{cause: x, strength: 0.4}]}
  - id: old_version_for_z
    when: {fact: ver, lt: "2.18"}
    then: {evidence: [{cause: z, strength: 0.7}]}
  - id: b_absent_for_z
    when: {all: [{fact: a}, {fact: b, known: false}]}
    then: {evidence: [{cause: z, strength: 0.2}]}
  - id: loop_forward
    when: {fact: loop1}
    then: {set: {loop2: true}}
  - id: loop_back
    when: {fact: loop2}
    then: {set: {loop1: true}, evidence: [{cause: z, strength: 0.1}]}
causes:
  - {id: x, title: Cause X, area: network, explanation: X., fixes: [fx_check, fx_change], references: ['https://example.org/x'], prior: 0.1}
  - {id: y, title: Cause Y, area: program, explanation: Y., fixes: [fx_change, fy], references: ['seed:000_a.txt'], prior: 0.1}
  - {id: z, title: Cause Z, area: version, explanation: Z., fixes: [fz], references: ['https://example.org/z'], prior: 0.05}
fixes:
  - {id: fx_check, title: Check X, kind: check, cost: 1, steps: [look]}
  - {id: fx_change, title: Change shared, steps: [change it], commands: [do-it]}
  - {id: fy, title: Fix Y, kind: workaround, steps: [work around]}
  - {id: fz, title: Fix Z, steps: [upgrade]}
"""


@pytest.fixture(scope="module")
def doctor(tmp_path_factory) -> Doctor:
    folder = tmp_path_factory.mktemp("kb")
    (folder / "test.yaml").write_text(KB)
    return Doctor(load_files([folder / "test.yaml"]))


def ids(session: Session) -> list[str]:
    return [d.id for d in session.diagnoses()]


def test_chaining_derives_facts_with_their_sources(doctor):
    s = doctor.session()
    s.tell("we see an alpha failure")
    s.add_log(["x", "BETA 250"], name="r0.log")
    facts = s.facts()
    assert facts["a"].source.kind == "text"
    assert facts["b"].source.detail == "r0.log:2"
    assert facts["size"].value == 250
    assert facts["c"].source.detail == "a_and_b_gives_c"
    assert set(facts["c"].because) == {"a", "b"}
    assert ids(s)[0] == "x"  # 0.6 combined with 0.4


def test_evidence_for_and_against_combine(doctor):
    s = doctor.session()
    s.set_fact("a", True)
    y_alone = {d.id: d.confidence for d in s.diagnoses()}["y"]
    s.answer("mode", "blue")
    y_after = {d.id: d.confidence for d in s.diagnoses()}.get("y", 0.0)
    assert y_alone == pytest.approx(0.5)
    assert y_after < y_alone
    assert y_after == pytest.approx(0.0)  # (0.5 - 0.8) / (1 - 0.5) < 0: not raised
    assert combine(0.5, -0.8) == pytest.approx(-0.6)
    assert combine_all([0.6, 0.4]) == pytest.approx(0.76)
    assert combine(0.4, 0.6) == combine(0.6, 0.4)


def test_cyclic_rules_terminate_and_fire_once(doctor):
    s = doctor.session()
    s.set_fact("loop1", True)
    state = s._inference()
    assert [f.rule for f in state.fired].count("loop_back") == 1
    assert s.facts()["loop2"].value is True
    assert {d.id: d.confidence for d in s.diagnoses()}["z"] == pytest.approx(0.1)


def test_absence_test_and_unknown_comparisons(doctor):
    s = doctor.session()
    s.set_fact("a", True)
    assert "b_absent_for_z" in s._inference().fired_ids
    s.set_fact("b", True)
    assert "b_absent_for_z" not in s._inference().fired_ids
    s2 = doctor.session()
    s2.set_fact("a", True)
    assert "big_size_for_x" not in s2._inference().fired_ids  # size unknown: no firing


def test_versions_compare_numerically(doctor):
    s = doctor.session()
    s.set_fact("ver", "2.9.6")
    assert "z" in ids(s)
    s.answer("ver", "2.18.3+cuda12.1")
    assert "z" not in ids(s)


def test_question_choice_prefers_separating_and_never_repeats(doctor):
    s = doctor.session()
    s.set_fact("a", True)  # y raised; mode separates y, b separates x (via c)
    questions = s.questions(limit=5)
    assert questions, "a question should be worth asking"
    assert all(q.id != "a" for q in questions)
    assert {"mode", "b"} & {q.id for q in questions}
    best = questions[0]
    assert best.gain >= questions[-1].gain
    s.dont_know(best.id)
    assert best.id not in [q.id for q in s.questions(limit=5)]
    for q in s.questions(limit=5):
        s.dont_know(q.id)
    for _ in range(5):
        q = s.next_question()
        if q is None:
            break
        s.dont_know(q.id)
    assert s.next_question() is None  # nothing useful left


def test_why_and_how_are_data(doctor):
    s = doctor.session()
    s.tell("alpha failure")
    s.add_log(["BETA 5"], name="log")
    how = s.how("x")
    assert how.rules[0]["rule"] == "c_supports_x"
    fact_c = how.rules[0]["facts"][0]
    assert fact_c["fact"] == "c" and fact_c["derived_by"] == "a_and_b_gives_c"
    assert {f["fact"] for f in fact_c["from_facts"]} == {"a", "b"}
    s2 = doctor.session()
    s2.set_fact("a", True)
    why = s2.why("mode")
    assert [c["id"] for c in why.causes] == ["y"]
    assert why.causes[0]["by_answer"]["blue"] < why.causes[0]["by_answer"]["red"]


def test_plan_orders_checks_first_and_dedupes_shared_fixes(doctor):
    s = doctor.session()
    s.tell("alpha failure")
    s.add_log(["BETA 500"])
    s.answer("mode", "red")
    plan = s.plan()
    fixes = [step.fix for step in plan.steps]
    assert fixes[0] == "fx_check"
    assert fixes.count("fx_change") == 1
    shared = next(step for step in plan.steps if step.fix == "fx_change")
    assert set(shared.for_causes) == {"x", "y"}
    assert fixes.index("fy") > fixes.index("fx_change")  # workarounds last


def test_answers_can_be_changed_and_retracted(doctor):
    s = doctor.session()
    s.set_fact("a", True)
    s.answer("mode", "blue")
    assert "y" not in ids(s)
    s.answer("mode", "red")
    assert "y" in ids(s)
    s.retract("mode")
    assert "mode" not in s.facts()


def test_bad_input_is_named(doctor):
    s = doctor.session()
    with pytest.raises(UnknownFact, match="nope"):
        s.answer("nope", True)
    with pytest.raises(SessionError, match="yes/no"):
        s.answer("a", "perhaps")
    with pytest.raises(SessionError, match="red, blue"):
        s.answer("mode", "green")


def test_session_json_round_trip(doctor):
    s = doctor.session()
    s.tell("alpha failure")
    s.add_log(["BETA 500"], name="r1.log")
    s.answer("mode", "red")
    s.dont_know("ver")
    restored = Session.from_json(doctor, s.to_json())
    assert restored.report() == s.report()
    assert restored.to_json() == s.to_json()
    with pytest.raises(StateError, match="version"):
        Session.from_json(doctor, s.to_json().replace('"version": 1', '"version": 99'))
    with pytest.raises(StateError):
        Session.from_json(doctor, "{not json")
    with pytest.raises(StateError):
        Session.from_json(doctor, '{"format": "something else"}')


ENGINE_DIR = Path(__file__).resolve().parent.parent / "engine"
FORBIDDEN_CALLS = {"open", "print", "input"}
FORBIDDEN_MODULES = {"os", "sys", "subprocess", "socket", "pathlib", "io", "shutil", "torch", "textual", "logging"}


@pytest.mark.parametrize("path", sorted(ENGINE_DIR.glob("*.py")), ids=lambda p: p.name)
def test_engine_core_is_pure(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id not in FORBIDDEN_CALLS, f"{path.name}:{node.lineno} calls {node.func.id}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                assert alias.name.split(".")[0] not in FORBIDDEN_MODULES, f"{path.name} imports {alias.name}"
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            assert node.module.split(".")[0] not in FORBIDDEN_MODULES, f"{path.name} imports {node.module}"


def test_engine_import_pulls_in_neither_torch_nor_textual():
    code = textwrap.dedent("""
        import sys
        import nccl_doctor.engine
        from nccl_doctor import load_doctor
        s = load_doctor().session(); s.tell("hang at init"); s.diagnoses(); s.plan()
        bad = sorted(m for m in sys.modules if m.split('.')[0] in {'torch', 'textual'})
        assert not bad, bad
    """)
    subprocess.run([sys.executable, "-c", code], check=True)


def test_fuzzy_words_forgive_typos_but_not_a_shorter_common_word(tmp_path):
    kb = tmp_path / "words.yaml"
    kb.write_text(
        "facts:\n  - {id: ib, type: bool}\n  - {id: slurm, type: bool}\n  - {id: frozen, type: bool}\n"
        "symptoms:\n"
        "  - {id: says_ib, phrases: [connectx], sets: {ib: true}}\n"
        "  - {id: says_slurm, phrases: [sbatch], sets: {slurm: true}}\n"
        "  - {id: says_frozen, phrases: [freezes, timeouts], sets: {frozen: true}}\n")
    doctor = Doctor(load_files([kb]))
    said = lambda text: {m.symptom for m in doctor.session().tell(text)}  # noqa: E731
    assert said("the client prints connect failures") == set()
    assert said("process 1 runs batch 41") == set()
    assert said("it freezse at step 3") == {"says_frozen"}  # a typo still counts
    assert said("it reports a timeout") == {"says_frozen"}  # so does the singular of a plural
    assert said("ConnectX-6 NICs, submitted with sbatch") == {"says_ib", "says_slurm"}


def test_rules_true_on_nothing_fire_at_start_and_others_wait_for_their_facts(tmp_path):
    kb = tmp_path / "absent.yaml"
    kb.write_text(
        "facts:\n  - {id: a, type: bool, question: A?}\n  - {id: b, type: bool, question: B?}\n"
        "rules:\n"
        "  - {id: nothing_about_b, when: {fact: b, known: false}, then: {evidence: [{cause: x, strength: 0.3}]}}\n"
        "  - {id: a_without_b, when: {all: [{fact: a}, {fact: b, known: false}]}, then: {evidence: [{cause: y, strength: 0.4}]}}\n"
        "  - {id: not_known_b, when: {not: {fact: b, known: true}}, then: {evidence: [{cause: z, strength: 0.2}]}}\n"
        "causes:\n"
        "  - {id: x, title: X, area: program, explanation: X., fixes: [f], references: ['https://example.org/x']}\n"
        "  - {id: y, title: Y, area: program, explanation: Y., fixes: [f], references: ['https://example.org/y']}\n"
        "  - {id: z, title: Z, area: program, explanation: Z., fixes: [f], references: ['https://example.org/z']}\n"
        "fixes:\n  - {id: f, title: F, steps: [s]}\n")
    doctor = Doctor(load_files([kb]))
    assert {doctor.compiled.rules[i].id for i in doctor.compiled.absence_rules} == {"nothing_about_b", "not_known_b"}
    session = doctor.session()
    assert sorted(ids(session)) == ["x", "z"]
    session.answer("a", True)
    assert sorted(ids(session)) == ["x", "y", "z"]
    session.answer("b", False)
    assert ids(session) == []


REPEATING_KB = """
facts:
  - {id: hang, type: bool}
  - {id: multi, type: bool}
  - {id: upgraded, type: bool}
  - {id: stall, type: bool}
  - {id: blue, type: bool}
rules:
  - id: stall_from_hang
    when: {fact: hang}
    then: {set: {stall: true}}
  - {id: hang_for_x, when: {fact: hang}, then: {evidence: [{cause: x, strength: 0.2}]}}
  - {id: stall_for_x, when: {fact: stall}, then: {evidence: [{cause: x, strength: 0.1}]}}
  - {id: multi_hang_for_x, when: {all: [{fact: multi}, {fact: hang}]}, then: {evidence: [{cause: x, strength: 0.3}]}}
  - {id: multi_upgrade_for_x, when: {all: [{fact: multi}, {fact: upgraded}]}, then: {evidence: [{cause: x, strength: 0.25}]}}
  - {id: blue_against_x, when: {fact: blue}, then: {evidence: [{cause: x, strength: -0.2}]}}
  - {id: blue_hang_against_x, when: {all: [{fact: blue}, {fact: hang}]}, then: {evidence: [{cause: x, strength: -0.1}]}}
causes:
  - {id: x, title: Cause X, area: network, explanation: X., fixes: [fx], references: ['https://example.org/x'], prior: 0.1}
fixes:
  - {id: fx, title: Fix X, steps: [fix it]}
"""


def test_a_rule_resting_on_facts_a_stronger_rule_read_counts_at_the_repeated_share(tmp_path):
    from nccl_doctor.engine.certainty import REPEATED, combine_evidence

    (tmp_path / "kb.yaml").write_text(REPEATING_KB)
    doctor = Doctor(load_files([tmp_path / "kb.yaml"]))
    s = doctor.session()
    for fact in ("upgraded", "hang", "multi", "blue"):
        s.set_fact(fact, True)
    confidence = {d.id: d.confidence for d in s.diagnoses()}["x"]
    # multi_hang_for_x (0.3) read {multi, hang}: hang_for_x and stall_for_x (stall is derived from
    # hang) rest on nothing more and count at REPEATED; multi_upgrade_for_x reads 'upgraded', which
    # no stronger rule read, and counts in full; evidence against is never discounted
    expected = combine_all([0.3, 0.25, 0.2 * REPEATED, 0.1 * REPEATED, -0.2, -0.1])
    assert confidence == pytest.approx(expected)
    assert confidence < combine_all([0.3, 0.25, 0.2, 0.1, -0.2, -0.1])
    # the same evidence in any order gives the same certainty; evidence that is no rule (None:
    # word relevance, similar incidents) always counts in full
    roots = {"a": frozenset({"hang"}), "b": frozenset({"hang", "multi"}), "c": frozenset({"hang"})}
    items = [("a", 0.2), ("b", 0.3), ("words", 0.15), ("c", 0.2)]
    assert combine_evidence(items, roots.get) == pytest.approx(combine_all([0.3, 0.1, 0.1, 0.15]))
    assert combine_evidence(items[::-1], roots.get) == combine_evidence(items, roots.get)


def test_a_lone_rule_and_unrelated_rules_count_in_full(tmp_path):
    (tmp_path / "kb.yaml").write_text(REPEATING_KB)
    doctor = Doctor(load_files([tmp_path / "kb.yaml"]))
    s = doctor.session()
    s.set_fact("multi", True)
    s.set_fact("upgraded", True)
    assert {d.id: d.confidence for d in s.diagnoses()}["x"] == pytest.approx(0.25)
    s.set_fact("hang", True)  # hang and stall both rest on 'hang', which the strongest rule read too
    assert {d.id: d.confidence for d in s.diagnoses()}["x"] == pytest.approx(
        combine_all([0.3, 0.25, 0.1, 0.05]))
