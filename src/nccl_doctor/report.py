"""What a report shows, decided once: the blocks of a diagnosis, a plan, an explanation and a
whole session (:mod:`.document`), written out as Markdown to paste into an issue or a ticket,
drawn on a terminal by the one-shot (:mod:`.terminal`), or given as JSON.

Front ends call :func:`session_markdown`, :func:`session_json`, :func:`save_report` or
:func:`session_blocks` (the JSON itself is assembled in :mod:`.contract`); :func:`plan_markdown`, :func:`how_markdown`,
:func:`why_markdown` and :func:`similar_markdown` render the pieces on their own (the TUI shows them). ``redact=True`` hides
host names, addresses, user names and secrets (:mod:`.redaction`) with placeholders that stay
the same throughout one report.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .document import (Block, Code, Heading, Inline, ItemList, Paragraph, Quote, Span, Table, bold, code, em, link,
                       to_markdown)
from .engine import Diagnosis, How, Plan, Session, SimilarIncident, Why
from .engine.results import EvidenceItem

__all__ = [
    "format_value",
    "plan_blocks",
    "diagnoses_blocks",
    "session_blocks",
    "plan_markdown",
    "how_markdown",
    "why_markdown",
    "diagnoses_markdown",
    "similar_blocks",
    "similar_markdown",
    "session_markdown",
    "session_json",
    "save_report",
]

MAX_TEXT_IN_REPORT = 4_000
BRIEF_DIAGNOSES = 5
BRIEF_EVIDENCE = 3
BRIEF_SIMILAR = 3


def format_value(value: Any) -> str:
    """A fact value as a person reads it."""
    if value is True:
        return "yes"
    if value is False:
        return "no"
    return str(value)


def _percent(value: float) -> str:
    return f"{round(max(value, 0.0) * 100)}%"


# ------------------------------------------------------------------------------ the plan
_KINDS = {"check": "Check", "change": "Change", "workaround": "Workaround"}


def plan_blocks(plan: Plan, titles: Mapping[str, str] | None = None, *, level: int = 2,
                show_causes: bool = True) -> list[Block]:
    """The fix plan: numbered steps, with commands and environment as code; when nothing is
    recognised, what to collect next instead."""
    from .engine.language import phrase

    titles = titles or {}
    out: list[Block] = [Heading(level, phrase("fix_plan", plan.lang))]
    if not plan.steps:
        out.append(Paragraph(plan.note or "Nothing to change yet."))
        if plan.collect:
            out.append(Paragraph([bold(phrase("collect_next", plan.lang) + ":")]))
            for item in plan.collect:
                out += [Paragraph(item["text"]), Code([item["command"]])]
        return out
    if plan.causes and show_causes:
        out.append(Paragraph(_joined([bold(titles.get(c, c)) for c in plan.causes], prefix="For: ")))
    if plan.note:
        out.append(Quote(plan.note))
    for step in plan.steps:
        out.append(Heading(level + 1, f"{step.number}. {_KINDS.get(step.kind, step.kind.title())}: {step.title}"))
        if len(plan.causes) > 1:
            out.append(Paragraph([em("For " + ", ".join(titles.get(c, c) for c in step.for_causes) + ".")]))
        out.append(ItemList(step.steps, numbered=True))
        if step.commands:
            out.append(Code(step.commands))
        if step.env:
            out += [Paragraph("Environment:"), Code([f"export {k}={v}" for k, v in step.env.items()])]
        for label, items in (("Verify:", step.verify), ("Caveats:", step.caveats),
                             ("If this does not fix it:", step.if_not_fixed)):
            if items:
                out += [Paragraph([bold(label)]), ItemList(items)]
    return out


def _joined(parts: Sequence[Span], *, prefix: str = "", sep: str = ", ") -> list[Span]:
    out = [Span(prefix)] if prefix else []
    for i, part in enumerate(parts):
        if i:
            out.append(Span(sep))
        out.append(part)
    return out


# ------------------------------------------------------------------------------ diagnoses
def evidence_line(item: EvidenceItem) -> list[Span]:
    """One rule's weight for or against a cause, with the facts it used and their sources."""
    sign = "+" if item.strength > 0 else "−"
    out = [Span(f"{sign}{abs(item.strength):.2f} {item.description or item.rule}")]
    for i, (name, info) in enumerate(item.facts.items()):
        out += [Span(" — " if i == 0 else ", "), code(name),
                Span(f" = {format_value(info['value'])} ({info['source']})")]
    return out


