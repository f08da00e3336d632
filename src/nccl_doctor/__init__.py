"""nccl-doctor: why distributed training hangs, times out or crashes, and what to change.

Embedding::

    from nccl_doctor import load_doctor
    doctor = load_doctor()            # once; thread-safe and immutable
    session = doctor.session()        # one per conversation
    session.tell("hang at init on 2 nodes")
    session.diagnoses()[0].title
"""
from __future__ import annotations

import threading
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
from .errors import DoctorError
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
    "DoctorError",
    "__version__",
]
__version__ = "0.1.0"

_DOCTORS: dict[str, Doctor] = {}
_LOCK = threading.Lock()


def load_doctor(kb_dir: str | Path | None = None) -> Doctor:
    """The Doctor for a KB folder (``$NCCL_DOCTOR_KB`` or the packaged KB by default).

    Built once per folder contents and process (thread-safe): a folder whose files change is
    read again, so a bot may call this on every message.
    """
    import os

    from .knowledge import kb_source, load_knowledge

    source = kb_source(kb_dir or os.environ.get("NCCL_DOCTOR_KB") or None)  # the files walked and hashed once
    key = f"{source[0].resolve()}|{source[2]}"
    with _LOCK:
        doctor = _DOCTORS.get(key)
        if doctor is None:
            kb, extras = load_knowledge(source=source)
            doctor = _DOCTORS[key] = Doctor(kb, extras=extras)
        return doctor
