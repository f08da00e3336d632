"""The TUI's handle on one :class:`Session`: a lock, and a snapshot of what the screens show.

Workers (threads) call the session through :meth:`Conversation.run`, so the interface thread
never waits on the engine and two workers never touch the session at once.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..engine import Diagnosis, Doctor, Question, Session, SimilarIncident
from ..engine.questions import make_question
from ..engine.values import Value

__all__ = ["View", "Conversation", "learned_facts"]

T = TypeVar("T")
SIDE_CAUSES = 6
SIDE_SIMILAR = 3


@dataclass(frozen=True)
class View:
    """Everything the conversation screen draws, computed in one go off the interface thread."""

    diagnoses: list[Diagnosis]
    question: Question | None
    probes: list[dict[str, Any]]
    answers: dict[str, Value]
    unknown: list[str]
    revisiting: bool = False
    notes: list[str] = field(default_factory=list)
    lang: str = "en"
    recognised: bool = True
    told: bool = False
    collect: list[dict[str, str]] = field(default_factory=list)
    guidance: str = ""
    similar: list[SimilarIncident] = field(default_factory=list)


class Conversation:
    """A session plus the question the user chose to revisit (going back to an answer)."""

    def __init__(self, doctor: Doctor, session: Session | None = None):
        self.doctor = doctor
        self.session = session or doctor.session()
        self.lock = threading.Lock()
        self.revisit: str | None = None

    def run(self, action: Callable[[Session], T]) -> T:
        with self.lock:
            return action(self.session)

    def question_for(self, fact_id: str) -> Question:
        """The question for a fact, asked again on the user's request."""
        return make_question(self.doctor.kb.facts[fact_id], 0.0, [], self.session.language)

    def view(self, notes: list[str] | None = None) -> View:
        """A snapshot of the session (takes the lock)."""
        with self.lock:
            session = self.session
            if self.revisit is not None:
                question, revisiting = self.question_for(self.revisit), True
            else:
                question, revisiting = session.next_question(), False
            plan = session.plan()
            return View(
                diagnoses=session.diagnoses(limit=SIDE_CAUSES),
                question=question,
                probes=session.suggest_probes(limit=3),
                answers=session.answers(),
                unknown=session.unknown,
                revisiting=revisiting,
                notes=list(notes or []),
                lang=session.language,
                recognised=plan.recognised,
                told=bool(session.texts or session.logs),
                collect=list(plan.collect),
                guidance=plan.note if not plan.recognised else "",
                similar=session.similar(limit=SIDE_SIMILAR),
            )


def learned_facts(session: Session, kinds: tuple[str, ...] = ("text", "log")) -> list[tuple[str, Value, str]]:
    """Facts that came from what the user said or the logs: (name, value, source)."""
    out = []
    for name, record in session.facts().items():
        if record.source.kind in kinds:
            out.append((name, record.value, str(record.source)))
    return out
