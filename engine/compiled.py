"""The KB compiled once for the engine: predicates, indexes and regexes.

Names are resolved here, so a typo in the KB fails at load time, never mid-session.

Thread safety: a :class:`CompiledKB` is shared by every session of a :class:`~engine.session.Doctor`.
Its only mutable parts are caches filled on first use — a rule's condition compiled the first
time the rule is tried, a regex compiled the first time its needle is seen, and (for a KB read
from its cache file) an item parsed the first time it is read. Each fill stores a
value computed from the read-only KB alone, so two threads racing on one entry both store an
equal value and either one is correct; nothing else ever changes after construction.
"""
from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from ..errors import KBError
from ..kb.artifact import KnowledgeBase, Record
from .conditions import Predicate, compile_condition, condition_facts, condition_needs, holds_with_nothing_known
from ..kb.patterns import Pattern, PatternError, compile_pattern
from .priors import library_priors
from .values import ValueProblem, coerce

if TYPE_CHECKING:  # pragma: no cover - the format's one definition, for type checkers
    from ..kb.schema import Fact, Rule

__all__ = ["CompiledRule", "CompiledKB", "CompileError", "SymptomPattern", "compile_kb", "direct_predicates", "export_layout", "compact_condition",
           "implication_rules", "IMPLIES"]


_CAPTURE = re.compile(r"\(\?P<(\w+)>")


class CompileError(KBError):
    """The KB's meaning is broken (unknown names, bad regexes); ``problems`` lists each."""


class LazyRegexes(dict):
    """RE2 regexes compiled on first use: a one-shot run touches only the few whose needles
    appear. Every pattern was compiled once when the KB was compiled from YAML."""

    def __init__(self, patterns: dict):
        super().__init__()
        self._patterns = patterns  # key -> (pattern, ignore case)

    def __missing__(self, key) -> Pattern:
        pattern, ignore_case = self._patterns[key]
        regex = self[key] = compile_pattern(pattern, ignore_case=ignore_case)
        return regex

    def __contains__(self, key: object) -> bool:
        return key in self._patterns

    def compile_all(self) -> None:
        """Compile every regex now (a long-running server, before its first client)."""
        for key in self._patterns:
            if not dict.__contains__(self, key):
                self.__missing__(key)


class SymptomPattern(NamedTuple):
    """One symptom regex with the literals one of which every match contains (none: always tried)."""

    symptom: str
    index: int
    needles: tuple[str, ...]


class _LazyPredicate:
    """A condition compiled the first time it is tried (most rules of a large KB are never tried
    in a short session; compile_kb(validate=True) compiles them all up front). The condition is
    ``conditions[key]``, read then too: from an artifact's layout, a plain dict without the
    fields it leaves unset (:func:`compact_condition`), so no rule record is parsed for it."""

    __slots__ = ("_conditions", "_key", "_facts", "_compiled")

    def __init__(self, conditions: Mapping[str, Any], key: str, facts) -> None:
        self._conditions, self._key, self._facts, self._compiled = conditions, key, facts, None

    def __call__(self, memory):
        if self._compiled is None:
            self._compiled = compile_condition(self._conditions[self._key], self._facts)
        return self._compiled(memory)

    def compile(self) -> None:
        """Compile the condition now rather than on first use."""
        if self._compiled is None:
            self._compiled = compile_condition(self._conditions[self._key], self._facts)


def compact_condition(cond: Mapping[str, Any]) -> dict[str, Any]:
    """A condition as plain data without its unset (None) fields, as the layout keeps it
    (:func:`compile_condition` reads both forms alike)."""
    out: dict[str, Any] = {}
    for key, value in cond.items():
        if value is None:
            continue
        if key in ("all", "any"):
            value = [compact_condition(part) for part in value]
        elif key == "not_":
            value = compact_condition(value)
        out[key] = value
    return out


