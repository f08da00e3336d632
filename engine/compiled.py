"""The KB compiled once for the engine: predicates, indexes and regexes.

Names are resolved here, so a typo in the KB fails at load time, never mid-session.
"""
from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from ..errors import KBError
from ..kb.model import Fact, KnowledgeBase, Rule
from .conditions import Predicate, compile_condition, condition_facts, holds_with_nothing_known
from .regex_code import rebuild
from .values import ValueProblem, coerce

__all__ = ["CompiledRule", "CompiledKB", "CompileError", "compile_kb"]


class CompileError(KBError):
    """The KB's meaning is broken (unknown names, bad regexes); ``problems`` lists each."""


class LazyRegexes(dict):
    """Signature regexes compiled on first use: a one-shot run touches only the few whose
    needles appear. The patterns were all compiled once when the KB was loaded from YAML."""

    def __init__(self, patterns: dict[str, tuple[str, int]], codes: dict | None = None):
        super().__init__()
        self._patterns = patterns
        self._codes = codes

    def __missing__(self, key: str) -> re.Pattern[str]:
        pattern, flags = self._patterns[key]
        regex = self[key] = rebuild(pattern, flags, self._codes)
        return regex

    def __contains__(self, key: object) -> bool:
        return key in self._patterns


class _LazyPredicate:
    """A rule condition compiled the first time the rule is tried (most rules of a large KB are
    never tried in a short session; compile_kb(validate=True) compiles them all up front)."""

    __slots__ = ("_condition", "_facts", "_compiled")

    def __init__(self, condition, facts) -> None:
        self._condition, self._facts, self._compiled = condition, facts, None

    def __call__(self, memory):
        if self._compiled is None:
            self._compiled = compile_condition(self._condition, self._facts)
        return self._compiled(memory)


@dataclass(frozen=True)
class CompiledRule:
    rule: Rule
    order: int
    predicate: Predicate
    reads: frozenset[str]
    sets: tuple[tuple[str, object], ...]

    @property
    def id(self) -> str:
        return self.rule.id


@dataclass(frozen=True)
class CompiledKB:
    kb: KnowledgeBase
    rules: tuple[CompiledRule, ...]
    rules_by_fact: dict[str, tuple[int, ...]]
    absence_rules: tuple[int, ...]  # rules true while nothing is known: tried when inference starts
    signature_regexes: LazyRegexes
    symptom_regexes: dict[str, tuple[re.Pattern[str], ...]]
    influence: dict[str, frozenset[str]] = field(default_factory=dict)  # fact -> causes

    @property
    def facts(self) -> dict[str, Fact]:
        return self.kb.facts


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


def compile_kb(kb: KnowledgeBase, *, validate: bool = False, regex_codes: dict | None = None) -> CompiledKB:
    """Compile and cross-check a KB; raise :class:`CompileError` listing every problem.

    Signature regexes and rule conditions compile lazily; ``validate`` compiles them all now
    (the loader does so whenever it reads YAML, so a cached KB is known to compile; without it
    only the facts a condition names are checked). ``regex_codes`` are compiled regexes exported
    by :mod:`engine.regex_code` (the KB cache keeps them) to skip re-parsing.
    """
    problems: list[str] = []
    rules: list[CompiledRule] = []
    for order, rule in enumerate(kb.rules.values()):
        where = _Where(kb, rule.id)
        if validate:
            try:
                predicate = compile_condition(rule.when, kb.facts)
            except (ValueError, ValueProblem) as exc:
                problems.append(f"{where}: when: {exc}")
                continue
        else:
            predicate = _LazyPredicate(rule.when, kb.facts)
        reads = frozenset(condition_facts(rule.when))
        unknown = sorted(reads - kb.facts.keys())
        if unknown:
            problems.append(f"{where}: when: unknown fact {unknown[0]!r}")
            continue
        for ev in rule.then.evidence:
            if ev.cause not in kb.causes:
                problems.append(f"{where}: evidence for unknown cause {ev.cause!r}")
        sets = _check_sets(where, rule.then.set, kb.facts, problems)
        rules.append(CompiledRule(rule, order, predicate, reads, sets))
    by_fact: dict[str, list[int]] = defaultdict(list)
    for index, compiled in enumerate(rules):
        for name in compiled.reads:
            by_fact[name].append(index)
    absence = tuple(i for i, r in enumerate(rules) if holds_with_nothing_known(r.rule.when) is True)

    sig_patterns: dict[str, tuple[str, int]] = {}
    for sig in kb.signatures.values():
        where = _Where(kb, sig.id)
        flags = re.IGNORECASE if sig.ignore_case else 0
        sig_patterns[sig.id] = (sig.pattern, flags)
        captures = set(re.findall(r"\(\?P<(\w+)>", sig.pattern))
        if validate:
            try:
                captures = set(re.compile(sig.pattern, flags).groupindex)
            except re.error as exc:
                problems.append(f"{where}: pattern does not compile: {exc}")
                continue
        _check_sets(where, sig.sets, kb.facts, problems, captures)
    sym_regexes: dict[str, tuple[re.Pattern[str], ...]] = {}
    for sym in kb.symptoms.values():
        where = _Where(kb, sym.id)
        compiled_patterns = []
        for pattern in sym.patterns:
            try:
                compiled_patterns.append(rebuild(pattern, re.IGNORECASE, regex_codes))
            except re.error as exc:
                problems.append(f"{where}: pattern {pattern!r} does not compile: {exc}")
        sym_regexes[sym.id] = tuple(compiled_patterns)
        captures = set().union(*(set(r.groupindex) for r in compiled_patterns)) if compiled_patterns else set()
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
        signature_regexes=LazyRegexes(sig_patterns, regex_codes),
        symptom_regexes=sym_regexes,
        influence=_influence(kb, rules),
    )
