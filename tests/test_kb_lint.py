"""The KB lint: the packaged KB is clean, broken KBs are reported precisely, schema.json is current."""
from __future__ import annotations

from pathlib import Path

from nccl_doctor.kb.lint import SCHEMA_PATH, lint_kb, schema_text


def test_packaged_kb_passes_lint():
    problems = lint_kb(examples=False)  # tests/test_kb_examples.py runs every example
    assert problems == [], "\n".join(problems)


def test_committed_json_schema_is_current():
    assert SCHEMA_PATH.read_text() == schema_text(), "run `diagnose kb schema` and commit kb/schema.json"


def write(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bad.yaml").write_text(text)
    return folder


def test_schema_error_names_file_line_and_id(tmp_path):
    folder = write(tmp_path / "kb", """
facts:
  - {id: ok_fact, type: bool}
  - id: broken
    type: colour
""")
    problems = lint_kb(folder)
    assert any(p.startswith("bad.yaml:4 [broken]") and "type" in p for p in problems), problems


def test_malformed_yaml_is_reported_not_raised(tmp_path):
    folder = write(tmp_path / "kb", "facts: [\n  - {id: x\n")
    problems = lint_kb(folder)
    assert len(problems) == 1 and "bad.yaml" in problems[0] and "not valid YAML" in problems[0]


def test_cross_references_and_dead_items(tmp_path):
    folder = write(tmp_path / "kb", """
facts:
  - {id: seen, type: bool, question: Seen?}
  - {id: orphan, type: bool}
rules:
  - id: needs_orphan
    when: {fact: orphan}
    then: {evidence: [{cause: c1, strength: 0.5}]}
    examples: {fires: [{facts: {orphan: true}}], silent: [{facts: {orphan: false}}]}
  - id: no_examples
    when: {fact: seen}
    then: {evidence: [{cause: c1, strength: 0.5}]}
causes:
  - {id: c1, title: C1, area: network, explanation: x, fixes: [f1], references: ['https://example.org']}
  - {id: c2, title: C2, area: network, explanation: x, fixes: [f1], references: ['see the wiki']}
fixes:
  - {id: f1, title: F1, steps: [s]}
  - {id: f2, title: F2, steps: [s]}
""")
    text = "\n".join(lint_kb(folder))
    assert "[needs_orphan]: can never fire: nothing sets orphan" in text
    assert "[no_examples]: needs examples of both kinds" in text
    assert "[c2]: unreachable" in text
    assert "[c2]: reference 'see the wiki'" in text
    assert "[f2]: no cause uses this fix" in text


def test_bad_regex_fails_at_load(tmp_path):
    folder = write(tmp_path / "kb", """
facts:
  - {id: seen, type: bool, question: Seen?}
signatures:
  - {id: broken_regex, pattern: 'NCCL (WARN', sets: {seen: true}}
""")
    text = "\n".join(lint_kb(folder))
    assert "bad.yaml:5 [broken_regex]: pattern 'NCCL (WARN' does not compile" in text


def test_unknown_names(tmp_path):
    folder = write(tmp_path / "kb", """
facts:
  - {id: seen, type: bool, question: Seen?}
rules:
  - id: typo
    when: {fact: seeen}
    then: {evidence: [{cause: nowhere, strength: 0.5}]}
""")
    text = "\n".join(lint_kb(folder))
    assert "[typo]: when: unknown fact 'seeen'" in text


def test_failing_example_is_reported(tmp_path):
    folder = write(tmp_path / "kb", """
facts:
  - {id: seen, type: bool, question: Seen?}
rules:
  - id: r
    when: {fact: seen}
    then: {evidence: [{cause: c, strength: 0.5}]}
    examples: {fires: [{facts: {seen: false}}], silent: [{facts: {seen: false}}]}
causes:
  - {id: c, title: C, area: network, explanation: x, fixes: [f], references: ['https://example.org']}
fixes:
  - {id: f, title: F, steps: [s]}
""")
    text = "\n".join(lint_kb(folder))
    assert "[r]: example: rule r did not fire on fires example 0" in text
