"""Fuzzy word matching with rapidfuzz's scores, without importing rapidfuzz for a short one-shot.

Importing rapidfuzz costs a one-shot start about 10 ms, more than matching a short description
takes. :func:`close_words` therefore scores a text of a few distinct words in Python, with the
same figure rapidfuzz's ``fuzz.ratio`` gives (its Indel similarity: ``200 · LCS / (len a + len b)``,
computed as rapidfuzz computes it, so the floats are equal), and hands longer texts to rapidfuzz.
Python is slower per comparison, so a process does at most :data:`PYTHON_BUDGET` comparisons
here and imports rapidfuzz after that (a server, lint or a benchmark soon does). The scores are
the same either way; only where they are computed changes. :func:`partial_ratio` answers 0
without rapidfuzz when the characters the two strings share cannot reach the cutoff (a Chinese
phrase against an English text, say). ``tests/test_fuzzy.py`` checks both against rapidfuzz.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

__all__ = ["ratio", "close_words", "partial_ratio", "PYTHON_WORDS", "PYTHON_BUDGET"]

#: Texts with at most this many distinct words may be scored here; more go to rapidfuzz.
PYTHON_WORDS = 24
#: Word comparisons a process makes in Python before it imports rapidfuzz for good.
PYTHON_BUDGET = 5_000

_budget = PYTHON_BUDGET
_rapidfuzz: tuple[Any, Any] | None = None  # (fuzz, process) once imported


def _imported() -> tuple[Any, Any]:
    global _rapidfuzz
    if _rapidfuzz is None:
        from rapidfuzz import fuzz, process

        _rapidfuzz = (fuzz, process)
    return _rapidfuzz


def _lcs(a: str, b: str) -> int:
    """Length of the longest common subsequence (bit-parallel, one integer step per character of b)."""
    masks: dict[str, int] = {}
    for i, ch in enumerate(a):
        masks[ch] = masks.get(ch, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for ch in b:
        u = v & masks.get(ch, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - bin(v).count("1")


def ratio(a: str, b: str) -> float:
    """rapidfuzz's ``fuzz.ratio(a, b)``: 100 for equal strings, 0 for nothing in common."""
    total = len(a) + len(b)
    if not total:
        return 100.0
    return (1.0 - (total - 2 * _lcs(a, b)) / total) * 100


def close_words(word: str, words: list[str], cutoff: float) -> list[tuple[str, float]]:
    """Each of ``words`` whose ratio to ``word`` is at least ``cutoff``, with that ratio (the
    matches of ``process.extract(word, words, scorer=fuzz.ratio, score_cutoff=cutoff)``, in no
    particular order)."""
    global _budget
    if _rapidfuzz is not None or len(words) > PYTHON_WORDS or _budget <= 0:
        fuzz, process = _imported()
        return [(found, score) for found, score, _ in
                process.extract(word, words, scorer=fuzz.ratio, score_cutoff=cutoff, limit=None)]
    out = []
    for candidate in words:
        # the ratio is at most 200·min(len)/(sum of len): skip what cannot reach the cutoff
        if 200 * min(len(word), len(candidate)) < cutoff * (len(word) + len(candidate)):
            continue
        _budget -= 1
        score = ratio(word, candidate)
        if score >= cutoff:
            out.append((candidate, score))
    return out


def _shared(counts: Counter[str], text: str) -> int:
    """Characters of ``text`` that a string with these character counts has too (with multiplicity)."""
    return sum(min(n, counts[ch]) for ch, n in Counter(text).items())


def _could_reach(short: str, long: str, long_chars: Counter[str], cutoff: float) -> bool:
    """Whether any window rapidfuzz's partial ratio compares could score ``cutoff``.

    rapidfuzz aligns the shorter string with every window of the longer one of its length, and
    with the shorter windows at either end. A window scores ``200 · LCS / (len short + len
    window)``, and its LCS is at most the characters it shares with the short string: for the
    full-length windows at most those the whole long string shares (``100 · shared / len short``),
    for an end window of w characters at most ``min(shared at that end, w)``, which gives at most
    ``200 · shared / (len short + shared)``.
    """
    size = len(short)
    counts = Counter(short)
    shared = sum(min(n, long_chars[ch]) for ch, n in counts.items())
    if 200 * shared < cutoff * (size + shared):
        return False  # no window, full or at an end, shares more than the whole string does
    if 100 * shared >= cutoff * size:
        return True
    for end in (long[:size - 1], long[-size:]):
        at_end = _shared(counts, end)
        if 200 * at_end >= cutoff * (size + at_end):
            return True
    return False


def partial_ratio(a: str, b: str, cutoff: float, b_chars: Counter[str] | None = None) -> float:
    """rapidfuzz's ``fuzz.partial_ratio(a, b)`` when it is at least ``cutoff``, else 0
    (``b_chars``: ``Counter(b)``, when the caller scores many strings against one ``b``).
    rapidfuzz is asked only when the characters the strings share could reach the cutoff."""
    if not a or not b:
        return 0.0
    if cutoff > 0 and b_chars is not None and b_chars.keys().isdisjoint(a):
        return 0.0  # not one character in common: the ratio is 0 (a CJK phrase in English text)
    if _rapidfuzz is None:
        b_chars = b_chars if b_chars is not None else Counter(b)
        if len(a) < len(b):
            reachable = _could_reach(a, b, b_chars, cutoff)
        elif len(a) > len(b):
            reachable = _could_reach(b, a, Counter(a), cutoff)
        else:  # equal lengths: either may be aligned in the other
            reachable = _could_reach(a, b, b_chars, cutoff) or _could_reach(b, a, Counter(a), cutoff)
        if not reachable:
            return 0.0
    fuzz, _ = _imported()
    score = fuzz.partial_ratio(a, b)
    return score if score >= cutoff else 0.0