def diagnoses_blocks(diagnoses: Sequence[Diagnosis], *, level: int = 2, brief: bool = False) -> list[Block]:
    """The ranked causes, each with its explanation and the evidence with sources. ``brief``
    (the terminal) keeps the first few causes, the first line of each explanation and the
    strongest evidence."""
    out: list[Block] = [Heading(level, "Diagnoses")]
    if not diagnoses:
        out.append(Paragraph("No cause is raised yet."))
    shown = diagnoses[:BRIEF_DIAGNOSES] if brief else diagnoses
    for rank, diagnosis in enumerate(shown, start=1):
        explanation = diagnosis.explanation.strip()
        if brief:
            explanation = explanation.splitlines()[0] if explanation else ""
        evidence = diagnosis.evidence[:BRIEF_EVIDENCE] if brief else diagnosis.evidence
        out += [Heading(level + 1, f"{rank}. {diagnosis.title} ({_percent(diagnosis.confidence)})"),
                Paragraph([code(diagnosis.id), Span(f" · {diagnosis.area}")], role="muted"),
                Paragraph(explanation)]
        if evidence:
            out += [Paragraph([bold("Evidence:")]), ItemList([evidence_line(e) for e in evidence])]
        if diagnosis.references and not brief:
            out.append(Paragraph([bold("References:"), Span(" " + ", ".join(diagnosis.references))]))
    if brief and len(diagnoses) > len(shown):
        out.append(Paragraph(f"... and {len(diagnoses) - len(shown)} more (--markdown or --json show all)",
                             role="muted"))
    return out


# ------------------------------------------------------------------------------ how / why
def _how_facts(steps: Sequence[Mapping[str, Any]], depth: int = 0) -> list[tuple[Inline, int]]:
    lines: list[tuple[Inline, int]] = []
    for step in steps:
        derived = [Span(", derived by rule "), code(step["derived_by"])] if step.get("derived_by") else []
        lines.append(([code(step["fact"]), Span(f" = {format_value(step['value'])} (from {step['source']}"),
                       *derived, Span(")")], depth))
        lines.extend(_how_facts(step.get("from_facts", []), depth + 1))
    return lines


def how_blocks(how: How) -> list[Block]:
    """How a cause was weighed: each rule, its contribution, the facts and their sources."""
    out: list[Block] = [Heading(2, f"How I concluded: {how.title}"),
                        Paragraph([Span("Confidence now: "), bold(_percent(how.confidence))])]
    if not how.rules:
        out.append(Paragraph("No rule has weighed on this cause yet."))
    for rule in how.rules:
        sign = "for" if rule["contribution"] > 0 else "against"
        out.append(Paragraph([bold(rule["description"] or rule["rule"]),
                              Span(f" — {abs(rule['contribution']):.2f} {sign}  \n"),
                              em(f"rule `{rule['rule']}` ({rule['defined_at']})")]))
        facts = _how_facts(rule["facts"])
        if facts:
            out.append(ItemList([text for text, _ in facts], depths=[depth for _, depth in facts]))
    return out


