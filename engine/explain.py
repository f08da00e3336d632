"""Explanations as data: HOW a cause was weighed, WHY a question is asked."""
from __future__ import annotations

import math
from collections.abc import Mapping

from .certainty import REPEATED, combine, counted
from .chaining import Inference
from .compiled import CompiledKB
from .memory import FactRecord
from .questions import simulate
from .relevance import RELEVANCE
from .results import How, HowStep, Why
from .similarity import SIMILAR, similar_text

__all__ = ["how", "why", "why_evidence", "fact_trace", "relevance_text", "repeats_text"]


def repeats_text(stronger: str) -> str:
    """What an explanation adds to a rule that repeats a stronger one (engine.certainty)."""
    if not stronger:
        return ""
    return f" (counted at {REPEATED:.0%}: it rests only on facts that {stronger} already weighed)"


def relevance_text(state: Inference, cause_id: str) -> str:
    """The description of relevance evidence: the user's words the cause's text shares."""
    words = ", ".join(state.matched_words.get(cause_id, ()))
    return f"Words of your description that this cause's explanation and fixes, or the reports of its incidents, use: {words}"


def fact_trace(facts: Mapping[str, FactRecord], name: str, depth: int = 0) -> HowStep:
    """A fact with its source; for a fact a rule derived, the facts it came from."""
    record = facts[name]
    children: list[HowStep] = []
    derived_by = ""
    if record.source.kind == "rule":
        derived_by = record.source.detail
        if depth < 8:
            children = [fact_trace(facts, n, depth + 1) for n in record.because if n in facts]
    return HowStep(record.name, record.value, str(record.source), round(record.certainty, 3), derived_by, children)


def how(ckb: CompiledKB, state: Inference, cause_id: str) -> How:
    """Every rule that weighed on the cause, with its contribution and the facts behind it."""
    cause = ckb.kb.causes[cause_id]
    firings = {f.rule: f for f in state.fired}
    rules = []
    for rule_id, contribution, repeats in counted(state.evidence.get(cause_id, []), state.roots):
        if rule_id == RELEVANCE:
            rules.append({"rule": rule_id, "description": relevance_text(state, cause_id),
                          "defined_at": "engine/relevance.py", "contribution": round(contribution, 3), "facts": []})
            continue
        if rule_id == SIMILAR:
            found = state.similar_by_cause.get(cause_id, ())
            rules.append({"rule": rule_id, "description": similar_text(found),
                          "defined_at": "engine/similarity.py", "contribution": round(contribution, 3), "facts": [],
                          "incidents": [{**i.to_dict(), "defined_at": ckb.kb.origin(f"incidents:{i.id}")}
                                        for i in found]})
            continue
        rule = ckb.kb.rules[rule_id]
        firing = firings[rule_id]
        rules.append({
            "rule": rule_id,
            "description": rule.description + repeats_text(repeats),
            "defined_at": ckb.kb.origin(f"rules:{rule_id}"),
            "contribution": round(contribution, 3),
            "facts": [fact_trace(state.facts, n).to_dict() for n in firing.facts],
        })
    return How(cause_id, cause.title, round(max(state.certainty(cause_id), 0.0), 3), rules)


def why(ckb: CompiledKB, state: Inference, fact_id: str, answers: list, leading: list[str]) -> Why:
    """For each leading cause the answer could move: its certainty now and after each answer."""
    fact = ckb.kb.facts[fact_id]
    now = state.certainties()
    outcomes = {str(a): simulate(ckb, state, fact, a).certainties() for a in answers}
    causes = []
    for cause_id in leading:
        after = {a: round(c.get(cause_id, 0.0), 3) for a, c in outcomes.items()}
        if max(after.values(), default=0) - min(after.values(), default=0) > 0.02:
            causes.append({"id": cause_id, "title": ckb.kb.causes[cause_id].title,
                           "now": round(now.get(cause_id, 0.0), 3), "by_answer": after})
    return Why(fact_id, fact.question or fact_id, causes)


def why_evidence(ckb: CompiledKB, state: Inference, fact_id: str, reach, limit: int = 8) -> Why:
    """For an evidence question: the causes its answer could show, the likeliest first, each with
    its certainty now and after the strongest evidence the answer could give it."""
    fact = ckb.kb.facts[fact_id]
    now = state.certainties()
    causes = []
    if reach is not None:
        ranked = sorted(reach.rate, key=lambda c: (-ckb.kb.causes[c].prior * math.exp(4 * now.get(c, 0.0)) * reach.rate[c], c))
        for cause_id in ranked[:limit]:
            before = now.get(cause_id, 0.0)
            causes.append({"id": cause_id, "title": ckb.kb.causes[cause_id].title, "now": round(before, 3),
                           "by_answer": {"if the answer shows it": round(combine(before, reach.strength[cause_id]), 3)}})
    return Why(fact_id, fact.question or fact_id, causes)
