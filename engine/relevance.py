"""Weak evidence from the words a user chose: how well a description matches each cause's own
explanation and fixes (BM25 over the KB's text), and the words of the incidents reported with it.

Rules encode what is known for certain; this covers the long tail they do not reach, such as a
user who names the setting they suspect ("memlock", "GID index", "limits.conf") in words no
symptom phrase lists. It only adds evidence when the best match is clearly above chance (a
greeting or "it works fine" is not), and its strength stays small (``WEIGHT``; with the library's
words below, at most ``combine(WEIGHT, LIBRARY_WEIGHT)``, 0.19) so one fired rule outweighs it.
Every contribution names the words it matched, so it explains itself like a rule.

**The library's words.** A second index holds, per cause, the reporter's words and summary of
every incident of the library with that cause: users' words for the failure (what they saw, the
tools they ran), where the KB's text is written from the mechanism. Its best match gets at most
:data:`LIBRARY_WEIGHT`, combined with the KB-text evidence like two rules
(:func:`engine.certainty.combine`) under the same pseudo-rule: a second opinion that moves
causes the KB's words leave level, too weak to outvote them. Measured on nine earlier blind rounds
(422 cases, each round scored on the KB from before it was read; the blind rounds are kept
outside the repository) it raised top-1 from 177 to 181 and top-3 from 246 to 257, no round
lower; stronger
(0.06-0.15, or the incidents' words merged into the causes' text) gains up to 184 / 263 there
but costs 2-6 of the library's leave-one-out top-1, where the KB's text was written from the
very incident scored. It counts as case-based evidence: a session without it uses the KB's words
alone, and a session that leaves incidents out has their words taken out of their causes' text
(:meth:`RelevanceIndex.evidence`, ``without``; the inverse document frequencies and the average
length still count them, as they describe the vocabulary, not the causes - as in
:mod:`engine.similarity`).
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping

from ..kb.artifact import KnowledgeBase
from .matching import tokens

__all__ = ["LIBRARY_WEIGHT", "RELEVANCE", "RelevanceIndex", "WEIGHT", "incident_words"]

#: The pseudo-rule id under which this evidence appears in explanations.
RELEVANCE = "text_relevance"
#: The strength given to the best-matching cause; others get WEIGHT * (score / best) ** 2.
WEIGHT = 0.15
#: The same for the library's words (the incidents' reporters and summaries per cause).
LIBRARY_WEIGHT = 0.05
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


def incident_words(incident: object) -> Counter[str]:
    """The words an incident gives its cause in the library's index: its reporter's words and summary."""
    return Counter(_terms(f"{getattr(incident, 'reporter', '') or ''}\n{getattr(incident, 'summary', '') or ''}"))


class RelevanceIndex:
    """BM25 statistics of every cause's title, explanation and fix text - or, with ``library``,
    of the words of the library's incidents with that cause (every cause has a text, empty for
    a cause no incident has)."""

    def __init__(self, kb: KnowledgeBase | None = None, *, state: tuple | None = None, library: bool = False):
        """Index ``kb``'s text (its incidents' words with ``library``), or take the :meth:`state`
        of an index built earlier (the KB cache keeps one)."""
        self._postings: dict[str, list[tuple[int, float]]] | None = None  # see _postings_table
        self._causes: list[str] = []  # set with _postings
        if state is not None:
            self._docs, self._lengths, self._average, self._idf = state
            return
        assert kb is not None
        self._docs: dict[str, Counter[str]] = {}
        for cause_id, cause in kb.causes.items():
            if library:
                self._docs[cause_id] = Counter()
                continue
            parts = [cause.title, cause.explanation]
            for fix_id in cause.fixes:
                fix = kb.fixes[fix_id]
                parts += [fix.title, *fix.steps, *fix.commands, *fix.env]
            self._docs[cause_id] = Counter(_terms(" ".join(parts)))
        if library:
            for incident in kb.get("incidents", {}).values():
                if incident.cause in self._docs:
                    self._docs[incident.cause].update(incident_words(incident))
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

    def _norm(self, length: int) -> float:
        """BM25's length normalisation for a cause text of ``length`` terms."""
        return _K1 * (1 - _B + _B * length / self._average)

    def _term_score(self, term: str, tf: int, norm: float) -> float:
        """BM25's score of one term found ``tf`` times in a cause's text."""
        return self._idf[term] * tf * (_K1 + 1) / (tf + norm)

    def _postings_table(self) -> tuple[list[str], dict[str, list[tuple[int, float]]]]:
        """The causes in order, and per term the causes (positions) whose text holds it with the
        term's BM25 score for each (a function of the term and the cause alone)."""
        if self._postings is None:
            causes = list(self._docs)
            postings: dict[str, list[tuple[int, float]]] = {}
            for position, cause_id in enumerate(causes):
                norm = self._norm(self._lengths[cause_id])
                for term, tf in self._docs[cause_id].items():
                    if tf and term in self._idf:
                        postings.setdefault(term, []).append((position, self._term_score(term, tf, norm)))
            self._causes, self._postings = causes, postings
        return self._causes, self._postings

    def _without(self, query: list[str], totals: dict[int, float], without: Mapping[str, Counter[str]]
                 ) -> dict[str, dict[str, int]]:
        """Rescore, in ``totals``, the causes whose text loses the words in ``without`` (cause ->
        word counts taken out); the idf and average length stay. Returns the reduced texts."""
        causes = self._postings_table()[0]
        positions = {cause_id: position for position, cause_id in enumerate(causes)}
        reduced = {}
        for cause_id, taken in without.items():
            position = positions.get(cause_id)
            if position is None:
                continue
            doc = reduced[cause_id] = {t: n - taken.get(t, 0) for t, n in self._docs[cause_id].items()
                                       if n > taken.get(t, 0)}
            norm = self._norm(sum(doc.values()))
            totals[position] = sum((self._term_score(term, doc[term], norm) for term in query if doc.get(term)), 0.0)
        return reduced

    def evidence(self, texts: Iterable[str], without: Mapping[str, Counter[str]] | None = None,
                 weight: float = WEIGHT) -> dict[str, tuple[float, tuple[str, ...]]]:
        """Evidence strength (``weight`` for the best match) and matched terms per cause for what
        the user said (the matched terms are found only for the causes that get evidence).
        ``without``: per cause, word counts to take out of its text first (the words of incidents
        a session leaves out)."""
        query, totals = self._totals("\n".join(texts))
        reduced = self._without(query, totals, without) if without else {}
        scored = [(position, score) for position, score in sorted(totals.items()) if score > 0]
        if not scored:
            return {}
        best = max(score for _, score in scored)
        if best < MIN_BEST:
            return {}
        ranked = sorted(scored, key=lambda item: -item[1])[:TOP]
        causes = self._postings_table()[0]
        return {
            causes[position]: (round(weight * (score / best) ** 2, 4),
                               tuple(t for t in query if reduced[causes[position]].get(t))
                               if causes[position] in reduced else self._matched(position, query))
            for position, score in ranked
            if score >= MIN_SHARE * best
        }