def why_blocks(why: Why) -> list[Block]:
    """Why a question is asked: the causes each answer would move, now and after."""
    out: list[Block] = [Heading(2, "Why I am asking"), Paragraph([em(why.text)])]
    if not why.causes:
        return out + [Paragraph("No leading cause depends on this answer any more.")]
    answers = list(why.causes[0]["by_answer"])
    labels = [f"if {a if a not in ('True', 'False') else format_value(a == 'True')}" for a in answers]
    rows = [[c["title"], _percent(c["now"]), *(_percent(c["by_answer"].get(a, 0.0)) for a in answers)]
            for c in why.causes]
    return out + [Paragraph("The answer separates these causes (confidence now, and after each answer):"),
                  Table(["Cause", "now", *labels], rows)]


def plan_markdown(plan: Plan, titles: Mapping[str, str] | None = None, *, heading: str = "##",
                  show_causes: bool = True) -> str:
    """The fix plan as Markdown (see :func:`plan_blocks`)."""
    return to_markdown(plan_blocks(plan, titles, level=len(heading), show_causes=show_causes))


def diagnoses_markdown(diagnoses: list[Diagnosis], *, heading: str = "##") -> str:
    """The ranked causes as Markdown (see :func:`diagnoses_blocks`)."""
    return to_markdown(diagnoses_blocks(diagnoses, level=len(heading)))


def how_markdown(how: How) -> str:
    return to_markdown(how_blocks(how))


def similar_blocks(similar: Iterable[SimilarIncident], titles: Mapping[str, str] | None = None, *,
                   level: int = 2) -> list[Block]:
    """Reported incidents like this session: what happened, its cause, how alike, and the link
    to its thread (nothing when there are none)."""
    items: list[Inline] = [
        [Span(incident.summary + " — "), Span((titles or {}).get(incident.cause, incident.cause) + " ("),
         code(incident.cause), Span(f"), {round(incident.score * 100)}% alike: "), link(incident.source)]
        for incident in similar
    ]
    return [Heading(level, "Similar reported incidents"), ItemList(items)] if items else []


def similar_markdown(similar: Iterable[SimilarIncident], titles: Mapping[str, str] | None = None, *,
                     heading: str = "##") -> str:
    """The similar reported incidents as Markdown (see :func:`similar_blocks`)."""
    return to_markdown(similar_blocks(similar, titles, level=len(heading)))


def why_markdown(why: Why) -> str:
    return to_markdown(why_blocks(why))


# ------------------------------------------------------------------------------ a session
def _probe_blocks(probes: Sequence[Mapping[str, Any]]) -> list[Block]:
    lines: list[Inline] = []
    for probe in probes:
        status = probe.get("status", "")
        if status not in ("ok", "failed") or not probe.get("findings"):
            lines.append([code(probe["name"]), Span(f" {status}" + (f": {probe['detail']}" if probe.get("detail") else ""))])
        lines += [[code(probe["name"]), Span(f" {finding}")] for finding in probe.get("findings", [])]
    return [Heading(2, "Probes"), ItemList(lines)] if lines else []


def _answers_blocks(session: Session) -> list[Block]:
    kb = session.doctor.kb
    lines: list[Inline] = []
    for fact_id, value in [*session.answers().items(), *((f, None) for f in session.unknown)]:
        fact = kb.facts.get(fact_id)
        question = fact.question if fact and fact.question else fact_id
        lines.append([Span(f"{question} "), bold("don't know" if value is None else format_value(value))])
    return [Heading(2, "Answers"), ItemList(lines)] if lines else []


def _given_blocks(session: Session) -> list[Block]:
    out: list[Block] = []
    for text in session.texts:
        shown = text if len(text) <= MAX_TEXT_IN_REPORT else text[:MAX_TEXT_IN_REPORT] + "\n[...]"
        out.append(Code(shown.rstrip("\n").splitlines()) if "\n" in shown.strip() else Quote(shown.strip()))
    logs: list[Inline] = []
    for log in session.logs:
        line: list[Span] = [Span("log "), code(log.name), Span(f": {log.lines:,} lines")]
        if log.hits:
            line.append(Span("; recognised "))
            for i, (signature, info) in enumerate(log.hits.items()):
                line += [Span("; " if i else ""), code(signature), Span(f" ×{info['count']} (first at {info['first']})")]
        else:
            line.append(Span("; nothing recognised"))
        logs.append(line)
    if logs:
        out.append(ItemList(logs))
    return [Heading(2, "What was reported"), *out] if out else []


