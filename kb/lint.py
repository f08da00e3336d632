"""``diagnose kb lint``: check the whole KB in layers — YAML and schema, then meaning, then layout.

Each problem names the file, the line and the item id. Checks: the schema; every fact,
cause, fix and probe referenced exists; regexes compile with RE2 (linear time, no backtracking);
every rule, symptom and signature has examples of both kinds and they all behave; every fix is
used; no cause without a rule that can raise it; no rule reading a fact nothing can set; every
incident names a cause and one of its fixes, and facts the KB has. In the packaged layout
(``causes/``, ``vocabulary/``, ``incidents/``) a cause file holds one cause in
``causes/<area>/<id>.yaml`` with the rules that weigh it, and vocabulary holds no causes, fixes or
evidence.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from .artifact import KnowledgeBase
from .load import DATA_DIR, KBError, kb_files, load_files

__all__ = ["lint_kb", "stats", "schema_text", "SCHEMA_PATH"]

SCHEMA_PATH = Path(__file__).with_name("schema.json")
_REFERENCE = re.compile(r"^(https?://\S+|seed:\S+\.txt)$")


def schema_text() -> str:
    """The JSON Schema of a KB file, as committed in kb/schema.json."""
    from .schema import dump_json_schema

    return json.dumps(dump_json_schema(), indent=2, sort_keys=True) + "\n"


def _where(kb: KnowledgeBase, section: str, item: str) -> str:
    return f"{kb.origins.get(f'{section}:{item}', '?')} [{item}]"


def _settable_facts(kb: KnowledgeBase) -> set[str]:
    from ..engine.session import LOG_GIVEN

    out: set[str] = {LOG_GIVEN}  # the session sets it when log lines arrive
    for fact in kb.facts.values():
        if fact.question or fact.probes:
            out.add(fact.id)
        for implication in fact.get("implies") or ():
            out.update(implication.set)
        out.update(fact.get("reveals") or ())
    for item in list(kb.symptoms.values()) + list(kb.signatures.values()):
        out.update(item.sets)
    for rule in kb.rules.values():
        out.update(rule.then.set)
    return out


def _meaning(kb: KnowledgeBase) -> list[str]:
    from ..engine.conditions import condition_facts

    problems: list[str] = []
    settable = _settable_facts(kb)
    raising: Counter[str] = Counter()
    direct = _direct_evidence_ids(kb)
    for rule in kb.rules.values():
        where = _where(kb, "rules", rule.id)
        dead = sorted(condition_facts(rule.when) - settable)
        if dead:
            problems.append(f"{where}: can never fire: nothing sets {', '.join(dead)} (no question, probe, symptom, signature or rule)")
        if rule.id not in direct and (not rule.examples.fires or not rule.examples.silent):
            problems.append(f"{where}: needs examples of both kinds (fires and silent)")
        for ev in rule.then.evidence:
            if ev.strength > 0:
                raising[ev.cause] += 1
    for kind, items in (("symptoms", kb.symptoms), ("signatures", kb.signatures)):
        for item in items.values():
            if not item.examples.fires or not item.examples.silent:
                problems.append(f"{_where(kb, kind, item.id)}: needs examples of both kinds (fires and silent)")
    for cause in kb.causes.values():
        where = _where(kb, "causes", cause.id)
        if not raising[cause.id]:
            problems.append(f"{where}: unreachable: no rule gives evidence for it")
        for ref in cause.references:
            if not _REFERENCE.match(ref):
                problems.append(f"{where}: reference {ref!r} is neither a URL nor seed:FILE.txt")
    used = {f for c in kb.causes.values() for f in c.fixes}
    for fix in kb.fixes.values():
        if fix.id not in used:
            problems.append(f"{_where(kb, 'fixes', fix.id)}: no cause uses this fix")
    problems.extend(_probe_problems(kb))
    problems.extend(_incident_problems(kb))
    problems.extend(_version_table_problems(kb))
    problems.extend(_question_problems(kb, settable))
    return problems


def _question_problems(kb: KnowledgeBase, settable: set[str]) -> list[str]:
    """Premises, revealed facts and Chinese text of questions; Chinese titles of causes."""
    from ..engine.conditions import condition_facts

    problems = []
    for fact in kb.facts.values():
        where = _where(kb, "facts", fact.id)
        if fact.get("asked_when") is not None:
            dead = sorted(condition_facts(fact.asked_when) - settable)
            if dead:
                problems.append(f"{where}: asked_when can never hold: nothing sets {', '.join(dead)}")
            if fact.question is None:
                problems.append(f"{where}: asked_when without a question")
        for name in fact.get("reveals") or ():
            if name not in kb.facts:
                problems.append(f"{where}: reveals unknown fact {name!r}")
        zh = fact.get("zh") or {}
        if fact.question and not zh.get("question"):
            problems.append(f"{where}: question without Chinese text (zh: {{question: ...}})")
        for choice in (zh.get("choices") or {}):
            if choice not in (fact.choices or ()):
                problems.append(f"{where}: zh.choices names {choice!r}, not one of its choices")
    for cause in kb.causes.values():
        if not (cause.get("zh") or {}).get("title"):
            problems.append(f"{_where(kb, 'causes', cause.id)}: title without Chinese text (zh: {{title: ...}})")
    return problems


def _implication_problems(kb: KnowledgeBase, doctor: Any) -> list[str]:
    """Implications that contradict themselves or each other: from each implication's premise,
    applying every implication that then holds must never give one fact two values."""
    from ..engine.compiled import IMPLIES
    from ..engine.memory import FactRecord, Source
    from ..engine.values import equals

    rules = [r for r in doctor.compiled.rules if r.id.startswith(f"{IMPLIES}_")]
    problems = []
    for rule in rules:
        for seed in _satisfying(rule.rule.when, kb):
            memory = {name: FactRecord(name, value, Source("answer")) for name, value in seed.items()}
            chain: dict[str, str] = {name: "its premise" for name in seed}
            clash = ""
            changed = True
            while changed and not clash:
                changed = False
                for other in rules:
                    if other.predicate(memory)[0] is not True:
                        continue
                    for name, value in other.sets:
                        kind = kb.facts[name].type
                        if name in memory:
                            if not equals(memory[name].value, value, kind):
                                clash = (f"{name} = {memory[name].value!r} (from {chain[name]}) "
                                         f"and {value!r} (from {other.id})")
                                break
                            continue
                        memory[name] = FactRecord(name, value, Source("rule", other.id))
                        chain[name] = other.id
                        changed = True
                    if clash:
                        break
            if clash:
                where = _where(kb, "facts", rule.rule.get("implied_by") or "")
                problems.append(f"{where}: {rule.id} contradicts: {' '.join(f'{k}={v!r}' for k, v in seed.items())} leads to {clash}")
                break
    return problems


def _satisfying(cond: Any, kb: KnowledgeBase) -> list[dict[str, Any]]:
    """Simple assignments that make a condition true (one per value of an ``in``; ``any``: one
    per branch); conditions it cannot read off (ranges, regexes, absence) give none."""
    from ..engine.values import coerce

    if cond.get("fact") is not None:
        fact = kb.facts[cond.fact]
        try:
            if cond.get("eq") is not None:
                return [{cond.fact: coerce(cond.eq, fact.type, fact.choices)}]
            if cond.get("in_"):
                return [{cond.fact: coerce(v, fact.type, fact.choices)} for v in cond.in_]
        except ValueError:
            return []
        if fact.type == "bool" and not any(cond.get(k) is not None for k in
                                            ("ne", "lt", "le", "gt", "ge", "matches", "known")):
            return [{cond.fact: True}]
        return [{}]
    if cond.get("all"):
        out: list[dict[str, Any]] = [{}]
        for part in cond.all:
            options = _satisfying(part, kb)
            out = [{**a, **b} for a in out for b in options][:16]
        return out
    if cond.get("any"):
        return [option for part in cond.any for option in _satisfying(part, kb)][:16]
    return [{}]


def _direct_evidence_ids(kb: KnowledgeBase) -> set[str]:
    """Symptoms and signatures that weigh causes themselves, and the rows of version tables (their
    rules are made by the loader; their examples sit on the symptom, signature or table)."""
    from .versions import rule_ids

    direct = {i.id for items in (kb.symptoms, kb.signatures) for i in items.values() if i.evidence}
    for table in kb.get("versions", {}).values():
        direct.update(rule_ids(table))
    return direct


def _version_table_problems(kb: KnowledgeBase) -> list[str]:
    """Version tables read and set version facts, weigh causes that exist, and have examples on
    which some row fires and on which none does (on the table or its rows)."""
    problems = []
    for table in kb.get("versions", {}).values():
        where = _where(kb, "versions", table.id)
        for role in ("key", "compare", "target"):
            name = table[role]
            fact = kb.facts.get(name) if name else None
            if name and fact is None:
                problems.append(f"{where}: {role} {name!r} is no fact")
            elif fact is not None and fact.type != "version":
                problems.append(f"{where}: {role} {name!r} is a {fact.type} fact, not a version")
        if table.cause and table.cause not in kb.causes:
            problems.append(f"{where}: unknown cause {table.cause!r}")
        for ref in [*table.references, *(r for row in table.rows for r in row.references)]:
            if not _REFERENCE.match(ref):
                problems.append(f"{where}: reference {ref!r} is neither a URL nor seed:FILE.txt")
        kinds = [table.examples] + [row.examples for row in table.rows]
        if not any(e.fires for e in kinds) or not any(e.silent for e in kinds):
            problems.append(f"{where}: needs examples of both kinds (fires and silent)")
    return problems


def _incident_problems(kb: KnowledgeBase) -> list[str]:
    from ..engine.values import ValueProblem, coerce

    problems = []
    for incident in kb.incidents.values():
        where = _where(kb, "incidents", incident.id)
        cause = kb.causes.get(incident.cause)
        if cause is None:
            problems.append(f"{where}: unknown cause {incident.cause!r}")
        elif incident.fix not in cause.fixes:
            problems.append(f"{where}: fix {incident.fix!r} is not one of {incident.cause}'s fixes ({', '.join(cause.fixes)})")
        for name, value in incident.knows.items():
            fact = kb.facts.get(name)
            if fact is None:
                problems.append(f"{where}: knows unknown fact {name!r}")
                continue
            try:
                coerce(value, fact.type, fact.choices)
            except ValueProblem as exc:
                problems.append(f"{where}: knows {name}: {exc}")
        for pattern in incident.expected_remedy_any:
            try:
                re.compile(pattern)
            except re.error as exc:
                problems.append(f"{where}: expected_remedy_any {pattern!r} does not compile: {exc}")
    return problems


def _layout_problems(kb: KnowledgeBase) -> list[str]:
    """The packaged layout: one failure mode per file, shared vocabulary apart."""
    problems = []
    direct = _direct_evidence_ids(kb)
    for cause in kb.causes.values():
        file = kb.origins.get(f"causes:{cause.id}", "?").rpartition(":")[0]
        if file != f"causes/{cause.area}/{cause.id}.yaml":
            problems.append(f"{_where(kb, 'causes', cause.id)}: belongs in causes/{cause.area}/{cause.id}.yaml")
    for section in ("rules", "symptoms", "signatures", "fixes"):
        for item in getattr(kb, section).values():
            if section == "rules" and item.id in direct:
                continue
            file = kb.origins.get(f"{section}:{item.id}", "?").rpartition(":")[0]
            top = file.split("/", 1)[0]
            weighs = [e.cause for e in item.evidence] if section in ("symptoms", "signatures") else (
                [e.cause for e in item.then.evidence] if section == "rules" else [])
            if top == "vocabulary" and (weighs or section == "fixes"):
                problems.append(f"{_where(kb, section, item.id)}: weighs causes or fixes one: belongs in a cause file")
            elif top == "causes" and section != "fixes" and weighs and not any(file.endswith(f"/{c}.yaml") for c in weighs):
                problems.append(f"{_where(kb, section, item.id)}: gives no evidence for the cause of its file")
            elif top not in ("vocabulary", "causes"):
                problems.append(f"{_where(kb, section, item.id)}: lives outside causes/ and vocabulary/")
    return problems


def _probe_problems(kb: KnowledgeBase) -> list[str]:
    try:
        from ..probes.api import list_probes
    except ImportError:
        return []
    known = {p.name for p in list_probes()}
    return [
        f"{_where(kb, 'facts', fact.id)}: unknown probe {probe!r}"
        for fact in kb.facts.values() for probe in fact.probes if probe not in known
    ]


def lint_kb(directory: Path | None = None, *, examples: bool = True) -> list[str]:
    """Every problem in the KB folder (the packaged one by default); empty when clean.
    ``examples=False`` skips running the items' examples (the example tests run each one)."""
    from ..engine.compiled import CompileError
    from ..engine.session import Doctor
    from .examples import check_example, iter_examples

    try:
        folder = Path(directory or DATA_DIR)
        kb = load_files(kb_files(folder), folder)
    except KBError as exc:
        return [str(p) for p in exc.problems]
    try:
        doctor = Doctor(kb, validate=True)
    except CompileError as exc:
        return list(exc.problems)
    problems = _meaning(kb)
    problems.extend(_implication_problems(kb, doctor))
    folder = Path(directory or DATA_DIR)
    if (folder / "causes").is_dir() or (folder / "vocabulary").is_dir():
        problems.extend(_layout_problems(kb))
    section = {"rule": "rules", "symptom": "symptoms", "signature": "signatures", "table": "versions"}
    for case in iter_examples(doctor) if examples else ():
        message = check_example(doctor, case)
        if message:
            problems.append(f"{_where(kb, section[case.kind], case.item)}: example: {message}")
    return problems


def stats(directory: Path | None = None) -> dict[str, Any]:
    """Coverage figures: causes per area, signatures, references, examples."""
    folder = Path(directory or DATA_DIR)
    kb = load_files(kb_files(folder), folder)
    examples = sum(
        len(item.examples.fires) + len(item.examples.silent)
        for items in (kb.rules, kb.symptoms, kb.signatures) for item in items.values()
    )
    return {
        "causes": len(kb.causes),
        "causes_per_area": dict(sorted(Counter(c.area for c in kb.causes.values()).items())),
        "fixes": len(kb.fixes),
        "rules": len(kb.rules),
        "facts": len(kb.facts),
        "questions": sum(1 for f in kb.facts.values() if f.question),
        "symptoms": len(kb.symptoms),
        "symptom_phrases": sum(len(s.phrases) + len(s.patterns) for s in kb.symptoms.values()),
        "signatures": len(kb.signatures),
        "references": len({r for c in kb.causes.values() for r in c.references}),
        "examples": examples,
        "incidents": len(kb.incidents),
        "incidents_per_area": dict(sorted(Counter(kb.causes[i.cause].area for i in kb.incidents.values()
                                                  if i.cause in kb.causes).items())),
    }
