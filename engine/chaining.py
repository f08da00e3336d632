"""Forward chaining to a fixpoint.

Order, fully specified: the agenda holds rules whose inputs changed; the next rule to test is
the earliest in the KB (vocabulary files first, then cause files, each in path order; rules in
file order). A rule fires when its condition is true, at most once per inference
(refraction). Within one inference facts are only ever added, never changed (the first value
set wins), so every rule fires at most once and inference terminates on any KB, cyclic rules
included.
"""
from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field

from .certainty import combine_all
from .compiled import CompiledKB
from .memory import FactRecord, Source

__all__ = ["Firing", "Inference", "infer", "extend"]


@dataclass(frozen=True)
class Firing:
    """One rule firing: the premise certainty and the facts it read."""

    rule: str
    certainty: float
    facts: tuple[str, ...]


@dataclass
class Inference:
    """The result of chaining: all facts, the rules fired in order, evidence per cause."""

    facts: dict[str, FactRecord]
    fired: list[Firing] = field(default_factory=list)
    evidence: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    fired_ids: set[str] = field(default_factory=set)
    matched_words: dict[str, tuple[str, ...]] = field(default_factory=dict)  # relevance evidence per cause

    def certainty(self, cause: str) -> float:
        return combine_all(v for _, v in self.evidence.get(cause, ()))

    def certainties(self) -> dict[str, float]:
        return {cause: combine_all(v for _, v in items) for cause, items in self.evidence.items()}

    def copy(self) -> "Inference":
        return Inference(
            facts=dict(self.facts),
            fired=list(self.fired),
            evidence={k: list(v) for k, v in self.evidence.items()},
            fired_ids=set(self.fired_ids),
            matched_words=self.matched_words,
        )


def infer(ckb: CompiledKB, base: Mapping[str, FactRecord]) -> Inference:
    """Chain from the given facts to a fixpoint."""
    state = Inference(facts=dict(base))
    start = set(ckb.absence_rules)
    for name in base:
        start.update(ckb.rules_by_fact.get(name, ()))
    _run(ckb, state, start)
    return state


def extend(ckb: CompiledKB, state: Inference, new: Mapping[str, FactRecord]) -> Inference:
    """Continue a finished inference with extra facts (used to simulate an answer).

    Facts already known are not replaced. Rules that fired stay fired, so this is the
    monotonic approximation of re-running :func:`infer` from scratch.
    """
    out = state.copy()
    touched: set[int] = set()
    for name, record in new.items():
        if name not in out.facts:
            out.facts[name] = record
            touched.update(ckb.rules_by_fact.get(name, ()))
    _run(ckb, out, touched)
    return out


def _run(ckb: CompiledKB, state: Inference, start: set[int]) -> None:
    rules = ckb.rules
    heap = [(rules[i].order, i) for i in start if rules[i].id not in state.fired_ids]
    heapq.heapify(heap)
    queued = {i for _, i in heap}
    while heap:
        _, index = heapq.heappop(heap)
        queued.discard(index)
        compiled = rules[index]
        if compiled.id in state.fired_ids:
            continue
        truth, premise = compiled.predicate(state.facts)
        if truth is not True:
            continue
        state.fired_ids.add(compiled.id)
        used = tuple(sorted(n for n in compiled.reads if n in state.facts))
        state.fired.append(Firing(compiled.id, premise, used))
        for cause in compiled.rule.then.evidence:
            state.evidence.setdefault(cause.cause, []).append((compiled.id, cause.strength * premise))
        for name, value in compiled.sets:
            if name in state.facts:
                continue
            state.facts[name] = FactRecord(
                name, value, Source("rule", compiled.id), premise * compiled.rule.certainty, used
            )
            for dependent in ckb.rules_by_fact.get(name, ()):
                if dependent not in queued and rules[dependent].id not in state.fired_ids:
                    heapq.heappush(heap, (rules[dependent].order, dependent))
                    queued.add(dependent)
