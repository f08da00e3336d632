"""Literal needles of a regex: substrings one of which every match must contain.

A start compiles only the patterns whose needle occurs in the text at hand, so a KB of hundreds
of symptom patterns costs a one-shot run a handful of compilations. Needles are derived once,
when the KB is compiled (:mod:`kb.artifact`), from Python's own parse of the pattern; a pattern
with no usable needle (for example one that can match an empty string, or one built only from
character classes) gets none and is always tried.
"""
from __future__ import annotations

import re
from re import _constants as C  # noqa: N812 - the parser's opcodes
from re import _parser

__all__ = ["needle_groups", "needles"]

MIN_NEEDLE = 2  # single ASCII letters occur everywhere and prefilter nothing; a set of two-letter
# alternatives ("pc", "tp") still spares compiling a pattern the text cannot match
MAX_ALTERNATIVES = 24

_Needles = frozenset[str] | None  # None: no needle (anything may match)


def needles(pattern: str, *, ignore_case: bool = True) -> list[str]:
    """Lower-cased literals, one of which occurs in every string the pattern matches (empty
    when the pattern has no such literal of at least :data:`MIN_NEEDLE` characters)."""
    try:
        parsed = _parser.parse(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error:
        return []
    found = _sequence(list(parsed))
    return sorted(found) if found else []


def needle_groups(pattern: str, *, ignore_case: bool = True) -> list[list[str]]:
    """Every needle set the pattern has, not only the most selective: each set (lower-cased,
    sorted) has a literal in every match, one set per part of the pattern that every match
    goes through (a literal run, a group, a repeated part, a choice whose every branch has one).
    A text that lacks every literal of one of them cannot match; empty as :func:`needles` is."""
    try:
        parsed = _parser.parse(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error:
        return []
    groups: list[frozenset[str]] = []
    _all_sets(list(parsed), groups)
    return [sorted(g) for g in dict.fromkeys(groups)]


def _all_sets(items: list, out: list[frozenset[str]]) -> None:
    """Append to ``out`` each needle set of a sequence's parts (see :func:`needle_groups`)."""
    run: list[str] = []

    def close_run() -> None:
        nonlocal run
        found = _run_needle(run)
        if found:
            out.append(found)
        run = []

    for op, av in items:
        if op is C.LITERAL:
            run.append(chr(av))
            continue
        close_run()
        if op is C.SUBPATTERN:
            _all_sets(list(av[-1]), out)
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            if av[0] >= 1:
                _all_sets(list(av[2]), out)
        elif op is C.ATOMIC_GROUP:
            _all_sets(list(av), out)
        else:
            found = _item(op, av)  # a choice: one set over its branches, else nothing
            if found:
                out.append(found)
    close_run()


def _run_needle(run: list[str]) -> _Needles:
    """A run of literal characters as a needle set, when long enough to select (CJK: one
    character is a word)."""
    if len(run) >= MIN_NEEDLE or run and any(ord(ch) > 0x2E7F for ch in run):
        return frozenset({"".join(run).lower()})
    return None


def _better(a: _Needles, b: _Needles) -> _Needles:
    """The more selective of two needle sets (fewer, longer needles)."""
    if a is None:
        return b
    if b is None:
        return a
    return a if (_weight(a), -len(a)) >= (_weight(b), -len(b)) else b


def _weight(found: frozenset[str]) -> int:
    """How selective a needle set is: its shortest needle's length, a CJK character counting three."""
    return min(sum(3 if ord(ch) > 0x2E7F else 1 for ch in needle) for needle in found)


def _sequence(items: list) -> _Needles:
    best: _Needles = None
    run: list[str] = []

    def close_run() -> None:
        nonlocal best, run
        best = _better(best, _run_needle(run))
        run = []

    for op, av in items:
        if op is C.LITERAL:
            run.append(chr(av))
            continue
        close_run()
        best = _better(best, _item(op, av))
    close_run()
    return best


def _item(op, av) -> _Needles:
    if op is C.SUBPATTERN:
        return _sequence(list(av[-1]))
    if op is C.BRANCH:
        out: set[str] = set()
        for branch in av[1]:
            found = _sequence(list(branch))
            if not found:
                return None
            out |= found
        return frozenset(out) if len(out) <= MAX_ALTERNATIVES else None
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
        low, _high, inner = av
        return _sequence(list(inner)) if low >= 1 else None
    if op is C.ATOMIC_GROUP:
        return _sequence(list(av))
    return None  # classes, anchors, look-arounds, back-references: no literal is guaranteed
