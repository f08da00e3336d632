"""Every rule, symptom and signature behaves as its own examples say."""
from __future__ import annotations

import pytest

from nccl_doctor import load_doctor
from nccl_doctor.kb.examples import check_example, iter_examples

_DOCTOR = load_doctor()
_CASES = list(iter_examples(_DOCTOR))


@pytest.mark.parametrize("case", _CASES, ids=[c.name for c in _CASES])
def test_example(case):
    problem = check_example(_DOCTOR, case)
    assert problem is None, problem
