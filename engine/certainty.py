"""How evidence combines: MYCIN certainty factors, in one place.

Each rule that fires contributes ``strength × premise certainty`` to a cause, a number in
[-1, 1]: positive is evidence for, negative evidence against. Contributions combine with the
MYCIN formula, which is commutative and associative, so the order rules fire in does not change
a cause's certainty:

* both positive: ``a + b·(1 − a)``
* both negative: ``a + b·(1 + a)``
* mixed signs:   ``(a + b) / (1 − min(|a|, |b|))``

A cause is *raised* when its certainty is above :data:`RAISE_THRESHOLD`; its confidence is that
certainty (negative certainties are reported as 0). Raised causes that rules support with at
least :data:`LEAD_THRESHOLD` come first, the rest by confidence after them. The premise certainty of ``all`` is the
minimum of its parts, of ``any`` the maximum of the true parts, of ``not`` the certainty of
what it negates.

**Evidence that repeats itself.** Rules often come in tiers over the same facts: "a hang at
start-up" for a few causes, "a multi-node hang at start-up" for some of them, "a multi-node hang
at start-up after an upgrade" for one. When a cause's rules fire on facts that a stronger (or
equally strong) rule for the same cause already read - the facts traced back through the rules
that derived them to what the user, a log or a probe said - the weaker rule tells nothing that
rule did not, so it counts :data:`REPEATED` of its strength rather than in full
(:func:`combine_evidence`). A rule that reads a fact the stronger one did not still counts in
full: a specific refinement of a generic rule adds what it adds. Without this, one sentence that
sets "multi-node", "hang" and "start-up" counted three times for each network cause and put
them ahead of the cause the rest of the description named (blind rounds 11-14; BENCHMARKS.md).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

__all__ = ["combine", "combine_all", "combine_evidence", "counted", "repeated_rules", "RAISE_THRESHOLD", "LEAD_THRESHOLD", "REPEATED"]

RAISE_THRESHOLD = 0.05
#: Rule support puts a cause ahead of those only the user's words or similar incidents point at
#: from this certainty on; a rule that barely supports a cause (a generic "it hangs" nudge) does
#: not outrank a cause the description names strongly. Chosen on the incident library
#: leave-one-out and the older blind rounds (0.05-0.2 tried; 0.1 gains most, loses least).
LEAD_THRESHOLD = 0.1
#: The share of its strength a rule keeps when a stronger rule for the same cause read every fact
#: it rests on (0.25-1 measured on blind rounds 11-14 and the library; 0.5 gains on both).
REPEATED = 0.5


def combine(a: float, b: float) -> float:
    """Combine two certainty factors."""
    if a >= 0 and b >= 0:
        return a + b * (1 - a)
    if a <= 0 and b <= 0:
        return a + b * (1 + a)
    denominator = 1 - min(abs(a), abs(b))
    if denominator <= 0:  # +1 and -1: total contradiction; say nothing
        return 0.0
    return (a + b) / denominator


def combine_all(factors: Iterable[float]) -> float:
    """Fold :func:`combine` over factors (0 for none)."""
    total = 0.0
    for factor in factors:
        total = combine(total, factor)
    return total


def repeated_rules(items: Iterable[tuple[str, float]],
                   roots: Callable[[str], frozenset[str] | None]) -> dict[str, str]:
    """Among a cause's evidence items ``(rule id, contribution)``, the rules that repeat a stronger
    one, each with the rule it repeats: every fact it rests on, that rule rests on too (ties go
    by rule id). ``roots(rule_id)`` gives the facts a fired rule rests on, traced back to where
    they were given; None for evidence that is not a rule (word relevance, similar incidents),
    which never repeats anything, nor does evidence against."""
    positive = [(value, rule_id) for rule_id, value in items if value > 0]
    if len(positive) < 2:  # nothing can repeat (most causes)
        return {}
    rules = sorted((-value, rule_id, found) for value, rule_id in positive
                   if (found := roots(rule_id)) is not None)
    out: dict[str, str] = {}
    for index, (_, rule_id, facts) in enumerate(rules):
        for _, stronger, earlier in rules[:index]:
            if facts <= earlier:
                out[rule_id] = stronger
                break
    return out


def counted(items: Iterable[tuple[str, float]], roots: Callable[[str], frozenset[str] | None]
            ) -> list[tuple[str, float, str]]:
    """Each evidence item as it counts: ``(rule id, contribution, the rule it repeats or "")``, a
    repeating rule's contribution scaled by :data:`REPEATED`, in the items' order."""
    items = list(items)
    repeats = repeated_rules(items, roots)
    return [(rule_id, value * REPEATED if rule_id in repeats else value, repeats.get(rule_id, ""))
            for rule_id, value in items]


def combine_evidence(items: Iterable[tuple[str, float]], roots: Callable[[str], frozenset[str] | None]) -> float:
    """A cause's certainty from its evidence items ``(rule id, contribution)``: :func:`combine_all`
    over them as they count (:func:`counted`: a rule that repeats a stronger one for the same cause
    at :data:`REPEATED`; see the module's docstring)."""
    items = list(items)
    repeats = repeated_rules(items, roots)
    if not repeats:
        return combine_all(value for _, value in items)
    return combine_all(value * REPEATED if rule_id in repeats else value for rule_id, value in items)
