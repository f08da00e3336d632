"""The validated KB as the engine uses it: plain frozen dataclasses, no pydantic.

The pydantic models in :mod:`kb.schema` remain the one definition of the format and do all the
validation; :func:`freeze` copies a validated model into these mirrors (same names, same
fields — a test keeps them in step) so that the one-shot path and the compiled-KB cache never
build pydantic classes.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Union

__all__ = [
    "Fact", "Example", "Examples", "Symptom", "Signature", "Condition", "Evidence", "Action",
    "Rule", "Fix", "Cause", "KnowledgeBase", "freeze", "without_examples", "RUNTIME_TYPES",
]

FactValue = Union[bool, int, float, str]
_COMPARISONS = ("eq", "ne", "in_", "lt", "le", "gt", "ge", "matches", "known")


@dataclass(frozen=True)
class Fact:
    id: str
    type: str
    description: str = ""
    question: str | None = None
    choices: list[str] = field(default_factory=list)
    help: str = ""
    probes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Example:
    facts: dict[str, FactValue] = field(default_factory=dict)
    text: str = ""
    log: str = ""
    note: str = ""


@dataclass(frozen=True)
class Examples:
    fires: list[Example] = field(default_factory=list)
    silent: list[Example] = field(default_factory=list)


@dataclass(frozen=True)
class Symptom:
    id: str
    sets: dict[str, FactValue]
    description: str = ""
    phrases: list[str] = field(default_factory=list)
    patterns: list[str] = field(default_factory=list)
    certainty: float = 0.9
    examples: Examples = field(default_factory=Examples)


@dataclass(frozen=True)
class Signature:
    id: str
    pattern: str
    sets: dict[str, FactValue]
    description: str = ""
    needles: list[str] = field(default_factory=list)
    ignore_case: bool = False
    certainty: float = 1.0
    examples: Examples = field(default_factory=Examples)


@dataclass(frozen=True)
class Condition:
    all: list["Condition"] | None = None
    any: list["Condition"] | None = None
    not_: "Condition | None" = None
    fact: str | None = None
    eq: FactValue | None = None
    ne: FactValue | None = None
    in_: list[FactValue] | None = None
    lt: float | str | None = None
    le: float | str | None = None
    gt: float | str | None = None
    ge: float | str | None = None
    matches: str | None = None
    known: bool | None = None

    def comparisons(self) -> list[str]:
        """The comparison keys set on this condition."""
        return [k for k in _COMPARISONS if getattr(self, k) is not None]


@dataclass(frozen=True)
class Evidence:
    cause: str
    strength: float


@dataclass(frozen=True)
class Action:
    set: dict[str, FactValue] = field(default_factory=dict)
    evidence: list[Evidence] = field(default_factory=list)


@dataclass(frozen=True)
class Rule:
    id: str
    when: Condition
    then: Action
    description: str = ""
    salience: int = 0
    certainty: float = 1.0
    references: list[str] = field(default_factory=list)
    examples: Examples = field(default_factory=Examples)


@dataclass(frozen=True)
class Fix:
    id: str
    title: str
    steps: list[str]
    kind: str = "change"
    cost: int = 2
    commands: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    verify: list[str] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)
    if_not_fixed: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready copy (shallow: the values are strings; faster than dataclasses.asdict)."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}


@dataclass(frozen=True)
class Cause:
    id: str
    title: str
    area: str
    explanation: str
    fixes: list[str]
    references: list[str]
    prior: float = 0.05


@dataclass(frozen=True)
class KnowledgeBase:
    facts: dict[str, Fact]
    symptoms: dict[str, Symptom]
    signatures: dict[str, Signature]
    rules: dict[str, Rule]
    causes: dict[str, Cause]
    fixes: dict[str, Fix]
    origins: dict[str, str] = field(default_factory=dict)

    def origin(self, item_id: str) -> str:
        """Where an item is defined, as ``file:line`` (or ``?``)."""
        return self.origins.get(item_id, "?")


RUNTIME_TYPES: dict[str, type] = {
    cls.__name__: cls
    for cls in (Fact, Example, Examples, Symptom, Signature, Condition, Evidence, Action, Rule, Fix, Cause, KnowledgeBase)
}


def freeze(value: Any) -> Any:
    """Copy a validated pydantic model (recursively) into the runtime dataclasses."""
    runtime = RUNTIME_TYPES.get(type(value).__name__)
    if runtime is not None and hasattr(type(value), "model_fields"):
        return runtime(**{f.name: freeze(getattr(value, f.name)) for f in fields(runtime)})
    if isinstance(value, list):
        return [freeze(v) for v in value]
    if isinstance(value, dict):
        return {k: freeze(v) for k, v in value.items()}
    return value


def without_examples(kb: KnowledgeBase) -> KnowledgeBase:
    """The KB minus the examples beside its items: all a diagnosis needs (examples are for
    lint and tests), and much less to load on every start."""
    from dataclasses import replace

    empty = Examples()
    return replace(
        kb,
        rules={k: replace(v, examples=empty) for k, v in kb.rules.items()},
        symptoms={k: replace(v, examples=empty) for k, v in kb.symptoms.items()},
        signatures={k: replace(v, examples=empty) for k, v in kb.signatures.items()},
    )


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, dict):
        return dict(value)
    return value


def _reduce(self: Any) -> tuple:
    """Pickle as a constructor call: much faster to load than dataclasses' frozen setstate."""
    return (type(self), tuple(getattr(self, f.name) for f in fields(self)))


for _cls in RUNTIME_TYPES.values():
    _cls.__reduce__ = _reduce  # type: ignore[method-assign]
