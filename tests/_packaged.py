"""The packaged KB read from its YAML once per test process (examples included), for the tests
that need what the cached artifact leaves out: the example tests, the scanner, the format tests."""
from __future__ import annotations

import os
from functools import cache
from pathlib import Path

from nccl_doctor.engine import Doctor
from nccl_doctor.kb.load import DATA_DIR, kb_files, load_files

#: the KB folder these tests read: $NCCL_DOCTOR_KB, as the tool does, or the packaged one
KB_FOLDER = Path(os.environ.get("NCCL_DOCTOR_KB") or DATA_DIR)


@cache
def packaged_kb():
    """The KB of :data:`KB_FOLDER` read fresh from its YAML, examples included (raises KBError)."""
    return load_files(kb_files(KB_FOLDER), KB_FOLDER)


@cache
def packaged_doctor() -> Doctor:
    """A Doctor over :func:`packaged_kb`, the examples with it."""
    return Doctor(packaged_kb())
