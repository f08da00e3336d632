"""Version tables (``versions:`` in the KB): the format, the rules each row becomes, lint, and what
the packaged tables conclude from the versions a user or a log states - both ways: a stated release
in a table's range raises its cause and names the upgrade target; one outside it does not."""
from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from nccl_doctor.engine import Doctor
from nccl_doctor.kb.lint import lint_kb
from nccl_doctor.kb.load import kb_files, load_files
from nccl_doctor.kb.schema import VersionTable
from nccl_doctor.kb.versions import rule_ids, table_rules

MINI = """
facts:
  - {id: lib_version, type: version, question: Which lib?}
  - {id: other_version, type: version}
  - {id: drv_version, type: version, question: Which driver?}
  - {id: fixed_in, type: version}
  - {id: needs_drv, type: version}
  - {id: hangs, type: bool, question: Hangs?}
symptoms:
  - {id: says_lib, patterns: ['\\blib (?P<v>\\d+\\.\\d+(\\.\\d+)?)'], sets: {lib_version: "{v}"},
     examples: {fires: [{text: "lib 2.4"}], silent: [{text: "lib"}]}}
causes:
  - {id: buggy, title: B, area: version, explanation: a lib release that hangs, fixes: [f], references: ['https://example.org']}
  - {id: old_driver, title: D, area: version, explanation: a driver older than the release needs, fixes: [f],
     references: ['https://example.org']}
fixes:
  - {id: f, title: F, steps: [s]}
versions:
  - id: lib_ships
    kind: lookup
    description: The lib release ships this other release
    key: lib_version
    references: ['https://example.org/ships']
    rows:
      - {version: "2.9", set: {other_version: "9.0"}}
      - {version: "2.10", set: {other_version: "10.0"}}
    examples:
      fires: [{text: "lib 2.10.1"}]
      silent: [{text: "lib 2.8"}]
  - id: lib_bugs
    kind: known_bugs
    description: lib releases with a known hang
    key: lib_version
    cause: buggy
    target: fixed_in
    references: ['https://example.org/bugs']
    rows:
      - id: lib_24_hang
        version: "2.4"
        until: "2.4.6"
        what: lib 2.4.0 - 2.4.5 hangs
        when: {fact: hangs}
        strength: 0.7
        references: ['https://example.org/bugs/1']
        examples:
          fires: [{text: "lib 2.4.2", facts: {hangs: true}}]
          silent: [{text: "lib 2.4.6", facts: {hangs: true}}, {text: "lib 2.4.2", facts: {hangs: false}}]
  - id: other_needs_driver
    kind: minimum
    description: The other release needs a newer driver
    key: other_version
    compare: drv_version
    cause: old_driver
    target: needs_drv
    references: ['https://example.org/drivers']
    rows:
      - {version: "9.0", needs: "400"}
      - {version: "10.0", needs: "500", what: "10.0 GA needs 500.12"}
    examples:
      fires: [{text: "lib 2.10", facts: {drv_version: "450.1"}}]
      silent: [{text: "lib 2.10", facts: {drv_version: "510"}}, {text: "lib 2.9", facts: {drv_version: "450.1"}}]
"""


def _doctor(tmp_path: Path, text: str = MINI) -> Doctor:
    folder = tmp_path / "kb"
    folder.mkdir(exist_ok=True)
    (folder / "kb.yaml").write_text(text)
    return Doctor(load_files(kb_files(folder), folder))


def _session(doctor: Doctor, text: str = "", **facts):
    session = doctor.session()
    for name, value in facts.items():
        session.set_fact(name, value)
    if text:
        session.tell(text)
    return session


def test_each_row_becomes_a_rule_over_its_release_range(tmp_path):
    doctor = _doctor(tmp_path)
    assert set(rule_ids(doctor.kb.versions["lib_ships"])) == {"lib_ships_2_9_other_version", "lib_ships_2_10_other_version"}
    # releases compare as numbers: 2.10.1 is after 2.9, and the last row is open-ended
    assert _session(doctor, "lib 2.10.1").facts()["other_version"].value == "10.0"
    assert _session(doctor, "lib 2.9.3").facts()["other_version"].value == "9.0"
    assert "other_version" not in _session(doctor, "lib 2.8").facts()


