"""Rule conditions compiled once into predicates over working memory.

Three-valued: a predicate answers True, False or None (unknown). A comparison with a fact
that is not known is unknown, so rules never fire on missing information; ``known: false``
is the one way to test for absence.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - the format's one definition, for type checkers
    from ..kb.schema import Condition, Fact
from .memory import FactRecord
from ..kb.patterns import PatternError, compile_pattern
from .values import coerce, compare, equals

_MATCH_CHARS = 4_096  # a fact value tested by `matches` is read this far

__all__ = ["Truth", "Predicate", "compile_condition", "condition_facts", "condition_needs", "comparisons", "holds_with_nothing_known"]

_COMPARISONS = ("eq", "ne", "in_", "lt", "le", "gt", "ge", "matches", "known")

#: (truth, certainty of the premise)
Truth = tuple[bool | None, float]
Predicate = Callable[[Mapping[str, FactRecord]], Truth]

_UNKNOWN: Truth = (None, 0.0)


def comparisons(cond: "Condition") -> list[str]:
    """The comparison keys set on a condition (at most one, the schema checks)."""
    return [k for k in _COMPARISONS if cond.get(k) is not None]


def condition_facts(cond: Condition) -> set[str]:
    """Every fact a condition reads."""
    if cond.fact is not None:
        return {cond.fact}
    parts = cond.all or cond.any or ([cond.not_] if cond.not_ else [])
    out: set[str] = set()
    for part in parts:
        out |= condition_facts(part)
    return out


def condition_needs(cond: Condition) -> set[str]:
    """Facts that must be known for the condition to be true (a cheap test before evaluating it)."""
    if cond.fact is not None:
        return set() if cond.known is False else {cond.fact}
    if cond.all is not None:
        out: set[str] = set()
        for part in cond.all:
            out |= condition_needs(part)
        return out
    if cond.any is not None:
        parts = [condition_needs(part) for part in cond.any]
        return set.intersection(*parts) if parts else set()
    inner = cond.not_
    if inner is not None and inner.fact is not None and inner.known is None:
        return {inner.fact}
    return set()


def holds_with_nothing_known(cond: Condition) -> bool | None:
    """The condition's truth on an empty memory (three-valued, like the compiled predicate).

    Only conditions true here can fire before any fact they read is known, so only those rules
    need trying when an inference starts; every other rule waits for a fact it reads.
    """
    if cond.fact is not None:
        return {False: True, True: False}.get(cond.known) if cond.known is not None else None
    if cond.all is not None:
        values = [holds_with_nothing_known(c) for c in cond.all]
        return False if False in values else (True if all(v is True for v in values) else None)
    if cond.any is not None:
        values = [holds_with_nothing_known(c) for c in cond.any]
        return True if True in values else (False if all(v is False for v in values) else None)
    inner = holds_with_nothing_known(cond.not_) if cond.not_ is not None else None
    return None if inner is None else not inner


def compile_condition(cond: Condition, facts: Mapping[str, Fact]) -> Predicate:
    """Compile a condition; raise ValueError naming the problem for an unknown fact or a
    literal that does not fit the fact's type. ``cond`` is a KB record or the same condition as
    plain data without its unset fields (an artifact's layout): only ``get`` reads it."""
    if cond.get("all") is not None:
        return _group("all", [compile_condition(c, facts) for c in cond["all"]])
    if cond.get("any") is not None:
        return _group("any", [compile_condition(c, facts) for c in cond["any"]])
    if cond.get("not_") is not None:
        inner = compile_condition(cond["not_"], facts)

        def negation(memory: Mapping[str, FactRecord]) -> Truth:
            truth, cf = inner(memory)
            if truth is None:
                return _UNKNOWN
            return (not truth, cf if cf > 0 else 1.0)

        return negation
    return _compile_fact_test(cond, facts)


def _compile_fact_test(cond: Condition, facts: Mapping[str, Fact]) -> Predicate:
    name = cond.get("fact")
    assert name is not None
    if name not in facts:
        raise ValueError(f"unknown fact {name!r}")
    fact = facts[name]
    kind = fact.type
    ops = comparisons(cond)
    op = ops[0] if ops else None

    def literal(value: object) -> object:
        if kind in ("number",) or op in ("lt", "le", "gt", "ge") and kind != "version":
            return coerce(value, "number")
        if kind == "choice":
            return coerce(value, kind, fact.choices)
        return coerce(value, kind)

    if op == "known":
        wanted = bool(cond["known"])

        def known(memory: Mapping[str, FactRecord]) -> Truth:
            record = memory.get(name)
            return ((record is not None) == wanted, record.certainty if record else 1.0)

        known.inline = ("known", name, wanted)  # type: ignore[attr-defined]
        return known
    # The tests most rules make are written out whole (one call per test, no ``equals``): a
    # bare bool, and eq / ne / in on a bool, a choice or text, with ``equals``'s comparison for
    # the type and the literals' side worked out here; each is True or False once the fact is known.
    if op is None:
        if kind != "bool":
            raise ValueError(f"bare test of {name!r} needs a bool fact (it is {kind}); use eq/in")

        def is_true(memory: Mapping[str, FactRecord]) -> Truth:
            record = memory.get(name)
            if record is None:
                return _UNKNOWN
            return (record.value is True, record.certainty)

        is_true.inline = ("bool", name, True, True)  # type: ignore[attr-defined]
        return is_true
    if kind == "bool" and op in ("eq", "ne"):
        expected = literal(cond[op])  # a bool: ``equals`` is ``actual is expected``
        positive = op == "eq"

        def bool_test(memory: Mapping[str, FactRecord]) -> Truth:
            record = memory.get(name)
            if record is None:
                return _UNKNOWN
            return ((record.value is expected) == positive, record.certainty)

        bool_test.inline = ("bool", name, expected, positive)  # type: ignore[attr-defined]
        return bool_test
    if kind not in ("bool", "number", "version") and op in ("eq", "ne", "in_"):
        wanted = frozenset(str(literal(v)).lower() for v in ((cond.get("in_") or []) if op == "in_" else [cond[op]]))
        inside = op != "ne"  # ``equals`` on text: the lower-cased texts are the same

        def text_test(memory: Mapping[str, FactRecord]) -> Truth:
            record = memory.get(name)
            if record is None:
                return _UNKNOWN
            return ((str(record.value).lower() in wanted) == inside, record.certainty)

        text_test.inline = ("text", name, wanted, inside)  # type: ignore[attr-defined]
        return text_test
    if op in ("eq", "ne"):
        expected = literal(cond[op])
        positive = op == "eq"
        test = lambda v: equals(v, expected, kind) == positive  # type: ignore[arg-type]
    elif op == "in_":
        options = [literal(v) for v in cond.get("in_") or []]
        test = lambda v: any(equals(v, o, kind) for o in options)  # type: ignore[arg-type]
    elif op == "matches":
        try:
            regex = compile_pattern(str(cond["matches"]), ignore_case=True)
        except PatternError as exc:
            raise ValueError(f"bad regex for {name!r}: {exc}") from None
        test = lambda v: regex.search(str(v)[:_MATCH_CHARS]) is not None
    else:
        if kind not in ("number", "version"):
            raise ValueError(f"{op} needs a number or version fact ({name!r} is {kind})")
        bound = literal(cond[op])
        test = lambda v: compare(v, op, bound, kind)  # type: ignore[arg-type]

    def fact_test(memory: Mapping[str, FactRecord]) -> Truth:
        record = memory.get(name)
        if record is None:
            return _UNKNOWN
        result = test(record.value)
        if result is None:
            return _UNKNOWN
        return (result, record.certainty)

    return fact_test


def _group(kind: str, parts: list[Predicate]) -> Predicate:
    """An ``all`` or ``any`` of ``parts`` as one generated function: the tests most rules make
    (a bool, eq/ne/in on a bool, choice or text, ``known``) written out in it, the others called.
    The same results as looping over the parts (:func:`_looped`, kept as the reference), with
    the same short cut (``all`` stops at the first false part), comparisons and certainty
    (``min``/``max`` keep the first of equal values, as ``<``/``>`` below do); rule conditions
    are most of what chaining and question ranking spend their time on."""
    space: dict[str, object] = {"_UNKNOWN": _UNKNOWN}
    lines = ["def group(memory):", "    get = memory.get",
             "    lowest, unknown = 1.0, False" if kind == "all" else "    best, unknown = -1.0, False"]
    for i, part in enumerate(parts):
        inline = getattr(part, "inline", None)
        if inline is None:
            space[f"p{i}"] = part
            lines.append(f"    truth, cf = p{i}(memory)")
            if kind == "all":
                lines += ["    if truth is False:", "        return (False, 0.0)", "    if truth is None:",
                          "        unknown = True", "    elif cf < lowest:", "        lowest = cf"]
            else:
                lines += ["    if truth is True:", "        if cf > best:", "            best = cf",
                          "    elif truth is None:", "        unknown = True"]
            continue
        test, name = inline[0], inline[1]
        space[f"n{i}"] = name
        lines.append(f"    r = get(n{i})")
        if test == "known":
            space[f"k{i}"] = inline[2]
            truth = f"((r is not None) == k{i})"
            certainty = "(r.certainty if r else 1.0)"
            if kind == "all":
                lines += [f"    if not {truth}:", "        return (False, 0.0)",
                          f"    c = {certainty}", "    if c < lowest:", "        lowest = c"]
            else:
                lines += [f"    if {truth}:", f"        c = {certainty}", "        if c > best:", "            best = c"]
            continue
        if test == "bool":
            space[f"e{i}"], space[f"s{i}"] = inline[2], inline[3]
            truth = f"((r.value is e{i}) == s{i})"
        else:
            space[f"w{i}"], space[f"s{i}"] = inline[2], inline[3]
            truth = f"((str(r.value).lower() in w{i}) == s{i})"
        if kind == "all":
            lines += ["    if r is None:", "        unknown = True", f"    elif not {truth}:", "        return (False, 0.0)",
                      "    elif r.certainty < lowest:", "        lowest = r.certainty"]
        else:
            lines += ["    if r is None:", "        unknown = True", f"    elif {truth}:",
                      "        if r.certainty > best:", "            best = r.certainty"]
    if kind == "all":
        lines.append("    return _UNKNOWN if unknown else (True, lowest)")
    else:
        lines += ["    if best >= 0:", "        return (True, best)", "    return _UNKNOWN if unknown else (False, 0.0)"]
    exec(compile("\n".join(lines), f"<condition {kind}>", "exec"), space)  # noqa: S102 - our own text
    group = space["group"]
    group.parts = parts  # type: ignore[attr-defined]
    return group  # type: ignore[return-value]


def _looped(kind: str, parts: list[Predicate]) -> Predicate:
    """An ``all`` or ``any`` of ``parts``, looping over them: the plain reference for :func:`_group`."""
    if kind == "all":
        def all_of(memory: Mapping[str, FactRecord]) -> Truth:
            lowest, unknown = 1.0, False
            for part in parts:
                truth, cf = part(memory)
                if truth is False:
                    return (False, 0.0)
                if truth is None:
                    unknown = True
                else:
                    lowest = min(lowest, cf)
            return _UNKNOWN if unknown else (True, lowest)

        return all_of

    def any_of(memory: Mapping[str, FactRecord]) -> Truth:
        best, unknown = -1.0, False
        for part in parts:
            truth, cf = part(memory)
            if truth is True:
                best = max(best, cf)
            elif truth is None:
                unknown = True
        if best >= 0:
            return (True, best)
        return _UNKNOWN if unknown else (False, 0.0)

    return any_of
