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
    return _COMPACT.encode(value)


#: What ``json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)`` builds
#: at every call, built once (it holds no state between calls): a view encodes ~100 parts.
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


_NONE: Mapping[str, Any] = MappingProxyType({})

#: The JSON of texts and lists of texts already encoded (a pure function of the value, so kept
#: by value): a view repeats the KB's titles, explanations, questions and fix steps every turn.
_TEXT_JSON: dict[Any, str] = {}
_TEXT_JSON_KEPT = 20_000


def _text_json(value: str | list[str]) -> str:
    """``compact_json(value)`` for a text or a list of texts, kept for the next view."""
    key = value if type(value) is str else tuple(value)
    text = _TEXT_JSON.get(key)
    if text is None:
        text = compact_json(value)
        if len(_TEXT_JSON) >= _TEXT_JSON_KEPT:
            _TEXT_JSON.clear()
        _TEXT_JSON[key] = text
    return text


def _is_texts(value: Any) -> bool:
    return type(value) is str or (type(value) is list and all(type(v) is str for v in value))


def _encoded(result: Any, kept: dict[tuple[str, str], str], from_kb: frozenset[str], key: str,
             rounded: Mapping[str, int]) -> str:
    """``compact_json(result.to_dict())`` for a Diagnosis, Question or PlanStep: the fields in
    ``from_kb`` (the same for every session) encoded once per ``key`` (a cause, fact or fix id)
    and field and kept in ``kept``; texts and lists of texts by value; ``rounded`` fields rounded
    as ``to_dict`` rounds them."""
    parts = []
    for name, value in zip(result._fields, result):
        if name in from_kb:
            text = kept.get((key, name))
            if text is None:
                text = kept[(key, name)] = compact_json(_plain(value))
        elif name in rounded:
            text = compact_json(round(value, rounded[name]))
        elif _is_texts(value):
            text = _text_json(value)
        else:
            text = compact_json(_plain(value))
        parts.append(f"{_KEY_JSON[name]}:{text}")
    return "{" + ",".join(parts) + "}"


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
        return _encoded(self, kept, self.FROM_KB, self.id, _CONFIDENCE)


_CONFIDENCE = {"confidence": 3}


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

    #: Fields drawn from the fact's KB entry alone, the same in every session (see Diagnosis).
    FROM_KB = frozenset({"id", "type", "choices", "texts"})

    def to_dict(self) -> dict[str, Any]:
        out = _as_dict(self)
        out["gain"] = round(self.gain, 4)
        return out

    def to_json(self, kept: dict[tuple[str, str], str]) -> str:
        """``compact_json(self.to_dict())``, the :data:`FROM_KB` fields kept per fact (see Diagnosis)."""
        return _encoded(self, kept, self.FROM_KB, "fact:" + self.id, _GAIN)


_GAIN = {"gain": 4}


class PlanStep(NamedTuple):
    """One step of a plan: a fix (its KB entry in the plan's language) and what it is for."""

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

    #: Fields drawn from the fix's KB entry alone, whatever the language (see Diagnosis).
    FROM_KB = frozenset({"fix", "kind", "commands", "env", "verify", "caveats", "if_not_fixed", "texts"})

    def to_dict(self) -> dict[str, Any]:
        return _as_dict(self)

    def to_json(self, kept: dict[tuple[str, str], str]) -> str:
        """``compact_json(self.to_dict())``, the :data:`FROM_KB` fields kept per fix (see Diagnosis)."""
        return _encoded(self, kept, self.FROM_KB, "fix:" + self.fix, _NO_ROUNDING)


_NO_ROUNDING: Mapping[str, int] = MappingProxyType({})


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

    def to_json(self, kept: dict[tuple[str, str], str]) -> str:
        """``compact_json(self.to_dict())``, each step's KB part kept per fix (see PlanStep)."""
        steps = "[" + ",".join(step.to_json(kept) for step in self.steps) + "]"
        return (f'{{"causes":{compact_json(self.causes)},"steps":{steps},"note":{_text_json(self.note)},'
                f'"recognised":{compact_json(self.recognised)},"related":{compact_json(list(self.related))},'
                f'"collect":{compact_json(list(self.collect))},"lang":{compact_json(self.lang)}}}')


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


_KEY_JSON = {name: compact_json(name) for result in (Diagnosis, Question, PlanStep) for name in result._fields}