def test_a_lookup_never_overrides_a_stated_value(tmp_path):
    session = _session(_doctor(tmp_path), "lib 2.10", other_version="9.5")
    assert session.facts()["other_version"].value == "9.5"


def test_a_known_bug_names_the_release_that_fixed_it(tmp_path):
    doctor = _doctor(tmp_path)
    session = _session(doctor, "lib 2.4.2", hangs=True)
    (diagnosis,) = [d for d in session.diagnoses() if d.id == "buggy"]
    assert abs(diagnosis.confidence - 0.7 * 0.9) < 1e-6  # the stated release's certainty
    assert session.facts()["fixed_in"].value == "2.4.6"
    assert "fixed in 2.4.6" in diagnosis.evidence[0].description
    assert not [d for d in _session(doctor, "lib 2.4.6", hangs=True).diagnoses() if d.id == "buggy"]
    assert not [d for d in _session(doctor, "lib 2.4.2", hangs=False).diagnoses() if d.id == "buggy"]
    # "lib 2.4" may be 2.4.8: a fix in a patch release needs the stated patch
    assert not [d for d in _session(doctor, "lib 2.4", hangs=True).diagnoses() if d.id == "buggy"]


def test_a_minimum_compares_the_other_fact_with_the_rows_release(tmp_path):
    doctor = _doctor(tmp_path)
    session = _session(doctor, "lib 2.10", drv_version="450.1")  # lib 2.10 ships 10.0, which needs 500
    assert session.facts()["needs_drv"].value == "500"
    assert [d.id for d in session.diagnoses()] == ["old_driver"]
    assert "10.0 GA needs 500.12" in session.diagnoses()[0].evidence[0].description
    assert not _session(doctor, "lib 2.10", drv_version="500").diagnoses()
    assert not _session(doctor, "lib 2.9", drv_version="450.1").diagnoses()  # 9.0 needs only 400


def test_the_lowering_is_pure(tmp_path):
    table = _doctor(tmp_path).kb.versions["lib_bugs"]
    model = VersionTable.model_validate(table)
    assert [r.model_dump() for r in table_rules(model)] == [r.model_dump() for r in table_rules(model)]


@pytest.mark.parametrize("change, message", [
    ({"rows": [{"version": "2.10", "set": {"x": 1}}, {"version": "2.9", "set": {"x": 2}}]}, "ascending order"),
    ({"rows": [{"version": "2.9", "set": {"x": 1}}, {"version": "2.9.0", "set": {"x": 2}}]}, ""),
    ({"rows": [{"version": "2.9", "until": "2.9", "set": {"x": 1}}]}, "is not after"),
    ({"rows": [{"version": "2." + "9" * 5000, "set": {"x": 1}}]}, "String should match pattern"),
    ({"rows": [{"version": "2.9", "needs": "500"}]}, "a lookup row"),
    ({"cause": "c"}, "takes no cause"),
])
def test_malformed_tables_are_refused(change, message):
    table = {"id": "t", "kind": "lookup", "description": "d", "key": "k", "references": ["https://example.org"],
             "rows": [{"version": "1.0", "set": {"x": 1}}], **change}
    if not message:  # 2.9 and 2.9.0 are different keys: accepted
        VersionTable.model_validate(table)
        return
    with pytest.raises(ValidationError, match=message):
        VersionTable.model_validate(table)


def test_a_known_bug_without_a_reference_is_refused():
    with pytest.raises(ValidationError, match="needs a reference"):
        VersionTable.model_validate({
            "id": "t", "kind": "known_bugs", "description": "d", "key": "k", "cause": "c",
            "references": ["https://example.org"],
            "rows": [{"id": "r", "version": "1.0", "until": "1.1", "what": "w"}]})


def test_lint_checks_the_tables_facts_and_examples(tmp_path):
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "kb.yaml").write_text(MINI.replace("key: other_version", "key: hangs"))
    assert "needs a number or version fact ('hangs' is bool)" in "\n".join(lint_kb(folder))
    (folder / "kb.yaml").write_text(MINI.replace("target: fixed_in", "target: lib_version_typo"))
    assert "sets unknown fact 'lib_version_typo'" in "\n".join(lint_kb(folder))
    (folder / "kb.yaml").write_text(MINI.replace('silent: [{text: "lib 2.8"}]', 'silent: [{text: "lib 2.9"}]'))
    assert "table lib_ships: lib_ships_2_9_other_version fired on silent example 0" in "\n".join(lint_kb(folder))
    (folder / "kb.yaml").write_text(MINI)
    assert not [p for p in lint_kb(folder) if "Chinese" not in p]  # the mini KB has no zh texts


