"""Working memory: facts as frozen values that remember where they came from.

The values are named tuples: immutable, and cheap to create and to define (a one-shot run
defines every class it imports; ``dataclasses`` and ``inspect`` alone cost it ~7 ms).
"""
from __future__ import annotations

from typing import Literal, NamedTuple

from .values import Value

__all__ = ["SourceKind", "Source", "FactRecord", "SOURCE_PRIORITY"]

SourceKind = Literal["answer", "cli", "probe", "log", "text", "rule"]

#: When two sources give a fact different values, the higher one wins.
SOURCE_PRIORITY: dict[str, int] = {"answer": 5, "cli": 5, "probe": 4, "log": 3, "text": 2, "rule": 1}


class Source(NamedTuple):
    """Where a fact came from: ``kind`` plus a detail such as ``train.log:120`` or a rule id."""

    kind: SourceKind
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.kind}:{self.detail}" if self.detail else self.kind

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "detail": self.detail}


class FactRecord(NamedTuple):
    """One fact in working memory."""

    name: str
    value: Value
    source: Source
    certainty: float = 1.0
    because: tuple[str, ...] = ()  # facts a rule used to derive it

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "value": self.value,
            "source": self.source.to_dict(),
            "certainty": round(self.certainty, 3),
        }
        if self.because:
            out["because"] = list(self.because)
        return out
