"""Every rule, symptom, signature and version table behaves as its own examples say.

One test per KB file runs the examples of every item defined in it (a few thousand examples in
about a hundred tests, not one pytest item each); a failure names each failing example
(``kind:item:fires|silent[index]``) with what happened. The files are listed without reading the
KB, so a KB that cannot be read gives failing tests naming its problems, never a collection error.
"""
from __future__ import annotations

from functools import cache

import pytest

from _packaged import KB_FOLDER, packaged_doctor
from nccl_doctor.kb.examples import check_example, iter_examples
from nccl_doctor.kb.load import kb_files

SECTION = {"rule": "rules", "symptom": "symptoms", "signature": "signatures", "table": "versions"}


def _files() -> list[str]:
    """The KB's YAML files that can hold examples (incidents hold none)."""
    try:
        paths = kb_files(KB_FOLDER)
    except Exception:  # noqa: BLE001 - an unreadable folder is test_kb_loads' failure, not collection's
        return []
    labels = [p.relative_to(KB_FOLDER).as_posix() for p in paths]
    return [label for label in labels if not label.startswith("incidents/")]


FILES = _files()


@cache
def _by_file() -> dict[str, list]:
    """The example cases grouped by the file that defines their item."""
    doctor = packaged_doctor()
    grouped: dict[str, list] = {}
    for case in iter_examples(doctor):
        origin = doctor.kb.origins.get(f"{SECTION[case.kind]}:{case.item}", "?")
        grouped.setdefault(origin.rsplit(":", 1)[0], []).append(case)
    return grouped


def test_kb_loads():
    assert FILES, f"no KB files found in {KB_FOLDER}"
    packaged_doctor()  # a KBError here names every problem


def test_every_example_belongs_to_a_listed_file():
    """The per-file tests together run every example: none is left to an unlisted file."""
    unlisted = {name: len(cases) for name, cases in _by_file().items() if name not in FILES}
    assert not unlisted, f"examples of items in files no test runs: {unlisted}"
    assert sum(len(cases) for cases in _by_file().values()) > 0


@pytest.mark.parametrize("name", FILES)
def test_examples(name):
    doctor = packaged_doctor()
    failures = []
    for case in _by_file().get(name, ()):
        problem = check_example(doctor, case)
        if problem is not None:
            failures.append(f"{case.name}: {problem}")
    assert not failures, f"{len(failures)} example(s) of {name} fail:\n" + "\n".join(failures)
