"""Every rule, symptom and signature behaves as its own examples say.

The KB is read when tests are collected (each example is a test); a KB that cannot be read gives
one failing test naming its problems instead of a collection error.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from nccl_doctor.engine import Doctor
from nccl_doctor.errors import KBError
from nccl_doctor.kb.examples import check_example, iter_examples
from nccl_doctor.kb.load import DATA_DIR, kb_files, load_files

FOLDER = Path(os.environ.get("NCCL_DOCTOR_KB") or DATA_DIR)


def _cases():
    try:
        doctor = Doctor(load_files(kb_files(FOLDER), FOLDER))
    except KBError as exc:
        return None, [], str(exc)
    return doctor, list(iter_examples(doctor)), ""


_DOCTOR, _CASES, _PROBLEM = _cases()


def test_kb_loads():
    assert not _PROBLEM, _PROBLEM


@pytest.mark.parametrize("case", _CASES, ids=[c.name for c in _CASES])
def test_example(case):
    problem = check_example(_DOCTOR, case)
    assert problem is None, problem
