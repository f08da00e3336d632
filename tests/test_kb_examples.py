"""Every rule, symptom and signature behaves as its own examples say."""
from __future__ import annotations

import pytest

import os
from pathlib import Path

from nccl_doctor.engine import Doctor
from nccl_doctor.kb.examples import check_example, iter_examples
from nccl_doctor.kb.load import DATA_DIR, kb_files, load_files

_DOCTOR = Doctor(load_files(kb_files(Path(os.environ.get("NCCL_DOCTOR_KB") or DATA_DIR))))
_CASES = list(iter_examples(_DOCTOR))


@pytest.mark.parametrize("case", _CASES, ids=[c.name for c in _CASES])
def test_example(case):
    problem = check_example(_DOCTOR, case)
    assert problem is None, problem
