"""The knowledge-base format: these pydantic models are its one definition.

A KB is a folder of YAML files, read recursively:

- ``causes/<area>/<cause>.yaml``: one failure mode per file — the ``cause`` (with its references
  at the top), the fixes it owns, the rules that raise or lower it with their examples, and the
  symptoms, signatures and facts only it uses;
- ``vocabulary/*.yaml``: what many causes share — facts (with the questions that ask for them),
  symptoms, log signatures and the rules that derive facts from facts;
- ``incidents/**/*.yaml``: real, publicly reported incidents, each tied to a cause and the fix that
  worked (evidence by similarity, priors, and the consultation benchmark);
- ``versions:`` (in any file) version tables with references: releases with known bugs and the
  release that fixed each, what a release ships, the least version another part needs
  (:class:`VersionTable`; the loader turns each row into a rule).

Every file has the shape of :class:`KBFile`; the loader merges them, checks that every id is
unique and every reference resolves, and compiles the result into one plain JSON artifact
(:mod:`kb.artifact`) that a start reads without pydantic. ``schema.json`` beside this module is
generated from :class:`KBFile` (``diagnose kb schema``) and gives editors completion.
"""
from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "FactType",
    "FactValue",
    "Fact",
    "FactZh",
    "Implication",
    "Symptom",
    "Signature",
    "Condition",
    "Evidence",
    "Action",
    "Example",
    "Examples",
    "Rule",
    "Cause",
    "CauseZh",
    "Fix",
    "FixZh",
    "Incident",
    "VersionRow",
    "VersionTable",
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
    "inference",
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, defer_build=True)


class FactZh(_Strict):
    """The Chinese text of a fact's question: what a user who writes Chinese reads."""

    question: str = ""
    help: str = ""
    choices: dict[str, str] = Field(default_factory=dict, description="Label of each choice, by choice.")


class Implication(_Strict):
    """What knowing a fact settles: when ``when`` holds, the facts in ``set`` hold too.

    Applied to every fact however it became known (an answer, the user's words, a log, a probe, a
    rule), before any rule, and never over a value stated directly: "hangs at init" settles that it
    does not first run for hours, so that question is never asked.
    """

    when: "Condition"
    set: dict[str, FactValue] = Field(min_length=1)


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
    asked_when: "Condition | None" = Field(
        default=None, description="The question's premise: it is asked only while this holds."
    )
    implies: list[Implication] = Field(default_factory=list, description="Facts this one settles.")
    evidence: Literal["log", "text"] | None = Field(
        default=None,
        description="An evidence question: the free-text answer is read like log lines (log) or the "
        "user's words (text), through the same matching, and may set many facts at once.",
    )
    reveals: list[str] = Field(
        default_factory=list,
        description="Facts an evidence question's answer can establish (log: besides what any log "
        "signature sets).",
    )
    zh: FactZh | None = None

    @model_validator(mode="after")
    def _choices_only_for_choice(self) -> "Fact":
        if self.type == "choice" and not self.choices:
            raise ValueError(f"choice fact {self.id!r} needs choices")
        if self.type != "choice" and self.choices:
            raise ValueError(f"only choice facts take choices ({self.id!r} is {self.type})")
        if self.evidence is not None and (self.type != "text" or not self.question):
            raise ValueError(f"evidence question {self.id!r} needs type text and a question")
        if self.reveals and self.evidence is None:
            raise ValueError(f"only evidence questions reveal facts ({self.id!r})")
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


class _Matcher(_Strict):
    """What symptoms and signatures share: the facts a match sets and/or evidence it adds itself.

    ``evidence`` spares a fact that would only relay one match to one rule: the match weighs on
    the causes directly (the loader turns it into a rule named after the item, reading a fact of
    the same name, so explanations show it like any rule).
    """

    sets: dict[str, FactValue] = Field(default_factory=dict)
    evidence: list[Evidence] = Field(default_factory=list)
    references: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _does_something(self) -> "_Matcher":
        if not self.sets and not self.evidence:
            raise ValueError(f"{self.id!r} needs sets or evidence")  # type: ignore[attr-defined]
        return self


