"""What the engine hands to front ends: named tuples with ``to_dict()`` for JSON.

Named tuples are immutable and cost a start almost nothing to define (defining these as
dataclasses cost a one-shot run ~6 ms, and importing ``dataclasses`` ~7 ms more). A field's
default is an empty tuple or an empty read-only mapping, so no default is shared mutably.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

__all__ = ["EvidenceItem", "Diagnosis", "Question", "PlanStep", "Plan", "HowStep", "How", "Why", "compact_json"]


def _plain(value: Any) -> Any:
    """``value`` as fresh JSON-ready containers: dicts (KB records too) and lists copied, results
    turned into dicts, scalars as they are. ``dataclasses.asdict`` deep-copies every leaf, which
    cost a server turn a quarter of its time."""
    if value is None or isinstance(value, _SCALARS):  # the leaves, most of what is walked
        return value
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    to_dict = getattr(value, "to_dict", None)
    if to_dict is not None:  # a result (a named tuple itself)
        return to_dict()
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    if type(value) is MappingProxyType:  # an empty default
        return {key: _plain(item) for key, item in value.items()}
    return value


_SCALARS = (str, int, float)  # bool is an int


def _as_dict(result: Any) -> dict[str, Any]:
    return {name: _plain(value) for name, value in zip(result._fields, result)}


def compact_json(value: Any) -> str:
    """The JSON text every JSON front end sends: compact, UTF-8 (not \\u-escaped), no NaN."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


_NONE: Mapping[str, Any] = MappingProxyType({})


class EvidenceItem(NamedTuple):
    """One rule's contribution to a cause, with the facts it rested on."""

    rule: str
    description: str
    strength: float  # the contribution, negative when against
    facts: dict[str, dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return _as_dict(self)


class Diagnosis(NamedTuple):
    """A raised cause. ``supported`` is False when only the user's words point at it (no rule,
    symptom or log line): such a cause is "possibly related", never a diagnosis to act on.
    ``title``/``explanation`` are in the session's language; ``texts`` holds every language."""

    id: str
    title: str
    area: str
    confidence: float
    explanation: str
    evidence: list[EvidenceItem]
    fixes: list[dict[str, Any]]
    references: list[str]
    supported: bool = True
    texts: Mapping[str, dict[str, str]] = _NONE

    #: Fields drawn from the cause's KB entry alone, the same in every session: most of a
    #: diagnosis's bytes (its fixes above all). :meth:`to_json` encodes them once per cause.
    FROM_KB = frozenset({"id", "area", "fixes", "references", "texts"})

    def to_dict(self) -> dict[str, Any]:
        out = _as_dict(self)
        out["confidence"] = round(self.confidence, 3)
        return out

    def to_json(self, kept: dict[tuple[str, str], str]) -> str:
        """``compact_json(self.to_dict())``, with the JSON of the :data:`FROM_KB` fields taken from
        ``kept`` (by cause and field) and added to it when missing: one ``kept`` per KB."""
        parts = []
        for name in _DIAGNOSIS_FIELDS:
            if name in self.FROM_KB:
                text = kept.get((self.id, name))
                if text is None:
                    text = kept[(self.id, name)] = compact_json(_plain(getattr(self, name)))
            elif name == "confidence":
                text = compact_json(round(self.confidence, 3))
            else:
                text = compact_json(_plain(getattr(self, name)))
            parts.append(f"{_KEYS[name]}:{text}")
        return "{" + ",".join(parts) + "}"


_DIAGNOSIS_FIELDS = Diagnosis._fields
_KEYS = {name: compact_json(name) for name in _DIAGNOSIS_FIELDS}


class Question(NamedTuple):
    """A fact the engine would like to know, and why.

    ``kind`` is "fact" (answered with a value of ``type``: yes/no, one of ``choices``, a number or
    a version) or "evidence" (answered in free text - a pasted log line, versions, a command -
    read by the same matching as descriptions and logs). ``text``, ``help`` and
    ``choice_labels`` are in the session's language; ``texts`` holds every language.
    """

    id: str
    text: str
    type: str
    choices: list[str]
    help: str
    gain: float
    separates: list[str]  # cause ids whose standing the answer would move
    kind: str = "fact"
    choice_labels: Mapping[str, str] = _NONE
    texts: Mapping[str, dict[str, Any]] = _NONE

    def to_dict(self) -> dict[str, Any]:
        out = _as_dict(self)
        out["gain"] = round(self.gain, 4)
        return out


class PlanStep(NamedTuple):
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
    value: float = 0.0  # expected value: likelihood x chance it settles or fixes / cost
    texts: Mapping[str, dict[str, Any]] = _NONE

    def to_dict(self) -> dict[str, Any]:
        return _as_dict(self)


class Plan(NamedTuple):
    """Ordered steps for the causes rules support. ``recognised`` is False when no cause has such
    support: then ``steps`` is empty, ``related`` lists causes that only share words with the
    description, and ``collect`` says what to gather next (each ``{"text", "command"}``)."""

    causes: list[str]
    steps: list[PlanStep]
    note: str = ""
    recognised: bool = True
    related: Sequence[str] = ()
    collect: Sequence[dict[str, str]] = ()
    lang: str = "en"

    def to_dict(self) -> dict[str, Any]:
        return {"causes": self.causes, "steps": [s.to_dict() for s in self.steps], "note": self.note,
                "recognised": self.recognised, "related": list(self.related), "collect": list(self.collect),
                "lang": self.lang}


class HowStep(NamedTuple):
    """A fact in an explanation: its value, where it came from, and how it was derived."""

    fact: str
    value: Any
    source: str
    certainty: float
    derived_by: str = ""
    from_facts: Sequence["HowStep"] = ()

    def to_dict(self) -> dict[str, Any]:
        return _as_dict(self)


class How(NamedTuple):
    """How the engine reached its view of a cause."""

    cause: str
    title: str
    confidence: float
    rules: list[dict[str, Any]]  # rule id, description, contribution, facts: [HowStep]

    def to_dict(self) -> dict[str, Any]:
        return _as_dict(self)


class Why(NamedTuple):
    """Why a question is asked: the causes each answer would move."""

    question: str
    text: str
    causes: list[dict[str, Any]]  # id, title, now, by answer {answer: certainty}

    def to_dict(self) -> dict[str, Any]:
        return _as_dict(self)
