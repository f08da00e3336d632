"""The pure diagnosis core: no I/O, no printing, no torch, no textual."""
from .memory import FactRecord, Source
from .results import Diagnosis, How, Plan, PlanStep, Question, Why
from .session import (
    Doctor,
    InputTooLarge,
    LogSummary,
    Session,
    SimilarIncident,
    SessionError,
    StateError,
    UnknownFact,
)

__all__ = [
    "Doctor",
    "Session",
    "SessionError",
    "UnknownFact",
    "InputTooLarge",
    "StateError",
    "LogSummary",
    "SimilarIncident",
    "FactRecord",
    "Source",
    "Diagnosis",
    "Question",
    "Plan",
    "PlanStep",
    "How",
    "Why",
]
