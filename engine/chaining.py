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
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from .certainty import combine_evidence
from .compiled import CompiledKB, direct_predicates
from .memory import FactRecord, Source

__all__ = ["Firing", "Inference", "infer", "extend", "consequences", "answers_evidence", "ready_rules"]


class Firing(NamedTuple):
    """One rule firing: the premise certainty and the facts it read."""

    rule: str
    certainty: float
    facts: tuple[str, ...]


class Inference:
    """The result of chaining: all facts, the rules fired in order, evidence per cause."""

    __slots__ = ("facts", "fired", "evidence", "fired_ids", "matched_words", "similar", "similar_by_cause", "_roots")

    def __init__(self, facts: dict[str, FactRecord], fired: list[Firing] | None = None,
                 evidence: dict[str, list[tuple[str, float]]] | None = None, fired_ids: set[str] | None = None,
                 matched_words: dict[str, tuple[str, ...]] | None = None, similar: tuple = (),
                 similar_by_cause: dict[str, tuple] | None = None) -> None:
        self.facts = facts
        self.fired = [] if fired is None else fired
        self.evidence = {} if evidence is None else evidence
        self.fired_ids = set() if fired_ids is None else fired_ids
        self.matched_words = {} if matched_words is None else matched_words  # relevance evidence per cause
        self.similar = similar  # the similar incidents (engine.similarity.SimilarIncident), best first
        self.similar_by_cause = {} if similar_by_cause is None else similar_by_cause  # case-based evidence per cause
        self._roots: tuple[int, dict[str, frozenset[str]]] | None = None  # see roots()

    def __repr__(self) -> str:
        return f"Inference({len(self.facts)} facts, {len(self.fired)} rules fired, {len(self.evidence)} causes)"

    def certainty(self, cause: str) -> float:
        return combine_evidence(self.evidence.get(cause, ()), self.roots)

    def certainties(self) -> dict[str, float]:
        return {cause: combine_evidence(items, self.roots) for cause, items in self.evidence.items()}

    def roots(self, rule_id: str) -> frozenset[str] | None:
        """The facts a fired rule rests on: each fact a rule derived traced back through the facts
        that rule read, down to those given (by the user, a log, a probe, an answer); None for
        evidence that is not a fired rule. Kept per inference until another rule fires."""
        kept = self._roots
        if kept is None or kept[0] != len(self.fired):
            facts, memo = self.facts, {}
            kept = self._roots = (len(self.fired), {
                f.rule: frozenset(name for read in f.facts for name in _given(facts, read, memo)) for f in self.fired})
        return kept[1].get(rule_id)

    def copy(self) -> "Inference":
        return Inference(
            facts=dict(self.facts),
            fired=list(self.fired),
            evidence={k: list(v) for k, v in self.evidence.items()},
            fired_ids=set(self.fired_ids),
            matched_words=self.matched_words,
            similar=self.similar,
            similar_by_cause=self.similar_by_cause,
        )


def _given(facts: Mapping[str, FactRecord], name: str, memo: dict[str, frozenset[str]]) -> frozenset[str]:
    """The given facts behind ``name``: itself unless a rule derived it from other facts."""
    found = memo.get(name)
    if found is None:
        memo[name] = frozenset((name,))  # a cycle ends here
        record = facts.get(name)
        if record is not None and record.source.kind == "rule" and record.because:
            found = frozenset().union(*(_given(facts, read, memo) for read in record.because))
        else:
            found = frozenset((name,))
        memo[name] = found
    return found


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


def ready_rules(ckb: CompiledKB, state: Inference, facts: Iterable[str]) -> dict[str, list[int]]:
    """Per fact, the unfired rules reading it that could fire once it alone is added to the
    state (every other fact they need is known): the start of every simulated answer's chaining,
    found once for all the answers to that fact."""
    known = state.facts.keys()
    fired = state.fired_ids
    readers = _readers(ckb)[0]
    out: dict[str, list[int]] = {}
    for name in facts:
        # each fact the rule needs is known, ``name`` apart (a set comparison, in C)
        out[name] = [index for index, rule_id, others in readers.get(name, ()) if rule_id not in fired and others <= known]
    return out


_Readers = dict[str, tuple[tuple[int, str, frozenset[str]], ...]]
#: Per compiled KB (by id, with the KB to check it): per fact, the rules reading it as (index, id,
#: the facts the rule needs other than this one), in ``rules_by_fact``'s order; and whether that
#: order is the agenda's (indexes ascending, and ascending indexes have ascending ``order``).
_READERS: dict[int, tuple[CompiledKB, _Readers, bool]] = {}


