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
"""
from __future__ import annotations

from collections.abc import Iterable

__all__ = ["combine", "combine_all", "RAISE_THRESHOLD", "LEAD_THRESHOLD"]

RAISE_THRESHOLD = 0.05
#: Rule support puts a cause ahead of those only the user's words or similar incidents point at
#: from this certainty on; a rule that barely supports a cause (a generic "it hangs" nudge) does
#: not outrank a cause the description names strongly. Chosen on the incident library
#: leave-one-out and the older blind rounds (0.05-0.2 tried; 0.1 gains most, loses least).
LEAD_THRESHOLD = 0.1


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
