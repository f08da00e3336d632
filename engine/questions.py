"""Choosing the next question: the one whose answer best separates the leading causes.

Belief over causes is ``prior × exp(4 × certainty)``, normalised over the leading causes
(plus one bucket for the rest). For each candidate fact the engine simulates every answer,
re-chains, and takes the expected drop in entropy (information gain), answers weighted
equally. Facts already known, answered "don't know", or unable to move any leading cause are
never candidates.

Gain is myopic: a rule that needs two unknown facts gains nothing from either answer alone.
So each candidate also gets a *relevance*, the belief mass of the leading causes whose rules
read it, and questions rank by ``gain + RELEVANCE_WEIGHT × relevance``. While no cause is
confident (certainty below :data:`CONFIDENT`) the leading set is wide (:data:`WIDE`), so the
engine can still find its way to causes nothing points at yet; once one is, causes raised
only by the user's words (:mod:`engine.relevance`) drop out of the leading set. A question is
offered only if it has some gain or some relevance; when none has, there is nothing useful
left to ask.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - the format's one definition, for type checkers
    from ..kb.schema import Condition, Fact
from .chaining import Inference, extend
from .compiled import CompiledKB
from .memory import FactRecord, Source
from .relevance import RELEVANCE
from .results import Question
from .values import Value, coerce, parse_version

__all__ = ["answer_options", "leading_causes", "rank_questions", "simulate", "MIN_GAIN", "LEADING"]

MIN_GAIN = 0.01
LEADING = 8
WIDE = 40
CONFIDENT = 0.5
RELEVANCE_WEIGHT = 0.05
_SHARPNESS = 4.0


def _literals(cond: Condition, out: dict[str, list[object]]) -> None:
    if cond.fact is not None:
        for key in ("eq", "ne", "lt", "le", "gt", "ge"):
            value = getattr(cond, key)
            if value is not None:
                out.setdefault(cond.fact, []).append(value)
        for value in cond.in_ or []:
            out.setdefault(cond.fact, []).append(value)
        return
    for part in cond.all or cond.any or ([cond.not_] if cond.not_ else []):
        _literals(part, out)


def answer_options(ckb: CompiledKB) -> dict[str, list[Value]]:
    """The answers worth simulating for each askable fact.

    bool: yes/no; choice: its choices; number and version: one value on each side of every
    bound the rules test; text: the literal values the rules compare with.
    """
    literals: dict[str, list[object]] = {}
    for rule in ckb.kb.rules.values():
        _literals(rule.when, literals)
    options: dict[str, list[Value]] = {}
    for fact in ckb.kb.facts.values():
        if fact.question is None and not fact.probes:
            continue
        if fact.type == "bool":
            options[fact.id] = [True, False]
        elif fact.type == "choice":
            options[fact.id] = list(fact.choices)
        elif fact.type == "number":
            bounds = sorted({float(v) for v in literals.get(fact.id, []) if _is_number(v)})
            if bounds:
                points = [bounds[0] - 1] + [(a + b) / 2 for a, b in zip(bounds, bounds[1:])] + [bounds[-1] + 1]
                options[fact.id] = [int(p) if float(p).is_integer() else p for p in points]
        elif fact.type == "version":
            found = sorted({parse_version(v) for v in literals.get(fact.id, [])} - {None})
            if found:
                values = [_version_below(found[0])] + [".".join(map(str, v)) for v in found]
                options[fact.id] = values
        else:
            values = [str(v) for v in literals.get(fact.id, [])]
            if values:
                options[fact.id] = list(dict.fromkeys(values)) + ["something else"]
    return options


def _is_number(value: object) -> bool:
    try:
        float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return not isinstance(value, bool)


def _version_below(version: tuple[int, ...]) -> str:
    parts = list(version)
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] > 0:
            parts[i] -= 1
            return ".".join(map(str, parts))
    return "0"


def _weights(ckb: CompiledKB, certainties: Mapping[str, float], causes: Iterable[str]) -> dict[str, float]:
    return {c: ckb.kb.causes[c].prior * math.exp(_SHARPNESS * certainties.get(c, 0.0)) for c in causes}


def leading_causes(ckb: CompiledKB, certainties: Mapping[str, float], limit: int = LEADING) -> list[str]:
    """The causes worth separating: those with support first, then the most common."""
    raised = sorted((c for c, v in certainties.items() if v > 0), key=lambda c: (-certainties[c], -ckb.kb.causes[c].prior, c))
    if len(raised) >= limit:
        return raised[:limit]
    rest = sorted((c for c in ckb.kb.causes if c not in certainties or certainties[c] <= 0),
                  key=lambda c: (-ckb.kb.causes[c].prior, c))
    # With some support, only a few unsupported causes compete; with none, the common ones do.
    return raised + rest[: (limit - len(raised)) if not raised else max(0, 3 - len(raised))]


def _entropy(weights: Mapping[str, float], rest: float) -> float:
    total = sum(weights.values()) + rest
    if total <= 0:
        return 0.0
    h = 0.0
    for w in list(weights.values()) + [rest]:
        if w > 0:
            p = w / total
            h -= p * math.log2(p)
    return h


def simulate(ckb: CompiledKB, state: Inference, fact: Fact, value: Value) -> Inference:
    """The inference as it would be after answering ``fact = value``."""
    record = FactRecord(fact.id, coerce(value, fact.type, fact.choices), Source("answer", "simulated"))
    return extend(ckb, state, {fact.id: record})


def rank_questions(
    ckb: CompiledKB,
    state: Inference,
    options: Mapping[str, list[Value]],
    skip: Iterable[str] = (),
    limit: int = 3,
    by_probe: bool = False,
) -> list[Question]:
    """The best questions to ask now, best first (empty when none is worth asking).

    With ``by_probe`` the candidates are the facts a probe can establish instead of the facts
    with a question for the user.
    """
    certainties = state.certainties()
    confident = max(certainties.values(), default=0.0) >= CONFIDENT
    leading = leading_causes(ckb, certainties, LEADING if confident else WIDE)
    if confident:  # once rules back a cause firmly, word matches alone do not warrant questions
        leading = [c for c in leading if any(rule != RELEVANCE for rule, _ in state.evidence.get(c, ()))]
    if not leading:
        return []
    leading_set = set(leading)
    weights_now = _weights(ckb, certainties, leading)
    rest = max(sum(ckb.kb.causes[c].prior for c in ckb.kb.causes) - sum(ckb.kb.causes[c].prior for c in leading), 0.0)
    h_now = _entropy(weights_now, rest)
    total_weight = sum(weights_now.values()) or 1.0
    skipped = set(skip)
    scored: list[Question] = []
    for fact_id, answers in options.items():
        if fact_id in state.facts or fact_id in skipped:
            continue
        fact = ckb.kb.facts[fact_id]
        if (not fact.probes) if by_probe else (fact.question is None):
            continue
        moved = ckb.influence.get(fact_id, frozenset()) & leading_set
        if not moved:
            continue
        expected, by_answer = 0.0, []
        for answer in answers:
            after = simulate(ckb, state, fact, answer).certainties()
            weights = _weights(ckb, after, leading)
            expected += _entropy(weights, rest) / len(answers)
            by_answer.append(after)
        gain = max(h_now - expected, 0.0)
        separates = sorted(
            (c for c in moved if max(a.get(c, 0.0) for a in by_answer) - min(a.get(c, 0.0) for a in by_answer) > 0.02),
            key=lambda c: leading.index(c),
        )
        relevance = sum(weights_now[c] for c in moved) / total_weight
        if not (gain >= MIN_GAIN and separates) and relevance <= 0:
            continue
        score = gain + RELEVANCE_WEIGHT * relevance
        scored.append(Question(fact.id, fact.question or fact.id, fact.type, list(fact.choices),
                               fact.help, score, separates or sorted(moved, key=leading.index)))
    scored.sort(key=lambda q: (-round(q.gain, 6), q.id))
    return scored[:limit]
