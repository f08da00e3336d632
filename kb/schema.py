"""The knowledge-base format: these pydantic models are its one definition.

A KB is a folder of YAML files. Each file may hold any of the sections below; the loader merges
them and checks that every id is unique and every reference resolves. ``schema.json`` beside this
module is generated from :class:`KBFile` (``diagnose kb schema``) and gives editors completion.
"""
from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "FactType",
    "FactValue",
    "Fact",
    "Symptom",
    "Signature",
    "Condition",
    "Evidence",
    "Action",
    "Example",
    "Examples",
    "Rule",
    "Cause",
    "Fix",
    "KBFile",
    "KnowledgeBase",
    "AREAS",
]

FactType = Literal["bool", "choice", "number", "text", "version"]
FactValue = Union[bool, int, float, str]

AREAS = (
    "network",
    "infiniband",
    "efa",
    "container",
    "scheduler",
    "gpu",
    "launcher",
    "program",
    "timeout",
    "mpi",
    "gloo",
    "version",
    "resources",
    "platform",
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, defer_build=True)


class Fact(_Strict):
    """A typed piece of evidence the engine reasons over."""

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    type: FactType
    description: str = ""
    question: str | None = Field(
        default=None, description="How the engine asks for it; no question means never asked."
    )
    choices: list[str] = Field(default_factory=list, description="Allowed values of a choice fact.")
    help: str = Field(default="", description="How the user can find the answer.")
    probes: list[str] = Field(default_factory=list, description="Probes that can establish it.")

    @model_validator(mode="after")
    def _choices_only_for_choice(self) -> "Fact":
        if self.type == "choice" and not self.choices:
            raise ValueError(f"choice fact {self.id!r} needs choices")
        if self.type != "choice" and self.choices:
            raise ValueError(f"only choice facts take choices ({self.id!r} is {self.type})")
        return self


class Example(_Strict):
    """An input to a rule, symptom or signature: facts, the user's words and/or log text."""

    facts: dict[str, FactValue] = Field(default_factory=dict)
    text: str = ""
    log: str = ""
    note: str = ""


class Examples(_Strict):
    """Inputs on which the item must fire, and near misses on which it must stay silent."""

    fires: list[Example] = Field(default_factory=list)
    silent: list[Example] = Field(default_factory=list)


class Symptom(_Strict):
    """How users describe something in their own words, mapped onto facts.

    ``phrases`` are matched fuzzily (rapidfuzz, word by word, so "hangs during initialization"
    matches "hang init"); ``patterns`` are case-insensitive regexes over the text whose named
    groups may be used in ``sets`` values as ``{name}``.
    """

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    description: str = ""
    phrases: list[str] = Field(default_factory=list)
    patterns: list[str] = Field(default_factory=list)
    sets: dict[str, FactValue]
    certainty: float = Field(default=0.9, gt=0, le=1)
    examples: Examples = Field(default_factory=Examples)

    @model_validator(mode="after")
    def _has_matcher(self) -> "Symptom":
        if not self.phrases and not self.patterns:
            raise ValueError(f"symptom {self.id!r} needs phrases or patterns")
        return self


class Signature(_Strict):
    """A regex over one log line that sets facts; named groups become ``{name}`` in ``sets``."""

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    description: str = ""
    pattern: str
    needles: list[str] = Field(
        default_factory=list,
        description="Literal substrings, one of which every matching line contains (fast prefilter).",
    )
    ignore_case: bool = False
    sets: dict[str, FactValue]
    certainty: float = Field(default=1.0, gt=0, le=1)
    examples: Examples = Field(default_factory=Examples)