def _readers(ckb: CompiledKB) -> tuple[_Readers, bool]:
    found = _READERS.get(id(ckb))
    if found is None or found[0] is not ckb:
        if len(_READERS) >= 4:  # the few most recent KBs (tests load several)
            _READERS.clear()
        rules = ckb.rules
        table = {name: tuple((i, rules[i].id, rules[i].needs - {name}) for i in indexes)
                 for name, indexes in ckb.rules_by_fact.items()}
        in_order = (all(a.order < b.order for a, b in zip(rules, rules[1:]))
                    and all(list(v) == sorted(set(v)) for v in ckb.rules_by_fact.values()))
        found = _READERS[id(ckb)] = (ckb, table, in_order)
    return found[1], found[2]


def consequences(ckb: CompiledKB, state: Inference, new: Mapping[str, FactRecord],
                 ready: Mapping[str, list[int]] | None = None
                 ) -> tuple[dict[str, FactRecord], dict[str, list[float]]]:
    """What adding ``new`` to a finished inference would add: the new facts (``new`` included)
    and the new evidence per cause — the same chaining as :func:`extend`, copying only the facts
    (questions simulate hundreds of answers per turn; ``ready`` from :func:`ready_rules` spares
    re-checking the rules that cannot fire)."""
    added = {name: record for name, record in new.items() if name not in state.facts}
    rules = ckb.rules
    if ready is not None and len(added) == 1:
        (name, record), = added.items()
        pending = ready.get(name)
        if not pending:
            return added, {}
        if _readers(ckb)[1]:
            evidence = _evidence_of(rules, pending, state.facts, name, record)
            if evidence is not None:
                return added, evidence
    done = state.fired_ids
    fired: set[str] = set()
    evidence: dict[str, list[float]] = {}
    if ready is not None:
        pending = sorted({i for name in added for i in ready.get(name, ())})
        trusted = set(pending)  # ready_rules found every fact they need known
    else:
        pending = sorted({i for name in added for i in ckb.rules_by_fact.get(name, ()) if rules[i].id not in done})
        trusted = set()
    if not pending:  # no rule can fire: nothing follows
        return added, evidence
    memory = dict(state.facts)  # a plain copy: dict lookups in C beat any overlay
    memory.update(added)
    _agenda(ckb, done, memory, added, pending, trusted, fired, evidence)
    return added, evidence


def _agenda(ckb: CompiledKB, done: set[str], memory: dict[str, FactRecord], added: dict[str, FactRecord],
            pending: list[int], trusted: set[int], fired: set[str], evidence: dict[str, list[float]]) -> None:
    """Chain from the rules ``pending`` (in agenda order) to a fixpoint, adding to ``memory``,
    ``added``, ``fired`` and ``evidence``; rules in ``trusted`` need no check of their facts."""
    rules = ckb.rules
    predicates = direct_predicates(ckb)[0]
    readers = _readers(ckb)[0]
    heap = [(rules[i].order, i) for i in pending]
    queued = set(pending)
    while heap:
        _, index = heapq.heappop(heap)
        queued.discard(index)
        compiled = rules[index]
        if index not in trusted and (compiled.id in fired or not compiled.needs <= memory.keys()):
            continue
        truth, premise = predicates[index](memory)
        if truth is not True:
            continue
        fired.add(compiled.id)
        for cause, strength in compiled.evidence:
            evidence.setdefault(cause, []).append(strength * premise)
        for name, value in compiled.sets:
            if name in memory:
                continue
            used = tuple(sorted(n for n in compiled.reads if n in memory))
            added[name] = memory[name] = FactRecord(name, value, Source("rule", compiled.id),
                                                    premise * compiled.certainty, used)
            known = memory.keys()
            for dependent, rule_id, others in readers.get(name, ()):
                # a rule missing a fact it needs cannot hold: it is queued when that fact is set
                # (it reads it), in time for its turn, so the rules tried, and their order, are
                # those of queueing it now and skipping it when it comes up (``name`` is known
                # now: the rule needs ``others`` besides)
                if others <= known and dependent not in queued and rule_id not in done and rule_id not in fired:
                    heapq.heappush(heap, (rules[dependent].order, dependent))
                    queued.add(dependent)


