"""Shared fixtures: one Doctor for the packaged KB (built once per test run)."""
from __future__ import annotations

import pytest

from nccl_doctor import load_doctor
from nccl_doctor.engine import Doctor


@pytest.fixture(scope="session")
def doctor() -> Doctor:
    return load_doctor()