class CompiledRule(NamedTuple):
    """A rule as chaining reads it: what it reads and sets, its evidence and certainty, its
    position in the agenda's order. ``rule``, the KB's rule record, is read from ``source`` when
    first asked for (from the cache file a rule is parsed only when it fires or is explained)."""

    source: Mapping[str, Rule]  # the rules the record is read from: the KB's or the implications
    id: str
    order: int
    predicate: Predicate
    reads: frozenset[str]
    sets: tuple[tuple[str, object], ...]
    needs: frozenset[str]  # facts that must be known for the condition to hold
    evidence: tuple[tuple[str, float], ...]  # (cause, strength) of its then.evidence
    certainty: float

    @property
    def rule(self) -> Rule:
        return self.source[self.id]


class CompiledKB(NamedTuple):
    kb: KnowledgeBase
    rules: tuple[CompiledRule, ...]
    rules_by_fact: dict[str, tuple[int, ...]]
    absence_rules: tuple[int, ...]  # rules true while nothing is known: tried when inference starts
    signature_regexes: LazyRegexes
    symptom_patterns: dict[str, tuple[SymptomPattern, ...]]
    symptom_regexes: LazyRegexes  # (symptom id, index) -> compiled regex
    unless_regexes: LazyRegexes  # (symptom id, index) -> compiled near-miss regex
    influence: dict[str, frozenset[str]]  # fact -> causes
    premises: dict[str, Predicate]  # fact -> its question's premise
    priors: dict[str, float]  # cause -> prior from the library (engine.priors)

    @property
    def facts(self) -> dict[str, Fact]:
        return self.kb.facts

    def prepare(self) -> None:
        """Compile now every regex, rule condition and question premise that would otherwise
        compile on first use (a server's workers, before their first client: a fresh worker
        otherwise spends a fifth of its first few hundred turns compiling)."""
        for regexes in (self.signature_regexes, self.symptom_regexes, self.unless_regexes):
            if isinstance(regexes, LazyRegexes):
                regexes.compile_all()
        for predicate in [rule.predicate for rule in self.rules] + list(self.premises.values()):
            if isinstance(predicate, _LazyPredicate):
                predicate.compile()
        _DIRECT.pop(id(self), None)  # read again: every condition is compiled now


def direct_predicates(ckb: CompiledKB) -> tuple[list[Predicate], dict[str, Predicate]]:
    """Each rule's condition (by rule index) and each question's premise (by fact) as the function
    compiled from it where it is compiled (after :meth:`CompiledKB.prepare`): chaining and question
    ranking call them hundreds of times a turn, and the lazy wrapper's extra call cost a tenth of
    that. Kept per compiled KB; the same answers as ``rule.predicate`` and ``ckb.premises``."""
    found = _DIRECT.get(id(ckb))
    if found is None or found[0] is not ckb:
        if len(_DIRECT) >= 4:  # the few most recent KBs (tests load several)
            _DIRECT.clear()
        found = _DIRECT[id(ckb)] = (ckb, [_direct(rule.predicate) for rule in ckb.rules],
                                    {fact: _direct(premise) for fact, premise in ckb.premises.items()})
    return found[1], found[2]


def _direct(predicate: Predicate) -> Predicate:
    if isinstance(predicate, _LazyPredicate) and predicate._compiled is not None:
        return predicate._compiled
    return predicate


#: Per compiled KB (by id, with the KB to check it): see :func:`direct_predicates`.
_DIRECT: dict[int, tuple[CompiledKB, list[Predicate], dict[str, Predicate]]] = {}


class _Where:
    """'file:line [id]' for a problem message, formatted only when a problem is found."""

    __slots__ = ("kb", "item")

    def __init__(self, kb: KnowledgeBase, item: str) -> None:
        self.kb, self.item = kb, item

    def __str__(self) -> str:
        return f"{self.kb.origin(self.item)} [{self.item}]"


