"""nccl-doctor: why distributed training hangs, times out or crashes, and what to change.

Embedding::

    from nccl_doctor import load_doctor
    doctor = load_doctor()            # once; thread-safe and immutable
    session = doctor.session()        # one per conversation
    session.tell("hang at init on 2 nodes")
    session.diagnoses()[0].title
"""
from __future__ import annotations

from pathlib import Path

from .engine import (
    Diagnosis,
    Doctor,
    How,
    InputTooLarge,
    Plan,
    Question,
    Session,
    SessionError,
    StateError,
    UnknownFact,
    Why,
)
from .kb import KBError

__all__ = [
    "load_doctor",
    "Doctor",
    "Session",
    "Diagnosis",
    "Question",
    "Plan",
    "How",
    "Why",
    "SessionError",
    "UnknownFact",
    "InputTooLarge",
    "StateError",
    "KBError",
    "__version__",
]
__version__ = "0.1.0"

_DEFAULT: Doctor | None = None


def load_doctor(kb_dir: str | Path | None = None) -> Doctor:
    """The Doctor for a KB folder (``$NCCL_DOCTOR_KB`` or the packaged KB by default, built
    once per process)."""
    global _DEFAULT
    import os

    from .kb.load import load_kb_with_regexes

    kb_dir = kb_dir or os.environ.get("NCCL_DOCTOR_KB") or None
    if kb_dir is not None:
        kb, codes = load_kb_with_regexes(Path(kb_dir))
        return Doctor(kb, regex_codes=codes)
    if _DEFAULT is None:
        kb, codes = load_kb_with_regexes()
        _DEFAULT = Doctor(kb, regex_codes=codes)
    return _DEFAULT