def _questions_blocks(session: Session, limit: int) -> list[Block]:
    questions = session.questions(limit=limit)
    if not questions:
        return []
    return [Heading(2, "Questions that would narrow it down"),
            ItemList([[Span(f"{q.text}  "), code(f"--fact {q.id}=...")] for q in questions])]


def session_blocks(session: Session, *, hang_lines: Sequence[str] = (), probes: Sequence[Mapping[str, Any]] = (),
                   brief: bool = False, title: str = "nccl-doctor report", empty_hint: str = "") -> list[Block]:
    """Everything a report on this session shows. ``brief`` is the one-shot's terminal view:
    no title, answers, transcript or fact table, and the short form of each diagnosis."""
    from .engine.language import phrase

    diagnoses = session.diagnoses()
    supported = [d for d in diagnoses if d.supported]
    related = [d for d in diagnoses if not d.supported]  # shared words only: never the diagnosis
    plan = session.plan()
    out: list[Block] = [] if brief else [Heading(1, title)]
    if supported and not brief:
        out.append(Paragraph([bold("Most likely:"), Span(f" {supported[0].title} ({_percent(supported[0].confidence)})")]))
    if hang_lines:
        out += [Heading(2, "Hang analysis"), ItemList(list(hang_lines))]
    out += _probe_blocks(probes)
    if supported or not empty_hint:
        out += diagnoses_blocks(supported, brief=brief)
    if related:
        out += [Heading(2, phrase("possibly_related", plan.lang)),
                ItemList([f"{d.title} ({_percent(d.confidence)})" for d in related[:3 if brief else None]])]
    out += similar_blocks(session.similar(limit=BRIEF_SIMILAR if brief else None),
                          {c: cause.title for c, cause in session.doctor.kb.causes.items()})
    if supported or not empty_hint or (plan.collect and (session.texts or session.logs)):
        out += plan_blocks(plan, {d.id: d.title for d in diagnoses})
    else:
        out.append(Paragraph(empty_hint))
    out += _questions_blocks(session, limit=3)
    if not brief:
        out += _answers_blocks(session) + _given_blocks(session)
        facts = session.facts()
        if facts:
            rows = [[[code(name)], format_value(r.value), str(r.source)] for name, r in sorted(facts.items())]
            out += [Heading(2, "Facts"), Table(["Fact", "Value", "Source"], rows)]
    return out


def session_markdown(session: Session, *, redact: bool = False, title: str = "nccl-doctor report",
                     hang_lines: Sequence[str] = (), probes: Sequence[Mapping[str, Any]] = (),
                     hang: Mapping[str, Any] | None = None) -> str:
    """The whole session as one Markdown document (optionally redacted); ``hang`` (the hang
    analysis as data) only teaches the redaction which names are hosts."""
    text = to_markdown(session_blocks(session, hang_lines=hang_lines, probes=probes, title=title)) + "\n"
    if redact:
        from .redaction import NOTE, session_redactor

        text = session_redactor(session, hang, list(hang_lines), list(probes))(text) + "\n" + NOTE + "\n"
    return text


def session_json(session: Session, *, redact: bool = False, indent: int | None = 2) -> str:
    """:func:`~nccl_doctor.contract.report_data` as JSON text."""
    from .contract import report_data

    return json.dumps(report_data(session, redact=redact), ensure_ascii=False, indent=indent, default=str) + "\n"


def save_report(session: Session, path: str | Path, *, redact: bool = False) -> Path:
    """Write the report to ``path``: JSON when it ends in ``.json``, Markdown otherwise."""
    target = Path(path).expanduser()
    body = session_json(session, redact=redact) if target.suffix.lower() == ".json" else session_markdown(session, redact=redact)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(body, encoding="utf-8")
    return target