def _check_sets(where: object, sets: dict, facts: dict[str, Fact], problems: list[str],
                captures: set[str] = frozenset()) -> tuple[tuple[str, object], ...]:
    out = []
    for name, value in sets.items():
        if name not in facts:
            problems.append(f"{where}: sets unknown fact {name!r}")
            continue
        fact = facts[name]
        if isinstance(value, str) and "{" in value:
            used = set(re.findall(r"\{(\w+)\}", value))
            missing = used - set(captures)
            if missing:
                problems.append(f"{where}: {name} uses capture(s) {sorted(missing)} the regex lacks")
            out.append((name, value))
            continue
        try:
            out.append((name, coerce(value, fact.type, fact.choices)))
        except ValueProblem as exc:
            problems.append(f"{where}: {name}: {exc}")
    return tuple(out)


def _influence(kb: KnowledgeBase, rules: list[CompiledRule]) -> dict[str, frozenset[str]]:
    """Which causes each fact can move, directly or through rules that set other facts."""
    direct: dict[str, set[str]] = defaultdict(set)
    feeds: dict[str, set[str]] = defaultdict(set)  # fact -> facts derived from it
    for compiled in rules:
        rule = compiled.rule
        for name in compiled.reads:
            direct[name].update(e.cause for e in rule.then.evidence)
            feeds[name].update(rule.then.set)
    out: dict[str, frozenset[str]] = {}
    for start in kb.facts:
        seen, stack, causes = {start}, [start], set()
        while stack:
            name = stack.pop()
            causes |= direct.get(name, set())
            for nxt in feeds.get(name, ()):
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        out[start] = frozenset(causes)
    return out


def export_layout(ckb: CompiledKB) -> dict:
    """What :func:`compile_kb` derives by walking every rule, as plain data (tuples where the
    engine keeps tuples) for the KB artifact: per rule in order its id, the facts it reads,
    the values it sets, the facts it needs, its evidence and certainty; its condition without
    unset fields; the rules reading each fact and those true on an empty memory; what each fact
    can move; the causes' priors. With it, a start reads no rule until the rule is tried."""
    return {
        "rules": [(r.id, tuple(sorted(r.reads)), r.sets, tuple(sorted(r.needs)), r.evidence, r.certainty)
                  for r in ckb.rules],
        "when": {r.id: compact_condition(r.rule.when) for r in ckb.rules},
        "rules_by_fact": dict(ckb.rules_by_fact),
        "absence": ckb.absence_rules,
        "influence": {fact: tuple(sorted(causes)) for fact, causes in ckb.influence.items() if causes},
        "priors": dict(ckb.priors),
    }


def _from_layout(kb: KnowledgeBase, layout: dict, symptom_needles: dict) -> CompiledKB:
    """The compiled KB from an artifact's layout: no rule is read or walked and nothing is
    re-checked (the artifact was built with ``validate``)."""
    when, facts = layout["when"], kb.facts
    implied = {rule.id: rule for rule in implication_rules(kb)}
    rules = tuple(
        CompiledRule(implied if rule_id in implied else kb.rules, rule_id, order, _LazyPredicate(when, rule_id, facts),
                     frozenset(reads), sets, frozenset(needs), evidence, certainty)
        for order, (rule_id, reads, sets, needs, evidence, certainty) in enumerate(layout["rules"])
    )
    sym_patterns: dict[str, tuple[SymptomPattern, ...]] = {}
    sym_sources: dict[tuple[str, int], tuple[str, bool]] = {}
    unless_sources: dict[tuple[str, int], tuple[str, bool]] = {}
    for sym in kb.symptoms.values():
        gates = symptom_needles.get(sym.id) or [[] for _ in sym.patterns]
        sym_patterns[sym.id] = tuple(SymptomPattern(sym.id, i, tuple(gates[i])) for i in range(len(sym.patterns)))
        for i, pattern in enumerate(sym.patterns):
            sym_sources[(sym.id, i)] = (pattern, True)
        for i, pattern in enumerate(sym.unless):
            unless_sources[(sym.id, i)] = (pattern, True)
    influence = layout["influence"]
    asked = {f.id: f.asked_when for f in kb.facts.values() if f.get("asked_when") is not None}
    return CompiledKB(
        kb=kb,
        rules=rules,
        rules_by_fact=layout["rules_by_fact"],
        absence_rules=layout["absence"],
        signature_regexes=LazyRegexes({s.id: (s.pattern, s.ignore_case) for s in kb.signatures.values()}),
        symptom_patterns=sym_patterns,
        symptom_regexes=LazyRegexes(sym_sources),
        unless_regexes=LazyRegexes(unless_sources),
        influence={fact: frozenset(influence.get(fact, ())) for fact in kb.facts},
        premises={fact_id: _LazyPredicate(asked, fact_id, facts) for fact_id in asked},
        priors=dict(layout["priors"]),
    )


