"""Reading a saved session state back, as strictly as fresh input.

A state may come from a bot that stored it, or from anyone who can post to a server. Every
part is checked for type, size and range before a session is built from it; facts, symptoms
and signatures the KB no longer has are dropped (a KB update must not break saved sessions),
anything else that is wrong is a :class:`StateError` naming the field.
"""
from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import StateError
from ..kb.artifact import KnowledgeBase
from .memory import SOURCE_PRIORITY, FactRecord, Source
from .values import ValueProblem, coerce

__all__ = ["STATE_FORMAT", "STATE_VERSION", "SavedState", "SavedHang", "read_state", "MAX_STATE_ITEMS"]

STATE_FORMAT = "nccl-doctor-session"
STATE_VERSION = 1
MAX_STATE_ITEMS = 10_000     # entries in any one list or map of a state
MAX_TEXT_CHARS = 200_000     # one text (the same limit as Session.tell)
MAX_SHORT_CHARS = 8_192      # names, details, captured values, log lines
MAX_COUNT = 10**15           # line and hit counters


@dataclass
class SavedHang:
    """The hang analysis a state carries: its report, the evidence it was drawn from (plain
    data that ``nccl_doctor.ingest`` checks when it reads it back) and the facts it set."""

    report: dict[str, Any] | None
    evidence: list[dict[str, Any]]
    facts: list[FactRecord]


@dataclass
class SavedState:
    """The parts of a state, checked: what :meth:`Session.from_json` builds a session from."""

    assertions: list[FactRecord] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    logs: list[tuple[str, int, dict[str, dict[str, Any]]]] = field(default_factory=list)
    matches: list[dict[str, Any]] = field(default_factory=list)
    hang: SavedHang | None = None
    text_origins: list[str] = field(default_factory=list)  # per text: "" or the evidence question it answered
    lang: str | None = None
    leave_out: list[str] = field(default_factory=list)  # incidents left out of the library (ids or sources)
    case_based: bool = True


