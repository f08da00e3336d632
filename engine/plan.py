"""The fix plan: ordered, de-duplicated steps over the causes the rules support.

Which causes. Only causes with support beyond shared words (a rule, symptom or log line; see
``Diagnosis.supported``) enter a plan; those within reach of the best one (at least 40 % of its
confidence and above 0.15), at most four. When no cause has such support the plan is "not
recognised": no steps, the causes that merely share words listed as possibly related, and what to
collect next.

Which order. Every step gets an expected value::

    value = likelihood × settles ÷ cost

``likelihood`` is the confidence of the cause it serves (summed over causes when a fix serves
several, at most 1); ``settles`` is the chance the step decides the matter — :data:`SETTLES` by
kind: a check settles whether the cause is present, a change fixes it when it is, a workaround
only avoids it; ``cost`` is the fix's cost (1 = seconds … 5 = a maintenance window). Steps go
by value, best first. When the best cause clearly leads (at least :data:`CLEAR_LEAD` and
:data:`LEAD_RATIO` times the next), its decisive check (its cheapest) and its main fix (its first
change) come first — the fix before the check once it is all but certain (:data:`CERTAIN`) —
and the rest follow by value. Apart from that leader, a cause's check never comes after its change.
"""
from __future__ import annotations

from ..kb.artifact import KnowledgeBase
from .language import COLLECT_COMMANDS, fix_texts, phrase, pick
from .results import Diagnosis, Plan, PlanStep

__all__ = ["build_plan", "step_value", "MAX_PLAN_CAUSES", "SETTLES", "CLEAR_LEAD", "LEAD_RATIO", "CERTAIN"]

MAX_PLAN_CAUSES = 4
CERTAIN = 0.85
CLEAR_LEAD = 0.4
LEAD_RATIO = 1.5
SETTLES = {"check": 0.9, "change": 0.7, "workaround": 0.4}
_COLLECT = ("collect_debug", "collect_first_rank", "collect_flight_recorder", "collect_versions")


def step_value(likelihood: float, kind: str, cost: int) -> float:
    """Expected value of a step: likelihood × chance it settles or fixes ÷ cost."""
    return min(likelihood, 1.0) * SETTLES[kind] / max(cost, 1)


def build_plan(kb: KnowledgeBase, diagnoses: list[Diagnosis], lang: str = "en", *, told: bool = True) -> Plan:
    """The plan for ``diagnoses`` (best first) in ``lang``; ``told`` says whether the user has
    described anything yet (nothing told: "describe it"; told but unrecognised: say so)."""
    supported = [d for d in diagnoses if d.supported]
    if not supported:
        related = [d.id for d in diagnoses]
        collect = [{"text": phrase(key, lang), "command": COLLECT_COMMANDS[key]} for key in _COLLECT]
        note = phrase("not_recognised" if told else "plan_empty", lang)
        return Plan(causes=[], steps=[], note=note, recognised=False, related=related, collect=collect, lang=lang)
    top = supported[0].confidence
    leading = [d for d in supported if d.confidence >= max(0.15, 0.4 * top)][:MAX_PLAN_CAUSES] or supported[:1]
    owners: dict[str, list[str]] = {}
    likelihood: dict[str, float] = {}
    for diagnosis in leading:
        for fix_id in kb.causes[diagnosis.id].fixes:
            owners.setdefault(fix_id, []).append(diagnosis.id)
            likelihood[fix_id] = likelihood.get(fix_id, 0.0) + diagnosis.confidence
    value = {f: step_value(likelihood[f], kb.fixes[f].kind, kb.fixes[f].cost) for f in owners}
    order = sorted(owners, key=lambda f: (-round(value[f], 9), _position(kb, leading, owners[f][0], f)))
    order = _checks_first(kb, order, owners)
    second = leading[1].confidence if len(leading) > 1 else 0.0
    if top >= CLEAR_LEAD and top >= LEAD_RATIO * second:
        order = _leader_first(kb, order, leading[0].id, top)
    steps = []
    for number, fix_id in enumerate(order, start=1):
        fix = kb.fixes[fix_id]
        texts = fix_texts(fix)
        translated = bool(texts[lang]["title"]) if lang in texts else False
        steps.append(PlanStep(
            number=number, fix=fix.id, title=pick(texts, "title", lang), kind=fix.kind, for_causes=owners[fix_id],
            steps=list(texts[lang]["steps"]) if translated and texts[lang]["steps"] else list(fix.steps),
            commands=list(fix.commands), env=dict(fix.env),
            verify=list(fix.verify), caveats=list(fix.caveats), if_not_fixed=list(fix.if_not_fixed),
            value=round(value[fix_id], 4), texts=texts,
        ))
    note = phrase("plan_low", lang) if top < 0.3 else ""
    related = [d.id for d in diagnoses if not d.supported]
    return Plan(causes=[d.id for d in leading], steps=steps, note=note, related=related, lang=lang)


def _position(kb: KnowledgeBase, leading: list[Diagnosis], cause_id: str, fix_id: str) -> tuple[int, int]:
    rank = next(i for i, d in enumerate(leading) if d.id == cause_id)
    return rank, kb.causes[cause_id].fixes.index(fix_id)


def _checks_first(kb: KnowledgeBase, order: list[str], owners: dict[str, list[str]]) -> list[str]:
    """Move each check ahead of the first change or workaround of a cause it serves."""
    out: list[str] = []
    for fix_id in order:
        if kb.fixes[fix_id].kind == "check":
            serves = set(owners[fix_id])
            at = next((i for i, f in enumerate(out) if kb.fixes[f].kind != "check" and serves & set(owners[f])), None)
            if at is not None:
                out.insert(at, fix_id)
                continue
        out.append(fix_id)
    return out


def _leader_first(kb: KnowledgeBase, order: list[str], leader: str, confidence: float) -> list[str]:
    """The leader's decisive check and main fix first (fix first once it is all but certain)."""
    fixes = kb.causes[leader].fixes
    checks = sorted((f for f in fixes if kb.fixes[f].kind == "check"), key=lambda f: (kb.fixes[f].cost, fixes.index(f)))
    main = next((f for f in fixes if kb.fixes[f].kind == "change"), None) or next(
        (f for f in fixes if kb.fixes[f].kind != "check"), None)
    head = [f for f in (checks[:1] + [main]) if f is not None]
    if confidence >= CERTAIN:
        head = [f for f in ([main] + checks[:1]) if f is not None]
    return head + [f for f in order if f not in head]