# The packaged tables, both ways.

def _packaged(text: str, log: str = ""):
    from nccl_doctor import load_doctor

    session = load_doctor().session()
    session.tell(text)
    if log:
        session.add_log(log.splitlines(), name="log")
    return session


def _rank(session, cause: str) -> int | None:
    ids = [d.id for d in session.diagnoses()]
    return ids.index(cause) if cause in ids else None


def _fix_text(session, cause: str) -> str:
    (diagnosis,) = [d for d in session.diagnoses() if d.id == cause]
    return "\n".join(step for fix in diagnosis.fixes for step in [fix["title"], *fix["steps"]])


SYSTEM_ERROR = "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:272, unhandled system error"


def test_the_nccl_a_pytorch_wheel_ships_has_a_known_bug():
    session = _packaged("two nodes fail at start, PyTorch 1.1.0", SYSTEM_ERROR)
    assert session.facts()["nccl_version"].value == "2.4.2"
    assert session.facts()["nccl_fixed_release"].value == "2.4.6"
    assert _rank(session, "nccl_known_version_bug") is not None and _rank(session, "nccl_known_version_bug") < 3
    assert "upgrade to PyTorch 1.2" in _fix_text(session, "nccl_known_version_bug")
    later = _packaged("two nodes fail at start, PyTorch 1.4.0", SYSTEM_ERROR)
    assert later.facts()["nccl_version"].value == "2.4.8"
    assert "nccl_fixed_release" not in later.facts()


def test_the_nccl_in_the_log_wins_over_the_wheel_table():
    session = _packaged("two nodes fail at start, PyTorch 1.1.0", "NCCL INFO NCCL version 2.4.8+cuda10.0\n" + SYSTEM_ERROR)
    assert session.facts()["nccl_version"].value == "2.4.8"
    assert "nccl_fixed_release" not in session.facts()


def test_a_torch_built_for_a_newer_cuda_than_the_driver_supports():
    text = "fine-tuning on two A100 deadlocks after a while and the all-gather times out; torch 2.8.0, driver {}"
    session = _packaged(text.format("535.104.05"))
    assert session.facts()["cuda_version"].value == "12.8"
    assert session.facts()["driver_minimum"].value == "570"
    assert _rank(session, "outdated_cuda_nccl_stack") == 0
    assert "pin an older PyTorch" in _fix_text(session, "outdated_cuda_nccl_stack")
    fine = _packaged(text.format("570.133.20"))
    assert "driver_minimum" not in fine.facts()
    assert _rank(fine, "outdated_cuda_nccl_stack") is None


def test_a_driver_below_the_cuda_major_is_strong_evidence():
    session = _packaged("torch 2.5.1+cu124 on driver 470, training crashes at start")
    (diagnosis,) = [d for d in session.diagnoses() if d.id == "outdated_cuda_nccl_stack"]
    assert diagnosis.confidence > 0.8
    assert {e.rule for e in diagnosis.evidence} >= {"cuda_release_needs_driver_12_4", "cuda_major_needs_driver_12_0"}


def test_a_jax_release_with_a_known_pod_stall():
    session = _packaged("on a Cloud TPU pod with jax 0.3.5 the code hangs at jax.device_count()")
    assert _rank(session, "framework_known_bug") == 0
    assert session.facts()["framework_fixed_release"].value == "0.3.6"
    assert "jax and jaxlib to 0.3.6" in _fix_text(session, "framework_known_bug")
    assert "framework_fixed_release" not in _packaged(
        "on a Cloud TPU pod with jax 0.3.4 the code hangs at jax.device_count()").facts()


@pytest.mark.parametrize("text", [
    "torch 2." + "8" * 5000 + " on driver " + "5" * 5000,
    "NCCL version 2." + "4" * 5000 + ".2 hangs; jax 0." + "3" * 5000 + ".5",
])
def test_huge_version_numbers_are_not_versions(text):
    session = _packaged(text)
    session.diagnoses()
    facts = session.facts()
    assert all(len(str(facts[name].value)) < 40 for name in facts if name.endswith("_version"))
