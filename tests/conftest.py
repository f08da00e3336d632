"""Shared fixtures: work that several test modules need, done once per test process.

- ``doctor``: the Doctor of the packaged KB (``load_doctor`` hashes every KB file on each call, so
  tests take this fixture instead of calling it per case).
- ``_packaged.py`` (not a fixture): the packaged KB read from its YAML once, examples included.
- ``_benchmarks.py`` (not a fixture): a script of ``benchmarks/`` loaded as a module.
- ``leave_one_out``: each library incident's diagnoses with the incident itself left out of the
  library, computed once per incident and shared by every floor that scores it.
"""
from __future__ import annotations

import pytest

from nccl_doctor import load_doctor
from nccl_doctor.engine import Doctor


@pytest.fixture(scope="session")
def doctor() -> Doctor:
    return load_doctor()


class LeaveOneOut:
    """Diagnoses of one incident told as its reporter did, with its ``source`` left out of the
    library so that it is never its own evidence; cached by what the session is given."""

    def __init__(self, doctor: Doctor) -> None:
        self.doctor = doctor
        self._done: dict[tuple[str, str, str], list] = {}

    def diagnoses(self, incident) -> list:
        key = (incident["source"], incident["reporter"], incident.get("log") or "")
        if key not in self._done:
            session = self.doctor.session(leave_out=[incident["source"]])
            session.tell(incident["reporter"])
            if incident.get("log"):
                session.add_log(incident["log"].splitlines())
            self._done[key] = session.diagnoses()
        return self._done[key]


@pytest.fixture(scope="session")
def leave_one_out(doctor) -> LeaveOneOut:
    return LeaveOneOut(doctor)