def read_state(kb: KnowledgeBase, text: str | bytes | Mapping[str, Any],
               sources: Collection[str] | None = None) -> SavedState:
    """Parse and check a state; ``sources`` limits the fact sources it may claim (default: any
    but ``rule``), so a server can refuse a forged probe result."""
    try:
        data = dict(text) if isinstance(text, Mapping) else json.loads(text)
    except RecursionError:
        raise StateError("session state is nested too deeply to be a session state") from None
    except (TypeError, ValueError) as exc:
        raise StateError(f"session state is not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != STATE_FORMAT:
        raise StateError("not a nccl-doctor session state (missing format marker)")
    version = data.get("version")
    if version != STATE_VERSION or isinstance(version, bool):
        raise StateError(f"session state version {_short(version)} is not supported (this build reads {STATE_VERSION})")
    allowed = set(sources) if sources is not None else set(SOURCE_PRIORITY) - {"rule"}
    out = SavedState()
    for i, item in enumerate(_items(data, "assertions")):
        record = _assertion(kb, _map(item, f"assertions[{i}]"), f"assertions[{i}]", allowed)
        if record is not None:
            out.assertions.append(record)
    out.unknown = [n for i, n in enumerate(_items(data, "unknown")) if _str(n, f"unknown[{i}]", MAX_SHORT_CHARS) in kb.facts]
    out.texts = [_str(t, f"texts[{i}]", MAX_TEXT_CHARS) for i, t in enumerate(_items(data, "texts"))]
    origins = [_str(o, f"text_origins[{i}]", MAX_SHORT_CHARS) for i, o in enumerate(_items(data, "text_origins"))]
    out.text_origins = origins if len(origins) == len(out.texts) else [""] * len(out.texts)
    lang = data.get("lang")
    if lang is not None and lang not in ("en", "zh"):
        raise StateError(f"lang: expected \"en\", \"zh\" or null, got {_short(lang)}")
    out.lang = lang
    for i, item in enumerate(_items(data, "logs")):
        where = f"logs[{i}]"
        log = _map(item, where)
        hits = _hits(kb, _map(log.get("hits", {}), f"{where}.hits"), f"{where}.hits")
        out.logs.append((_str(log.get("name"), f"{where}.name", MAX_SHORT_CHARS),
                         _int(log.get("lines"), f"{where}.lines"), hits))
    for i, item in enumerate(_items(data, "matches")):
        match = _map(item, f"matches[{i}]")
        symptom = _str(match.get("symptom"), f"matches[{i}].symptom", MAX_SHORT_CHARS)
        if symptom in kb.symptoms:
            out.matches.append({"symptom": symptom,
                                "phrase": _str(match.get("phrase", ""), f"matches[{i}].phrase", MAX_SHORT_CHARS),
                                "score": _unit(match.get("score"), f"matches[{i}].score", zero=True)})
    if data.get("hang") is not None:
        out.hang = _hang(kb, _map(data["hang"], "hang"), allowed)
    out.leave_out = [_str(x, f"leave_out[{i}]", MAX_SHORT_CHARS) for i, x in enumerate(_items(data, "leave_out"))]
    case_based = data.get("case_based", True)
    if not isinstance(case_based, bool):
        raise StateError(f"case_based: expected true or false, got {_short(case_based)}")
    out.case_based = case_based
    return out


def _hang(kb: KnowledgeBase, hang: dict, allowed: set[str]) -> SavedHang:
    report = hang.get("report")
    if report is not None:
        report = _map(report, "hang.report")
    evidence = [_map(item, f"hang.evidence[{i}]") for i, item in enumerate(_items(hang, "evidence"))]
    facts = []
    for i, item in enumerate(_items(hang, "facts")):
        where = f"hang.facts[{i}]"
        fact = _map(item, where)
        record = _assertion(kb, {"name": fact.get("name"), "value": fact.get("value"),
                                 "source": {"kind": "log", "detail": fact.get("detail", "")}}, where, allowed)
        if record is not None:
            facts.append(record)
    return SavedHang(report, evidence, facts)


def _assertion(kb: KnowledgeBase, item: dict, where: str, allowed: set[str]) -> FactRecord | None:
    name = _str(item.get("name"), f"{where}.name", MAX_SHORT_CHARS)
    source = _map(item.get("source"), f"{where}.source")
    kind = _str(source.get("kind"), f"{where}.source.kind", 20)
    if kind not in allowed:
        raise StateError(f"{where}.source.kind: {kind!r} is not accepted here "
                         f"(one of {', '.join(sorted(allowed))})")
    detail = _str(source.get("detail", ""), f"{where}.source.detail", MAX_SHORT_CHARS)
    certainty = _unit(item.get("certainty", 1.0), f"{where}.certainty")
    if name not in kb.facts:
        return None
    fact = kb.facts[name]
    value = item.get("value")
    if not isinstance(value, (bool, int, float, str)) or (isinstance(value, str) and len(value) > MAX_SHORT_CHARS):
        raise StateError(f"{where}.value: expected a short string, a number or true/false")
    try:
        value = coerce(value, fact.type, fact.choices)
    except ValueProblem as exc:
        raise StateError(f"{where}.value: {exc}") from None
    return FactRecord(name, value, Source(kind, detail), certainty)  # type: ignore[arg-type]


def _hits(kb: KnowledgeBase, hits: dict, where: str) -> dict[str, dict[str, Any]]:
    if len(hits) > MAX_STATE_ITEMS:
        raise StateError(f"{where}: more than {MAX_STATE_ITEMS} entries")
    out = {}
    for signature, entry in hits.items():
        entry = _map(entry, f"{where}.{signature[:40]}")
        captures = _map(entry.get("captures", {}), f"{where}.{signature[:40]}.captures")
        if signature not in kb.signatures:
            continue
        out[signature] = {
            "count": _int(entry.get("count", 1), f"{where}.{signature}.count"),
            "first": _str(entry.get("first", ""), f"{where}.{signature}.first", MAX_SHORT_CHARS),
            "line": _str(entry.get("line", ""), f"{where}.{signature}.line", MAX_SHORT_CHARS),
            "captures": {_str(k, f"{where}.{signature}.captures", 100): _str(v, f"{where}.{signature}.captures", MAX_SHORT_CHARS)
                         for k, v in list(captures.items())[:100]},
        }
    return out


def _items(data: dict, key: str) -> list:
    value = data.get(key, [])
    if not isinstance(value, list):
        raise StateError(f"{key}: expected a list, got {type(value).__name__}")
    if len(value) > MAX_STATE_ITEMS:
        raise StateError(f"{key}: {len(value)} entries; the limit is {MAX_STATE_ITEMS}")
    return value


def _map(value: object, where: str) -> dict:
    if not isinstance(value, dict):
        raise StateError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def _str(value: object, where: str, limit: int) -> str:
    if not isinstance(value, str):
        raise StateError(f"{where}: expected a string, got {type(value).__name__}")
    if len(value) > limit:
        raise StateError(f"{where}: {len(value)} characters; the limit is {limit}")
    # A lone surrogate cannot be written out as UTF-8 again: keep the rest of the text.
    return value.encode("utf-8", "replace").decode("utf-8")


def _int(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise StateError(f"{where}: expected a whole number from 0 to {MAX_COUNT}, got {_short(value)}")
    return value


def _unit(value: object, where: str, zero: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not (0 <= value <= 1 if zero else 0 < value <= 1):  # type: ignore[operator]
        raise StateError(f"{where}: expected a number in {'[0' if zero else '(0'}, 1], got {_short(value)}")
    return float(value)  # type: ignore[arg-type]


def _short(value: object) -> str:
    text = repr(value) if isinstance(value, (int, float, str, bool, type(None))) else type(value).__name__
    return text if len(text) <= 40 else text[:40] + "..."
