"""Cause priors: how often each cause appears in the incident library, smoothed.

A cause's prior is its share of the library's incidents after adding :data:`PSEUDO` imagined
incidents per cause, spread over the causes in proportion to the ``prior`` each cause file
states (a Dirichlet prior whose base measure is the KB's own estimate)::

    prior(c) = (n(c) + PSEUDO · C · p(c) / Σp) / (N + PSEUDO · C)

with ``n(c)`` the incidents whose cause is ``c``, ``N`` all incidents, ``C`` the number of causes
and ``p(c)`` the cause file's ``prior``. A cause no incident has yet keeps a prior proportional to
its stated one; with an empty library the priors are the stated ones rescaled to sum to 1, so the
engine behaves as it did before there was a library (priors only matter relative to each other:
for ties between equally certain causes and as the belief weights behind the choice of
questions, :mod:`engine.questions`). Incidents a session excludes (leave-one-out) are not counted.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping
from typing import Any

__all__ = ["PSEUDO", "library_priors"]

#: Imagined incidents per cause before the library is counted.
PSEUDO = 1.0


def library_priors(causes: Mapping[str, Any], incidents: Mapping[str, Any],
                   exclude: Collection[str] = ()) -> dict[str, float]:
    """Each cause's prior from the library (incidents whose id or source is in ``exclude`` left out)."""
    counts = Counter(i.cause for i_id, i in incidents.items()
                     if i.cause in causes and i_id not in exclude and i.source not in exclude)
    stated = sum(c.prior for c in causes.values()) or 1.0
    pseudo = PSEUDO * len(causes)
    total = sum(counts.values()) + pseudo
    return {cid: (counts[cid] + pseudo * c.prior / stated) / total for cid, c in causes.items()}
