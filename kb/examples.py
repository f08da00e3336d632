"""Run the examples that sit beside every rule, symptom, signature and version table.

An example gives facts, the user's words and/or log text. For a rule it must fire on every
``fires`` example and stay silent on every ``silent`` one, with the whole KB loaded (so
examples exercise chaining too); for a version table, some rule of its rows must fire (or none). For a symptom the text must (not) match; for a signature
some line of the log must (not) match.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..engine.matching import match_symptoms, scan_lines
from ..engine.session import Doctor, Session
from .artifact import Record as Example

__all__ = ["ExampleCase", "iter_examples", "check_example"]


@dataclass(frozen=True)
class ExampleCase:
    kind: str  # rule | symptom | signature | table
    item: str
    expect: str  # fires | silent
    index: int
    example: Example

    @property
    def name(self) -> str:
        return f"{self.kind}:{self.item}:{self.expect}[{self.index}]"


def iter_examples(doctor: Doctor) -> Iterator[ExampleCase]:
    kb = doctor.kb
    for kind, items in (("rule", kb.rules), ("symptom", kb.symptoms), ("signature", kb.signatures)):
        for item in items.values():
            for expect in ("fires", "silent"):
                for index, example in enumerate(getattr(item.examples, expect)):
                    yield ExampleCase(kind, item.id, expect, index, example)
    for table in kb.get("versions", {}).values():
        for expect in ("fires", "silent"):
            for index, example in enumerate(getattr(table.examples, expect)):
                yield ExampleCase("table", table.id, expect, index, example)


def _session_for(doctor: Doctor, example: Example) -> Session:
    session = doctor.session()
    for name, value in example.facts.items():
        session.set_fact(name, value, source="cli")
    if example.text:
        session.tell(example.text)
    if example.log:
        session.add_log(example.log.splitlines(), name="example")
    return session


def check_example(doctor: Doctor, case: ExampleCase) -> str | None:
    """None when the example behaves as declared, else a message saying what happened."""
    ckb = doctor.compiled
    example = case.example
    want = case.expect == "fires"
    if case.kind == "rule":
        session = _session_for(doctor, example)
        fired = case.item in session.fired_rules()
        if fired != want:
            facts = {k: v.value for k, v in session.facts().items()}
            return f"rule {case.item} {'did not fire' if want else 'fired'} on {case.expect} example {case.index}; facts: {facts}"
        return None
    if case.kind == "table":
        from .versions import rule_ids

        session = _session_for(doctor, example)
        rows = set(rule_ids(doctor.kb.versions[case.item]))
        fired = sorted(rows.intersection(session.fired_rules()))
        if bool(fired) != want:
            facts = {k: v.value for k, v in session.facts().items()}
            what = "no row fired" if want else f"{', '.join(fired)} fired"
            return f"table {case.item}: {what} on {case.expect} example {case.index}; facts: {facts}"
        return None
    if case.kind == "symptom":
        if not example.text:
            return f"symptom {case.item} example {case.index} has no text"
        hit = any(m.symptom == case.item for m in match_symptoms(ckb, example.text))
        if hit != want:
            return f"symptom {case.item} {'did not match' if want else 'matched'} {example.text!r}"
        return None
    if not example.log:
        return f"signature {case.item} example {case.index} has no log"
    hit = any(h.signature == case.item for h in scan_lines(ckb, example.log.splitlines()))
    if hit != want:
        return f"signature {case.item} {'did not match' if want else 'matched'} {example.log!r}"
    return None