class Symptom(_Matcher):
    """How users describe something in their own words, mapped onto facts.

    ``phrases`` are matched fuzzily (rapidfuzz, word by word, so "hangs during initialization"
    matches "hang init"); ``patterns`` are case-insensitive RE2 regexes over the text whose named
    groups may be used in ``sets`` values as ``{name}``. A match just after a negation cue does not
    count (engine/negation.py); with ``fine_cancels`` neither does one followed by "works fine".
    """

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    description: str = ""
    phrases: list[str] = Field(default_factory=list)
    patterns: list[str] = Field(default_factory=list)
    fine_cancels: bool = Field(
        default=False, description='The symptom names a suspect: "X works fine" after it cancels the match.')
    unless: list[str] = Field(
        default_factory=list,
        description="RE2 regexes for near misses: a pattern or phrase match overlapped by a match of one of these does not count.")
    differ: list[list[str]] = Field(
        default_factory=list,
        description="Pairs of named groups that must capture different text for a pattern match to count.")
    certainty: float = Field(default=0.9, gt=0, le=1)
    examples: Examples = Field(default_factory=Examples)

    @model_validator(mode="after")
    def _has_matcher(self) -> "Symptom":
        if not self.phrases and not self.patterns:
            raise ValueError(f"symptom {self.id!r} needs phrases or patterns")
        return self


class Signature(_Matcher):
    """A regex over one log line that sets facts and/or weighs causes; named groups become
    ``{name}`` in ``sets``."""

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    description: str = ""
    pattern: str
    needles: list[str] = Field(
        default_factory=list,
        description="Literal substrings, one of which every matching line contains (fast prefilter).",
    )
    ignore_case: bool = False
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
    certainty: float = Field(default=1.0, gt=0, le=1, description="Certainty of facts it sets.")
    references: list[str] = Field(default_factory=list)
    examples: Examples = Field(default_factory=Examples)


class FixZh(_Strict):
    """The Chinese text of a fix (commands stay as they are)."""

    title: str
    steps: list[str] = Field(default_factory=list)


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
    zh: FixZh | None = None


class CauseZh(_Strict):
    """The Chinese text of a cause."""

    title: str
    explanation: str = ""


class Cause(_Strict):
    """A root cause: what is wrong, why, how to fix it, and where that is documented."""

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    title: str
    area: str
    explanation: str
    fixes: list[str] = Field(min_length=1)
    references: list[str] = Field(min_length=1)
    prior: float = Field(default=0.05, gt=0, lt=1, description="How common it is, for ties.")
    zh: CauseZh | None = None

    @field_validator("area")
    @classmethod
    def _known_area(cls, value: str) -> str:
        if value not in AREAS:
            raise ValueError(f"unknown area {value!r}; one of {', '.join(AREAS)}")
        return value


class Incident(_Strict):
    """A real, publicly reported failure with its confirmed cause and the fix that worked.

    ``reporter`` is what the reporter said before anyone knew the cause (in our words), ``log`` the
    key lines they showed, ``knows`` the KB facts they could have answered (from the thread: its
    text, versions, commands, log lines), ``cause`` and ``fix`` the KB's ids for what it was and
    what fixed it. ``expected_remedy_any`` are regexes a correct fix's text matches (for scoring).
    """

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    source: str = Field(pattern=r"^https://\S+$")
    summary: str = Field(min_length=1, description="One line: what happened and what it was.")
    reporter: str = Field(min_length=1, description="The reporter's situation as they would describe it.")
    log: str = ""
    environment: dict[str, Union[str, int, float, bool]] = Field(default_factory=dict)
    knows: dict[str, FactValue] = Field(default_factory=dict)
    cause: str
    fix: str
    fix_detail: str = Field(default="", description="The exact change that worked, if the thread gives one.")
    expected_remedy_any: list[str] = Field(default_factory=list)
    collected: str = Field(default="", description="Which review round collected it (for blind figures).")


_RELEASE = r"^\d{1,6}(\.\d{1,6}){0,5}$"  # a release number: bounded digits and parts