def answers_evidence(ckb: CompiledKB, state: Inference, name: str, records: Iterable[FactRecord],
                     ready: Mapping[str, list[int]]) -> list[dict[str, list[float]]]:
    """``[consequences(ckb, state, {name: r}, ready)[1] for r in records]``: the new evidence of
    each answer to one fact, the facts copied once for all of them where nothing chains."""
    pending = ready.get(name)
    if not pending or name in state.facts:
        return [{} for _ in records]
    if not _readers(ckb)[1]:
        return [consequences(ckb, state, {name: record}, ready)[1] for record in records]
    rules, memory, out = ckb.rules, dict(state.facts), []
    predicates = direct_predicates(ckb)[0]
    for record in records:
        memory[name] = record
        evidence: dict[str, list[float]] = {}
        fired: set[str] = set()
        for position, index in enumerate(pending):
            truth, premise = predicates[index](memory)
            if truth is not True:
                continue
            compiled = rules[index]
            if any(set_name not in memory for set_name, _ in compiled.sets):
                # it sets a new fact: chaining follows, from this rule on, as the agenda would
                # from the start (the rules before it set nothing new, so nothing was queued)
                _agenda(ckb, state.fired_ids, dict(memory), {name: record}, pending[position:], set(pending),
                        fired, evidence)
                break
            fired.add(compiled.id)
            for cause, strength in compiled.evidence:
                evidence.setdefault(cause, []).append(strength * premise)
        out.append(evidence)
    return out


def _evidence_of(rules, pending: list[int], facts: Mapping[str, FactRecord], name: str,
                 record: FactRecord) -> dict[str, list[float]] | None:
    """The evidence of ``consequences`` when one fact is added and none of the rules ready for it
    that fire sets a new fact: nothing chains, so each is tried once, in agenda order
    (``pending`` is in index order, which is the agenda's when ``_readers`` says so), on the
    facts with the new one. None as soon as a rule that fires would set a new fact (chaining
    follows: the caller takes the agenda's way, from the start)."""
    memory = dict(facts)
    memory[name] = record
    return _evidence_on(rules, pending, memory)


def _evidence_on(rules, pending: list[int], memory: Mapping[str, FactRecord]) -> dict[str, list[float]] | None:
    """:func:`_evidence_of` on the facts with the new one already in ``memory`` (left as it is)."""
    evidence: dict[str, list[float]] = {}
    for index in pending:
        compiled = rules[index]
        truth, premise = compiled.predicate(memory)
        if truth is True:
            for set_name, _ in compiled.sets:
                if set_name not in memory:
                    return None
            for cause, strength in compiled.evidence:
                evidence.setdefault(cause, []).append(strength * premise)
    return evidence


def _run(ckb: CompiledKB, state: Inference, start: set[int]) -> None:
    rules = ckb.rules
    predicates = direct_predicates(ckb)[0]
    readers = _readers(ckb)[0]
    known = state.facts.keys()
    # a rule missing a fact it needs is left out: it is queued when the last such fact is set
    # (as below), which it would have been too after being tried and skipped, and a rule queued
    # since the start waits at the same place in the order: the rules tried, and their order,
    # are the same; most of the rules an inference starts with are such rules
    heap = [(rules[i].order, i) for i in start if rules[i].id not in state.fired_ids and rules[i].needs <= known]
    heapq.heapify(heap)
    queued = {i for _, i in heap}
    while heap:
        _, index = heapq.heappop(heap)
        queued.discard(index)
        compiled = rules[index]
        if compiled.id in state.fired_ids:
            continue
        if not compiled.needs <= known:  # a fact it needs is unknown: it cannot hold (yet; the
            continue  # rule is tried again when that fact is set, as every rule reading it is)
        truth, premise = predicates[index](state.facts)
        if truth is not True:
            continue
        state.fired_ids.add(compiled.id)
        used = tuple(sorted(n for n in compiled.reads if n in state.facts))
        state.fired.append(Firing(compiled.id, premise, used))
        for cause, strength in compiled.evidence:
            state.evidence.setdefault(cause, []).append((compiled.id, strength * premise))
        for name, value in compiled.sets:
            if name in state.facts:
                continue
            state.facts[name] = FactRecord(
                name, value, Source("rule", compiled.id), premise * compiled.certainty, used
            )
            for dependent, rule_id, others in readers.get(name, ()):
                if others <= known and dependent not in queued and rule_id not in state.fired_ids:  # as above
                    heapq.heappush(heap, (rules[dependent].order, dependent))
                    queued.add(dependent)
