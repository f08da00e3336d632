"""What the engine hands to front ends: plain dataclasses with ``to_dict()`` for JSON."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["EvidenceItem", "Diagnosis", "Question", "PlanStep", "Plan", "HowStep", "How", "Why"]


@dataclass(frozen=True)
class EvidenceItem:
    """One rule's contribution to a cause, with the facts it rested on."""

    rule: str
    description: str
    strength: float  # the contribution, negative when against
    facts: dict[str, dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Diagnosis:
    id: str
    title: str
    area: str
    confidence: float
    explanation: str
    evidence: list[EvidenceItem]
    fixes: list[dict[str, Any]]
    references: list[str]

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["confidence"] = round(self.confidence, 3)
        out["evidence"] = [e.to_dict() for e in self.evidence]
        return out


@dataclass(frozen=True)
class Question:
    """A fact the engine would like to know, and why."""

    id: str
    text: str
    type: str
    choices: list[str]
    help: str
    gain: float
    separates: list[str]  # cause ids whose standing the answer would move

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["gain"] = round(self.gain, 4)
        return out


@dataclass(frozen=True)
class PlanStep:
    number: int
    fix: str
    title: str
    kind: str
    for_causes: list[str]
    steps: list[str]
    commands: list[str]
    env: dict[str, str]
    verify: list[str]
    caveats: list[str]
    if_not_fixed: list[str]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Plan:
    causes: list[str]
    steps: list[PlanStep]
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"causes": self.causes, "steps": [s.to_dict() for s in self.steps], "note": self.note}


@dataclass(frozen=True)
class HowStep:
    """A fact in an explanation: its value, where it came from, and how it was derived."""

    fact: str
    value: Any
    source: str
    certainty: float
    derived_by: str = ""
    from_facts: list["HowStep"] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class How:
    """How the engine reached its view of a cause."""

    cause: str
    title: str
    confidence: float
    rules: list[dict[str, Any]]  # rule id, description, contribution, facts: [HowStep]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Why:
    """Why a question is asked: the causes each answer would move."""

    question: str
    text: str
    causes: list[dict[str, Any]]  # id, title, now, by answer {answer: certainty}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