def _release_key(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


class VersionRow(_Strict):
    """One row of a version table: the releases from ``version`` up to (not including) ``until``
    (by default the next row's ``version``; open-ended for the last row)."""

    id: str = Field(default="", pattern=r"^([a-z][a-z0-9_]*)?$",
                    description="known_bugs: the rule's id (the rows of other kinds are named after the table).")
    version: str = Field(pattern=_RELEASE, description="The first release the row covers.")
    until: str = Field(default="", pattern=r"^(\d{1,6}(\.\d{1,6}){0,5})?$",
                       description="The first release it no longer covers: for known_bugs, the release with the fix.")
    set: dict[str, FactValue] = Field(default_factory=dict, description="lookup: the facts the row gives, when unknown.")
    needs: str = Field(default="", pattern=r"^(\d{1,6}(\.\d{1,6}){0,5})?$",
                       description="minimum: the least version of the table's ``compare`` fact these releases need.")
    what: str = Field(default="", description="known_bugs: what goes wrong, and the way around it; minimum: a note.")
    when: "Condition | None" = Field(default=None, description="known_bugs: when the bug shows (besides the version).")
    strength: float | None = Field(default=None, ge=-1, le=1, description="known_bugs: overrides the table's strength.")
    references: list[str] = Field(default_factory=list)
    examples: Examples = Field(default_factory=Examples)


class VersionTable(_Strict):
    """Version knowledge as a table with references, lowered by the loader into one rule per row
    (kb/versions.py), so chaining, explanations and questions treat each row like any rule.

    - ``lookup``: a release of ``key`` gives other facts (the NCCL and CUDA a torch wheel ships),
      each only while that fact is unknown, at ``certainty``;
    - ``known_bugs``: releases of ``key`` from ``version`` up to ``until`` (the fix) have a bug that
      shows when ``when`` holds: evidence for ``cause``, and ``target`` set to the fixed release;
    - ``minimum``: releases of ``key`` need ``compare`` at least ``needs`` (the CUDA runtime and the
      driver): evidence for ``cause`` when it is lower, and ``target`` set to the minimum.
    """

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    kind: Literal["lookup", "known_bugs", "minimum"]
    description: str = Field(min_length=1)
    key: str = Field(description="The version fact the rows are releases of.")
    compare: str = Field(default="", description="minimum: the version fact that must reach each row's needs.")
    cause: str = Field(default="", description="known_bugs and minimum: the cause a matching row weighs.")
    strength: float = Field(default=0.5, ge=-1, le=1)
    target: str = Field(default="", description="A version fact set to the release that fixes it (known_bugs) "
                                                 "or to the minimum needed (minimum).")
    when: "Condition | None" = Field(default=None, description="A condition every row's rule needs too.")
    certainty: float = Field(default=0.8, gt=0, le=1, description="lookup: certainty of the facts it gives.")
    references: list[str] = Field(min_length=1)
    rows: list[VersionRow] = Field(min_length=1)
    examples: Examples = Field(default_factory=Examples)

    @model_validator(mode="after")
    def _rows_fit_kind(self) -> "VersionTable":
        if self.strength == 0:
            raise ValueError("strength 0 says nothing")
        weighs = self.kind != "lookup"
        if weighs != bool(self.cause):
            raise ValueError(f"a {self.kind} table {'needs' if weighs else 'takes no'} cause")
        if (self.kind == "minimum") != bool(self.compare):
            raise ValueError("compare belongs to minimum tables, and they need it")
        for row in self.rows:
            where = f"row {row.id or row.version}"
            if self.kind == "lookup" and (not row.set or row.needs or row.what or row.when or row.id):
                raise ValueError(f"{where}: a lookup row has set and nothing of the other kinds")
            if self.kind == "minimum" and (not row.needs or row.set or row.when or row.id):
                raise ValueError(f"{where}: a minimum row has needs (and may say what) and nothing of the other kinds")
            if self.kind == "known_bugs":
                if not (row.id and row.until and row.what) or row.set or row.needs:
                    raise ValueError(f"{where}: a known_bugs row has id, until and what, and no set or needs")
                if not row.references:
                    raise ValueError(f"{where}: a known bug needs a reference")
            if row.until and _release_key(row.until) <= _release_key(row.version):
                raise ValueError(f"{where}: until {row.until} is not after version {row.version}")
        if self.kind != "known_bugs":
            keys = [_release_key(row.version) for row in self.rows]
            if keys != sorted(set(keys)):
                raise ValueError("rows must be in ascending order of version, each version once")
        return self


class KBFile(_Strict):
    """One YAML file of the knowledge base: a cause file has ``cause``; a vocabulary file has
    facts, symptoms, signatures and derivation rules; an incident file has ``incidents``."""

    cause: Cause | None = None
    facts: list[Fact] = Field(default_factory=list)
    symptoms: list[Symptom] = Field(default_factory=list)
    signatures: list[Signature] = Field(default_factory=list)
    rules: list[Rule] = Field(default_factory=list)
    causes: list[Cause] = Field(default_factory=list)
    fixes: list[Fix] = Field(default_factory=list)
    incidents: list[Incident] = Field(default_factory=list)
    versions: list[VersionTable] = Field(default_factory=list)


class KnowledgeBase(_Strict):
    """All files merged, as the compiled artifact holds them; ``origins`` maps each item id to
    ``file:line`` for messages."""

    facts: dict[str, Fact]
    symptoms: dict[str, Symptom]
    signatures: dict[str, Signature]
    rules: dict[str, Rule]
    causes: dict[str, Cause]
    fixes: dict[str, Fix]
    incidents: dict[str, Incident] = Field(default_factory=dict)
    versions: dict[str, VersionTable] = Field(default_factory=dict)
    origins: dict[str, str] = Field(default_factory=dict)


Condition.model_rebuild()
Implication.model_rebuild()
Fact.model_rebuild()
VersionRow.model_rebuild()
VersionTable.model_rebuild()


def dump_json_schema() -> dict[str, Any]:
    """The JSON Schema of one KB file, for editors."""
    schema = KBFile.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "nccl-doctor knowledge-base file"
    return schema
