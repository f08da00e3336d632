"""Compiled-regex reuse across runs, for a fast one-shot start.

Python's ``re`` parses and compiles every pattern in pure Python on each start, which for the
KB's few hundred symptom patterns costs more than the rest of a one-shot run. :func:`export`
captures what ``re`` builds (the SRE code) and :func:`rebuild` hands it back to ``_sre``, which
validates it, skipping the parse. The export is tied to this interpreter's version and SRE
magic number; on any mismatch or error :func:`rebuild` falls back to ``re.compile``.
"""
from __future__ import annotations

import re
from typing import Any

__all__ = ["export", "rebuild", "export_all", "SIGNATURE"]

try:  # CPython internals; everything below degrades to re.compile without them
    import _sre
    from re import _compiler, _parser

    SIGNATURE: str | None = f"sre-{_sre.MAGIC}-{_sre.CODESIZE}"
except (ImportError, AttributeError):  # pragma: no cover - other interpreters
    SIGNATURE = None


def key(pattern: str, flags: int) -> str:
    return f"{int(flags)}:{pattern}"  # int(): formatting a RegexFlag goes through the slow enum repr


def export_all(patterns: list[tuple[str, int]]) -> dict[str, Any]:
    """Exports of many patterns, tagged with :data:`SIGNATURE`, for a cache."""
    out: dict[str, Any] = {"signature": SIGNATURE}
    for pattern, flags in patterns:
        exported = export(pattern, flags)
        if exported is not None:
            out[key(pattern, flags)] = exported
    return out


def export(pattern: str, flags: int) -> tuple | None:
    """The compiled form of a pattern, as plain data (None when unavailable)."""
    if SIGNATURE is None:
        return None
    try:
        parsed = _parser.parse(pattern, flags)
        code = _compiler._code(parsed, flags)
        groupindex = dict(parsed.state.groupdict)
        indexgroup = [None] * parsed.state.groups
        for name, index in groupindex.items():
            indexgroup[index] = name
        return (pattern, flags | parsed.state.flags, [int(op) for op in code], parsed.state.groups - 1, groupindex, tuple(indexgroup))
    except Exception:  # noqa: BLE001 - any internal difference means "just compile"
        return None


def rebuild(pattern: str, flags: int, codes: dict[str, Any] | None) -> re.Pattern[str]:
    """The pattern, from its export in ``codes`` when that fits this interpreter, else compiled afresh."""
    exported = codes.get(key(pattern, flags)) if codes and codes.get("signature") == SIGNATURE else None
    if SIGNATURE is not None and isinstance(exported, tuple) and exported and exported[0] == pattern:
        try:
            return _sre.compile(*exported)
        except Exception:  # noqa: BLE001 - fall back below
            pass
    return re.compile(pattern, flags)