def compile_kb(kb: KnowledgeBase, *, validate: bool = False,
               symptom_needles: dict[str, list[list[str]]] | None = None,
               layout: dict | None = None) -> CompiledKB:
    """Compile and cross-check a KB; raise :class:`CompileError` listing every problem.

    Regexes and rule conditions compile lazily; ``validate`` compiles them all now (the KB
    artifact is built that way, so a cached KB is known to compile; without it only the facts a
    condition names are checked). ``symptom_needles`` (from the artifact) gate each symptom
    pattern on a literal of the text, so a start compiles only the patterns that can match;
    ``layout`` (from the artifact, see :func:`export_layout`) spares walking the rules at all.
    """
    if layout is not None and not validate:
        return _from_layout(kb, layout, symptom_needles or {})
    problems: list[str] = []
    rules: list[CompiledRule] = []
    implied = {rule.id: rule for rule in implication_rules(kb)}
    whens = {rule.id: rule.when for rule in [*implied.values(), *kb.rules.values()]}
    for order, (source, rule) in enumerate([(implied, r) for r in implied.values()]
                                           + [(kb.rules, r) for r in kb.rules.values()]):
        where = _Where(kb, rule.get("implied_by") or rule.id)
        if validate:
            try:
                predicate = compile_condition(rule.when, kb.facts)
            except (ValueError, ValueProblem) as exc:
                problems.append(f"{where}: when: {exc}")
                continue
        else:
            predicate = _LazyPredicate(whens, rule.id, kb.facts)
        reads = frozenset(condition_facts(rule.when))
        unknown = sorted(reads - kb.facts.keys())
        if unknown:
            problems.append(f"{where}: when: unknown fact {unknown[0]!r}")
            continue
        for ev in rule.then.evidence:
            if ev.cause not in kb.causes:
                problems.append(f"{where}: evidence for unknown cause {ev.cause!r}")
        sets = _check_sets(where, rule.then.set, kb.facts, problems)
        rules.append(CompiledRule(source, rule.id, order, predicate, reads, sets, frozenset(condition_needs(rule.when)),
                                  tuple((e.cause, e.strength) for e in rule.then.evidence), rule.certainty))
    premises: dict[str, Predicate] = {}
    for fact in kb.facts.values():
        if fact.get("asked_when") is not None:
            unknown = sorted(condition_facts(fact.asked_when) - kb.facts.keys())
            if unknown:
                problems.append(f"{_Where(kb, fact.id)}: asked_when: unknown fact {unknown[0]!r}")
                continue
            try:
                premises[fact.id] = (compile_condition(fact.asked_when, kb.facts) if validate
                                     else _LazyPredicate({fact.id: fact.asked_when}, fact.id, kb.facts))
            except (ValueError, ValueProblem) as exc:
                problems.append(f"{_Where(kb, fact.id)}: asked_when: {exc}")
    by_fact: dict[str, list[int]] = defaultdict(list)
    for index, compiled in enumerate(rules):
        for name in compiled.reads:
            by_fact[name].append(index)
    absence = tuple(i for i, r in enumerate(rules) if holds_with_nothing_known(r.rule.when) is True)

    sig_patterns: dict[str, tuple[str, bool]] = {}
    for sig in kb.signatures.values():
        where = _Where(kb, sig.id)
        sig_patterns[sig.id] = (sig.pattern, sig.ignore_case)
        captures = set(_CAPTURE.findall(sig.pattern))
        if validate:
            try:
                captures = set(compile_pattern(sig.pattern, ignore_case=sig.ignore_case).groupindex)
            except PatternError as exc:
                problems.append(f"{where}: pattern does not compile with RE2: {exc}")
                continue
        _check_sets(where, sig.sets, kb.facts, problems, captures)
    sym_sources: dict[tuple[str, int], tuple[str, bool]] = {}
    sym_patterns: dict[str, tuple[SymptomPattern, ...]] = {}
    unless_sources: dict[tuple[str, int], tuple[str, bool]] = {}
    for sym in kb.symptoms.values():
        where = _Where(kb, sym.id)
        captures: set[str] = set()
        gates = (symptom_needles or {}).get(sym.id) or [[] for _ in sym.patterns]
        entries = []
        for index, pattern in enumerate(sym.patterns):
            sym_sources[(sym.id, index)] = (pattern, True)
            entries.append(SymptomPattern(sym.id, index, tuple(gates[index]) if index < len(gates) else ()))
            captures |= set(_CAPTURE.findall(pattern))
            if validate:
                try:
                    compile_pattern(pattern, ignore_case=True)
                except PatternError as exc:
                    problems.append(f"{where}: pattern {pattern!r} does not compile with RE2: {exc}")
        for index, pattern in enumerate(sym.unless):
            unless_sources[(sym.id, index)] = (pattern, True)
            if validate:
                try:
                    compile_pattern(pattern, ignore_case=True)
                except PatternError as exc:
                    problems.append(f"{where}: unless {pattern!r} does not compile with RE2: {exc}")
        for pair in sym.differ:
            if len(pair) != 2 or not set(pair) <= captures:
                problems.append(f"{where}: differ {pair} must name two groups its patterns capture")
        sym_patterns[sym.id] = tuple(entries)
        _check_sets(where, sym.sets, kb.facts, problems, captures)
    for cause in kb.causes.values():
        for fix in cause.fixes:
            if fix not in kb.fixes:
                problems.append(f"{kb.origin(cause.id)} [{cause.id}]: unknown fix {fix!r}")
    if problems:
        raise CompileError(problems)
    return CompiledKB(
        kb=kb,
        rules=tuple(rules),
        rules_by_fact={k: tuple(v) for k, v in by_fact.items()},
        absence_rules=absence,
        signature_regexes=LazyRegexes(sig_patterns),
        symptom_patterns=sym_patterns,
        symptom_regexes=LazyRegexes(sym_sources),
        unless_regexes=LazyRegexes(unless_sources),
        influence=_influence(kb, rules),
        premises=premises,
        priors=library_priors(kb.causes, kb.get("incidents", {})),
    )


IMPLIES = "implies"


def implication_rules(kb: KnowledgeBase) -> list[Record]:
    """Every fact's ``implies`` as a rule that only sets facts, named ``implies_<fact>_<n>``.

    They come before the KB's rules, so chaining applies them as soon as the fact they follow
    from is known (however it became known), and, like any rule, they never replace a value
    already known.
    """
    out = []
    for fact in kb.facts.values():
        for number, implication in enumerate(fact.get("implies") or (), start=1):
            out.append(Record({
                "id": f"{IMPLIES}_{fact.id}_{number}",
                "description": f"What knowing {fact.id} settles.",
                "when": implication.when,
                "then": Record({"set": implication.set, "evidence": []}),
                "certainty": 1.0,
                "references": [],
                "implied_by": fact.id,
            }))
    return out