class Condition(_Strict):
    """One test in a rule's ``when``.

    Exactly one shape is allowed: ``all: [...]``, ``any: [...]``, ``not: {...}``, or
    ``fact: NAME`` with at most one comparison (``eq``, ``ne``, ``in``, ``lt``, ``le``, ``gt``,
    ``ge``, ``matches``, ``known``). A bare ``fact: NAME`` means "NAME is true". Comparisons
    with an unknown fact are unknown, and a rule fires only when its ``when`` is true.
    """

    all: list["Condition"] | None = None
    any: list["Condition"] | None = None
    not_: "Condition | None" = Field(default=None, alias="not")
    fact: str | None = None
    eq: FactValue | None = None
    ne: FactValue | None = None
    in_: list[FactValue] | None = Field(default=None, alias="in")
    lt: float | str | None = None
    le: float | str | None = None
    gt: float | str | None = None
    ge: float | str | None = None
    matches: str | None = None
    known: bool | None = None

    @model_validator(mode="after")
    def _one_shape(self) -> "Condition":
        shapes = [self.all is not None, self.any is not None, self.not_ is not None, self.fact is not None]
        if sum(shapes) != 1:
            raise ValueError("a condition needs exactly one of all / any / not / fact")
        if self.fact is None and self.comparisons():
            raise ValueError("comparisons (eq, lt, in, ...) need a fact")
        if len(self.comparisons()) > 1:
            raise ValueError(f"condition on {self.fact!r} has more than one comparison")
        if self.all is not None and not self.all or self.any is not None and not self.any:
            raise ValueError("all / any need at least one condition")
        return self

    def comparisons(self) -> list[str]:
        """The comparison keys set on this condition."""
        keys = ("eq", "ne", "in_", "lt", "le", "gt", "ge", "matches", "known")
        return [k for k in keys if getattr(self, k) is not None]


class Evidence(_Strict):
    """Evidence for (positive strength) or against (negative strength) a cause."""

    cause: str
    strength: float = Field(ge=-1, le=1)

    @field_validator("strength")
    @classmethod
    def _not_zero(cls, value: float) -> float:
        if value == 0:
            raise ValueError("strength 0 says nothing")
        return value


class Action(_Strict):
    """What a rule does when it fires."""

    set: dict[str, FactValue] = Field(default_factory=dict)
    evidence: list[Evidence] = Field(default_factory=list)

    @model_validator(mode="after")
    def _does_something(self) -> "Action":
        if not self.set and not self.evidence:
            raise ValueError("a rule's then needs set or evidence")
        return self


class Rule(_Strict):
    """``when`` a condition holds, ``then`` set facts and/or weigh causes."""

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    description: str = ""
    when: Condition
    then: Action
    salience: int = Field(default=0, description="Higher fires first among rules ready together.")
    certainty: float = Field(default=1.0, gt=0, le=1, description="Certainty of facts it sets.")
    references: list[str] = Field(default_factory=list)
    examples: Examples = Field(default_factory=Examples)


class Fix(_Strict):
    """A concrete change or check, with exact commands and how to tell that it worked."""

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    title: str
    kind: Literal["check", "change", "workaround"] = "change"
    cost: int = Field(default=2, ge=1, le=5, description="1 = seconds, 5 = a maintenance window.")
    steps: list[str] = Field(min_length=1)
    commands: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    verify: list[str] = Field(default_factory=list)
    caveats: list[str] = Field(default_factory=list)
    if_not_fixed: list[str] = Field(default_factory=list, description="What to try next.")


class Cause(_Strict):
    """A root cause: what is wrong, why, how to fix it, and where that is documented."""

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    title: str
    area: str
    explanation: str
    fixes: list[str] = Field(min_length=1)
    references: list[str] = Field(min_length=1)
    prior: float = Field(default=0.05, gt=0, lt=1, description="How common it is, for ties.")

    @field_validator("area")
    @classmethod
    def _known_area(cls, value: str) -> str:
        if value not in AREAS:
            raise ValueError(f"unknown area {value!r}; one of {', '.join(AREAS)}")
        return value


class KBFile(_Strict):
    """One YAML file of the knowledge base."""

    facts: list[Fact] = Field(default_factory=list)
    symptoms: list[Symptom] = Field(default_factory=list)
    signatures: list[Signature] = Field(default_factory=list)
    rules: list[Rule] = Field(default_factory=list)
    causes: list[Cause] = Field(default_factory=list)
    fixes: list[Fix] = Field(default_factory=list)


class KnowledgeBase(_Strict):
    """All files merged; ``origins`` maps each item id to ``file:line`` for messages."""

    facts: dict[str, Fact]
    symptoms: dict[str, Symptom]
    signatures: dict[str, Signature]
    rules: dict[str, Rule]
    causes: dict[str, Cause]
    fixes: dict[str, Fix]
    origins: dict[str, str] = Field(default_factory=dict)

    def origin(self, item_id: str) -> str:
        """Where an item is defined, as ``file:line`` (or ``?``)."""
        return self.origins.get(item_id, "?")


Condition.model_rebuild()


def dump_json_schema() -> dict[str, Any]:
    """The JSON Schema of one KB file, for editors."""
    schema = KBFile.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "nccl-doctor knowledge-base file"
    return schema
