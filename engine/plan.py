"""The fix plan: ordered, de-duplicated steps over the leading causes.

Leading causes are those within reach of the best one (at least 40 % of its confidence and
above 0.15), at most four. Their fixes are taken in cause order; a fix shared by two causes
appears once and names both. Cheap decisive checks come first (by cost), then changes, then
workarounds, each group in the order of the causes they serve — except when the best cause is
all but certain (:data:`CERTAIN`): then checking is done, and its first fix leads the plan.
"""
from __future__ import annotations

from ..kb.artifact import KnowledgeBase
from .results import Diagnosis, Plan, PlanStep

__all__ = ["build_plan", "MAX_PLAN_CAUSES"]

MAX_PLAN_CAUSES = 4
CERTAIN = 0.85
_KIND_ORDER = {"check": 0, "change": 1, "workaround": 2}


def build_plan(kb: KnowledgeBase, diagnoses: list[Diagnosis]) -> Plan:
    if not diagnoses:
        return Plan(causes=[], steps=[], note="No cause is raised yet: describe the failure, add a log, or answer the questions.")
    top = diagnoses[0].confidence
    leading = [d for d in diagnoses if d.confidence >= max(0.15, 0.4 * top)][:MAX_PLAN_CAUSES] or diagnoses[:1]
    owners: dict[str, list[str]] = {}
    first_rank: dict[str, int] = {}
    for rank, diagnosis in enumerate(leading):
        for fix_id in kb.causes[diagnosis.id].fixes:
            owners.setdefault(fix_id, []).append(diagnosis.id)
            first_rank.setdefault(fix_id, rank)
    order = sorted(
        owners,
        key=lambda f: (
            _KIND_ORDER[kb.fixes[f].kind],
            kb.fixes[f].cost if kb.fixes[f].kind == "check" else 0,
            first_rank[f],
            kb.causes[leading[first_rank[f]].id].fixes.index(f),
        ),
    )
    if top >= CERTAIN:
        main_fix = next((f for f in kb.causes[leading[0].id].fixes if kb.fixes[f].kind != "check"), None)
        if main_fix is not None:
            order.remove(main_fix)
            order.insert(0, main_fix)
    steps = []
    for number, fix_id in enumerate(order, start=1):
        fix = kb.fixes[fix_id]
        steps.append(PlanStep(
            number=number, fix=fix.id, title=fix.title, kind=fix.kind, for_causes=owners[fix_id],
            steps=list(fix.steps), commands=list(fix.commands), env=dict(fix.env),
            verify=list(fix.verify), caveats=list(fix.caveats), if_not_fixed=list(fix.if_not_fixed),
        ))
    note = ""
    if top < 0.3:
        note = "Confidence is low: answer the open questions or add NCCL_DEBUG=INFO logs to narrow it down."
    return Plan(causes=[d.id for d in leading], steps=steps, note=note)
