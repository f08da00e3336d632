"""Weak evidence from the words a user chose: how well a description matches each cause's own
explanation and fixes (BM25 over the KB's text).

Rules encode what is known for certain; this covers the long tail they do not reach, such as a
user who names the setting they suspect ("memlock", "GID index", "limits.conf") in words no
symptom phrase lists. It only adds evidence when the best match is clearly above chance (a
greeting or "it works fine" is not), and its strength stays small (``WEIGHT``) so one fired rule
outweighs it. Every contribution names the words it matched, so it explains itself like a rule.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

from ..kb.artifact import KnowledgeBase
from .matching import tokens

__all__ = ["RELEVANCE", "RelevanceIndex", "WEIGHT"]

#: The pseudo-rule id under which this evidence appears in explanations.
RELEVANCE = "text_relevance"
#: The strength given to the best-matching cause; others get WEIGHT * (score / best) ** 2.
WEIGHT = 0.15
#: Below this BM25 score the best match is chance (greetings, "it works fine").
MIN_BEST = 6.0
#: Causes scoring under this share of the best are left alone.
MIN_SHARE = 0.3
#: At most this many causes get relevance evidence.
TOP = 8

_K1, _B = 1.2, 0.75
_STOP = frozenset(
    "a an the of to in on at is are was be it my our with for and or by as if not no this that from "
    "when then than but so do does did can could would should will all any each every one two use used "
    "using run runs set sets its their them they you your we i".split()
)


def _terms(text: str) -> list[str]:
    return [t for t in tokens(text) if len(t) > 2 and t not in _STOP]  # numbers stay: versions, ports


class RelevanceIndex:
    """BM25 statistics of every cause's title, explanation and fix text."""

    def __init__(self, kb: KnowledgeBase | None = None, *, state: tuple | None = None):
        """Index ``kb``, or take the :meth:`state` of an index built earlier (the KB cache keeps one)."""
        self._postings: dict[str, list[tuple[int, float]]] | None = None  # see _postings_table
        self._causes: list[str] = []  # set with _postings
        if state is not None:
            self._docs, self._lengths, self._average, self._idf = state
            return
        assert kb is not None
        self._docs: dict[str, Counter[str]] = {}
        for cause_id, cause in kb.causes.items():
            parts = [cause.title, cause.explanation]
            for fix_id in cause.fixes:
                fix = kb.fixes[fix_id]
                parts += [fix.title, *fix.steps, *fix.commands, *fix.env]
            self._docs[cause_id] = Counter(_terms(" ".join(parts)))
        self._lengths = {c: sum(d.values()) for c, d in self._docs.items()}
        self._average = (sum(self._lengths.values()) / len(self._docs)) if self._docs else 1.0
        df = Counter(t for d in self._docs.values() for t in d)
        n = len(self._docs)
        self._idf = {t: math.log(1 + (n - k + 0.5) / (k + 0.5)) for t, k in df.items()}

    def state(self) -> tuple:
        """Plain data to rebuild this index without re-reading the KB's text."""
        return (self._docs, self._lengths, self._average, self._idf)

    def scores(self, text: str) -> dict[str, tuple[float, tuple[str, ...]]]:
        """BM25 score of the text against each cause, with the terms that matched (causes in
        the index's order; each score summed over the query's terms in sorted order)."""
        query, totals = self._totals(text)
        causes = self._postings_table()[0]
        return {causes[position]: (score, self._matched(position, query))
                for position, score in sorted(totals.items()) if score > 0}

    def _totals(self, text: str) -> tuple[list[str], dict[int, float]]:
        """The query's terms (sorted) and, per cause position, the sum of their scores, added in
        that order (only the causes whose text holds a term)."""
        query = sorted({t for t in _terms(text) if t in self._idf})
        postings = self._postings_table()[1]
        totals: dict[int, float] = {}
        get = totals.get
        for term in query:
            for position, score in postings[term]:
                totals[position] = get(position, 0.0) + score
        return query, totals

    def _matched(self, position: int, query: list[str]) -> tuple[str, ...]:
        """The query's terms the cause's text holds (those its score was summed over), in order."""
        doc = self._docs[self._postings_table()[0][position]]
        return tuple(term for term in query if doc.get(term))

    def _postings_table(self) -> tuple[list[str], dict[str, list[tuple[int, float]]]]:
        """The causes in order, and per term the causes (positions) whose text holds it with the
        term's BM25 score for each (a function of the term and the cause alone)."""
        if self._postings is None:
            causes = list(self._docs)
            postings: dict[str, list[tuple[int, float]]] = {}
            for position, cause_id in enumerate(causes):
                norm = _K1 * (1 - _B + _B * self._lengths[cause_id] / self._average)
                for term, tf in self._docs[cause_id].items():
                    if tf and term in self._idf:
                        postings.setdefault(term, []).append((position, self._idf[term] * tf * (_K1 + 1) / (tf + norm)))
            self._causes, self._postings = causes, postings
        return self._causes, self._postings

    def evidence(self, texts: Iterable[str]) -> dict[str, tuple[float, tuple[str, ...]]]:
        """Evidence strength and matched terms per cause for what the user said (the matched
        terms are found only for the causes that get evidence)."""
        query, totals = self._totals("\n".join(texts))
        scored = [(position, score) for position, score in sorted(totals.items()) if score > 0]
        if not scored:
            return {}
        best = max(score for _, score in scored)
        if best < MIN_BEST:
            return {}
        ranked = sorted(scored, key=lambda item: -item[1])[:TOP]
        causes = self._postings_table()[0]
        return {
            causes[position]: (round(WEIGHT * (score / best) ** 2, 4), self._matched(position, query))
            for position, score in ranked
            if score >= MIN_SHARE * best
        }
