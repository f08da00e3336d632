"""Every regex the KB holds runs on RE2: matching time is linear in the text, whatever the pattern.

Patterns are written in the common subset of Python's and RE2's syntax: no look-arounds and no
back-references (negation and hedging are one mechanism in ``engine/negation.py``; a match that
needs two captures to differ says so with ``differ``). Like Python's ``str`` patterns, ``\\w``,
``\\d`` and ``\\b`` here are ASCII-only, so a word boundary is never placed inside Chinese text.
"""
from __future__ import annotations

import re2
from ..errors import KBError

__all__ = ["Pattern", "PatternError", "compile_pattern", "pattern_problem"]

Pattern = re2._Regexp  # noqa: SLF001 - the compiled type, for annotations


class PatternError(KBError, ValueError):
    """A pattern RE2 cannot compile (the message says why)."""


def _options(ignore_case: bool) -> re2.Options:
    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.log_errors = False
    return options


_SENSITIVE, _CASELESS = _options(False), _options(True)


def compile_pattern(pattern: str, *, ignore_case: bool = False) -> Pattern:
    """The pattern compiled by RE2; raise :class:`PatternError` when it cannot be."""
    try:
        return re2.compile(pattern, _CASELESS if ignore_case else _SENSITIVE)
    except re2.error as exc:
        raise PatternError(_message(pattern, exc)) from None


def pattern_problem(pattern: str) -> str | None:
    """Why RE2 rejects a pattern (None when it compiles)."""
    try:
        compile_pattern(pattern)
    except PatternError as exc:
        return str(exc)
    return None


def _message(pattern: str, exc: Exception) -> str:
    text = str(exc.args[0] if exc.args else exc)
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = text.strip("b'\" ")
    if "(?<" in pattern or "(?=" in pattern or "(?!" in pattern:
        text += " (RE2 has no look-arounds: use the negation scope or `differ`)"
    elif "(?P=" in pattern or "\\1" in pattern:
        text += " (RE2 has no back-references: use `differ`)"
    return text
