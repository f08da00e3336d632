"""Case-based evidence: the causes of the reported incidents most like this session.

The model, and every bound on it, is documented here and nowhere else.

**Profiles.** An incident (``kb/incidents/``) and a session are each described by three sets of
features: *words* (the reporter's words and the incident's summary; the session's texts),
*signatures* (the KB log signatures its log lines and pasted lines hit) and *facts* (each fact
``name=value`` its description sets through symptoms and signatures, plus the incident's ``knows``;
the session's facts given by the user, logs or probes, never those rules derived). An
incident's profile is exactly what a session fed its ``reporter`` and ``log`` would hold, plus
``knows``; profiles are computed when the KB artifact is compiled, so a start does not rescan
the library's logs.

**What a session's profile leaves out.** Facts answered to the engine's questions (the words and
log lines of a free-text answer still count, as the user's own do): a question is chosen
for what its answer does to the rules (:mod:`engine.questions`), and that is how the answer
counts; were it also a feature here, each answer would reshuffle the nearest incidents in a way
the choice never weighed - one rare fact feature replaces the whole top five, a fact few
incidents record dilutes every other one's cosine - and could take a cause's case-based evidence
away though the answer said nothing about it (the consultation's "made worse" cases,
``benchmarks/bench_consultation.py``: 3 of 869 before, each moved only through this). A fact the
user stated in their own words stays a feature when an answer repeats it. Nor does ``log_given``
count (for incidents either): it says what a report contains, not what failed.

**Similarity.** Each feature is weighed by its inverse document frequency over the library
(``1 + ln((N + 1) / (df + 1))``; words also by ``1 + ln(tf)``) and by the weight of its set
(:data:`W_WORDS`, :data:`W_SIGNATURES`, :data:`W_FACTS`: facts count most, words least, as
chosen leave-one-out on the library with ``benchmarks/bench_library.py``); the similarity of a
session to an incident is the cosine of the two weighed vectors, in [0, 1] (close to 1 for an
incident's own description). A fact both know with different values subtracts
:data:`CONFLICT` times the square of the incident's feature weight from the dot product (clamped
at 0), as if it had matched with the opposite sign. Features the library never uses do not
count; an incident sharing fewer than :data:`MIN_SHARED` features with the session is not
compared at all (one common word is chance). A session is compared only when the user described
something or a rule already counts for some cause: a healthy log and the cluster's ordinary facts
report no problem, and incidents that share the environment are not evidence of one.

**Evidence.** The :data:`TOP` most similar incidents at or above :data:`MIN_SIMILARITY` are the
session's *similar incidents* (front ends show them with their links). Each votes for its cause
with ``(similarity − MIN_SIMILARITY) / (FULL − MIN_SIMILARITY)``, at most 1: left out of the
362-incident library in turn, an incident's nearest neighbour had its cause one time in seven
below 0.3, two in five from 0.3 to 0.5, three in four from 0.5 to 0.7 and 9 times in 11 above
(the vote grows as that chance does). Votes for one cause
combine like certainty factors (``a + b·(1 − a)``), and the cause gets :data:`WEIGHT` times the
result as evidence under the pseudo-rule :data:`SIMILAR`. So case-based evidence for a cause
never exceeds ``WEIGHT`` (0.2): a fired rule of ordinary strength outweighs it, and it is never
the only reason a cause is certain. A session may leave incidents out (``leave_out``, by id or
source URL) so that an incident is never its own evidence (leave-one-out scoring). The library
also sets the causes' priors (:mod:`engine.priors`).
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from typing import Any, NamedTuple

from .certainty import combine_all
from .matching import tokens

__all__ = ["SIMILAR", "IncidentIndex", "SimilarIncident", "Profile", "WEIGHT", "TOP", "MIN_SIMILARITY",
           "similar_text"]

#: The pseudo-rule id under which case-based evidence appears in explanations.
SIMILAR = "similar_incidents"
#: The most evidence the similar incidents can give one cause.
WEIGHT = 0.2
#: How many of the most similar incidents count (and are shown).
TOP = 5
#: Below this similarity an incident is not similar.
MIN_SIMILARITY = 0.15
#: An incident this similar or more casts a full vote for its cause.
FULL = 0.7
#: Weights of the three feature sets.
W_WORDS, W_SIGNATURES, W_FACTS = 0.5, 2.0, 2.0
#: How much a fact known with different values counts against a match.
CONFLICT = 0.5
#: An incident shares at least this many features with the session to be similar at all.
MIN_SHARED = 2

_STOP = frozenset(
    "a an the of to in on at is are was be it my our with for and or by as if not no this that from "
    "when then than but so do does did can could would should will all any each every one two use used "
    "using run runs set sets its their them they you your we i".split()
)


def words(text: str) -> Counter[str]:
    """The countable words of a text (as relevance evidence reads them; numbers stay)."""
    return Counter(t for t in tokens(text) if len(t) > 2 and t not in _STOP)


def fact_feature(name: str, value: object) -> str:
    """A fact as a feature: ``name=value`` with booleans as yes/no and text lower-cased."""
    if isinstance(value, bool):
        shown = "yes" if value else "no"
    elif isinstance(value, float) and value.is_integer():
        shown = str(int(value))
    else:
        shown = str(value).strip().lower()
    return f"{name}={shown}"


class Profile(NamedTuple):
    """What similarity compares: word counts, signatures hit, facts as ``name=value``."""

    words: Mapping[str, int]
    signatures: frozenset[str]
    facts: Mapping[str, str]  # fact name -> feature (name=value)

    @classmethod
    def of(cls, texts: Iterable[str], signatures: Iterable[str], facts: Mapping[str, object]) -> "Profile":
        return cls(words("\n".join(texts)), frozenset(signatures),
                   {name: fact_feature(name, value) for name, value in facts.items()})


class SimilarIncident(NamedTuple):
    """A reported incident like the session, with its link and cause."""

    id: str
    source: str
    summary: str
    cause: str
    score: float

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "source": self.source, "summary": self.summary, "cause": self.cause,
                "score": round(self.score, 3)}


def similar_text(incidents: Iterable[SimilarIncident]) -> str:
    """The description of case-based evidence: the incidents that gave it."""
    shown = "; ".join(f"{i.id} ({i.score:.2f}, {i.source})" for i in incidents)
    return f"Reported incidents like yours that had this cause: {shown}"


class IncidentIndex:
    """The library's incidents as weighed feature vectors, scored against a session's profile.

    Built from the incidents' profiles when the KB artifact is compiled; :meth:`state` keeps the
    weights and vectors themselves, so a start only reads them (the inverse document
    frequencies count every incident, including any a session leaves out: they describe the
    vocabulary, not the causes).
    """

    def __init__(self, profiles: Mapping[str, Profile], incidents: Mapping[str, Any]):
        """``profiles`` by incident id; ``incidents`` the KB's incident records (source, summary, cause)."""
        self._incidents = incidents
        n = len(profiles)
        df_words: Counter[str] = Counter()
        df_sigs: Counter[str] = Counter()
        df_facts: Counter[str] = Counter()
        for profile in profiles.values():
            df_words.update(profile.words.keys())
            df_sigs.update(profile.signatures)
            df_facts.update(profile.facts.values())

        def idf(df: Counter[str], weight: float) -> dict[str, float]:
            return {k: round(weight * (1 + math.log((n + 1) / (v + 1))), 3) for k, v in df.items()}

        self._idf_words, self._idf_sigs, self._idf_facts = (
            idf(df_words, W_WORDS), idf(df_sigs, W_SIGNATURES), idf(df_facts, W_FACTS))
        self._vectors = {i: self._vector(p) for i, p in profiles.items()}
        self._facts = {i: dict(p.facts) for i, p in profiles.items()}
        self._norms = {i: math.sqrt(sum(w * w for w in v.values())) for i, v in self._vectors.items()}
        self._postings: tuple | None = None
        self._numpy: tuple | bool | None = None  # numpy and the postings as arrays (False: no numpy)
        self._queried = False

    def __len__(self) -> int:
        return len(self._vectors)

    @classmethod
    def from_state(cls, state: Mapping[str, Any], incidents: Mapping[str, Any]) -> "IncidentIndex":
        """The index :meth:`state` describes (the KB artifact keeps it); nothing is recomputed."""
        index = cls.__new__(cls)
        index._incidents = incidents
        index._idf_words, index._idf_sigs, index._idf_facts = (
            state["idf"]["words"], state["idf"]["signatures"], state["idf"]["facts"])
        kept = [i for i in state["vectors"] if i in incidents]
        index._vectors = {i: state["vectors"][i] for i in kept}
        index._facts = {i: state["facts"][i] for i in kept}
        index._norms = {i: state["norms"][i] for i in kept}
        index._postings, index._numpy, index._queried = None, None, False
        return index

    def state(self) -> dict[str, Any]:
        """Plain data from which :meth:`from_state` rebuilds this index (the KB artifact keeps it)."""
        return {"idf": {"words": self._idf_words, "signatures": self._idf_sigs, "facts": self._idf_facts},
                "vectors": self._vectors, "facts": self._facts, "norms": self._norms}

    def _vector(self, profile: Profile) -> dict[str, float]:
        """Feature -> weight; features the library does not use are left out."""
        vector: dict[str, float] = {}
        for term, count in profile.words.items():
            if term in self._idf_words:
                vector["w:" + term] = round((1 + math.log(count)) * self._idf_words[term], 3)
        for sig in profile.signatures:
            if sig in self._idf_sigs:
                vector["s:" + sig] = self._idf_sigs[sig]
        for feature in profile.facts.values():
            if feature in self._idf_facts:
                vector["f:" + feature] = self._idf_facts[feature]
        return vector

    def scores(self, profile: Profile, exclude: Collection[str] = ()) -> dict[str, float]:
        """Similarity of a session's profile to every incident it shares a feature with."""
        query = self._vector(profile)
        norm = math.sqrt(sum(w * w for w in query.values()))
        if not norm:
            return {}
        if self._postings is None and not self._queried:  # a one-shot run asks once: no index
            self._queried = True
            return self._pairwise_scores(profile, query, norm, exclude)
        # The postings of the query's features name the incidents sharing any and sum their dot
        # products in the query's order; where an incident's vector is the shorter one, its dot
        # product is summed in that vector's order instead, as the pairwise comparison does:
        # every score is the pairwise one to the last bit.
        postings, ids, vectors, by_fact = self._posting_lists()
        dots = [0.0] * len(ids)
        shared = [0] * len(ids)
        for feature, weight in query.items():
            for position, theirs in postings.get(feature, ()):
                dots[position] += weight * theirs
                shared[position] += 1
        size = len(query)
        candidates = [p for p, n in enumerate(shared) if n >= MIN_SHARED]
        for position in candidates:
            vector = vectors[position]
            if len(vector) < size:
                dots[position] = sum(query[k] * vector[k] for k in vector if k in query)
        if CONFLICT:
            for name, feature in profile.facts.items():
                for position, other in by_fact.get(name, ()):
                    if other != feature and shared[position] >= MIN_SHARED:
                        dots[position] -= CONFLICT * vectors[position].get("f:" + other, 0.0) ** 2
        out: dict[str, float] = {}
        for position in candidates:
            incident_id = ids[position]
            if exclude and (incident_id in exclude or self._incidents[incident_id].source in exclude):
                continue
            dot = dots[position]
            if dot > 0:
                out[incident_id] = dot / (norm * self._norms[incident_id])
        return out

    def _pairwise_scores(self, profile: Profile, query: dict[str, float], norm: float,
                         exclude: Collection[str]) -> dict[str, float]:
        """:meth:`scores` comparing the query with each incident in turn (no index to build)."""
        out: dict[str, float] = {}
        for incident_id, vector in self._vectors.items():
            if exclude and (incident_id in exclude or self._incidents[incident_id].source in exclude):
                continue
            small, large = (query, vector) if len(query) <= len(vector) else (vector, query)
            shared = [k for k in small if k in large]
            if len(shared) < MIN_SHARED:
                continue
            dot = sum(query[k] * vector[k] for k in shared)
            if CONFLICT:
                theirs = self._facts[incident_id]
                for name, feature in profile.facts.items():
                    other = theirs.get(name)
                    if other is not None and other != feature:
                        dot -= CONFLICT * vector.get("f:" + other, 0.0) ** 2
            if dot > 0:
                out[incident_id] = dot / (norm * self._norms[incident_id])
        return out

    def prepare(self) -> None:
        """Build the postings (and their arrays) now rather than at the second query."""
        self._posting_lists()
        self._arrays()

    def _posting_lists(self) -> tuple[dict[str, list[tuple[int, float]]], list[str], list[dict[str, float]],
                                      dict[str, list[tuple[int, str]]]]:
        """Built on first use: feature -> (incident position, weight) for every incident using it;
        the incident ids and vectors by position; fact name -> (position, its feature)."""
        if self._postings is None:
            postings: dict[str, list[tuple[int, float]]] = {}
            for position, vector in enumerate(self._vectors.values()):
                for feature, weight in vector.items():
                    postings.setdefault(feature, []).append((position, weight))
            by_fact: dict[str, list[tuple[int, str]]] = {}
            for position, incident_id in enumerate(self._vectors):
                for name, feature in self._facts[incident_id].items():
                    by_fact.setdefault(name, []).append((position, feature))
            self._postings = (postings, list(self._vectors), list(self._vectors.values()), by_fact)
        return self._postings

    def _arrays(self) -> tuple | None:
        """The postings as numpy arrays (None without numpy): per feature the positions of the
        incidents using it and their weights; per position the vector's length and norm; per
        fact name the positions knowing it, a code for each one's feature, the code of each
        feature and what a conflict on it subtracts (``CONFLICT × weight²``, as Python computes it)."""
        if self._numpy is None:
            try:
                import numpy
            except ImportError:
                self._numpy = False
                return None
            postings, ids, vectors, by_fact = self._posting_lists()
            features = {feature: (numpy.array([p for p, _ in found], dtype=numpy.intp),
                                  numpy.array([w for _, w in found], dtype=numpy.float64))
                        for feature, found in postings.items()}
            facts = {}
            for name, found in by_fact.items():
                codes = {feature: code for code, feature in enumerate(dict.fromkeys(f for _, f in found))}
                facts[name] = (numpy.array([p for p, _ in found], dtype=numpy.intp),
                               numpy.array([codes[f] for _, f in found], dtype=numpy.intp),
                               numpy.array([CONFLICT * vectors[p].get("f:" + f, 0.0) ** 2 for p, f in found],
                                           dtype=numpy.float64), codes)
            self._numpy = (numpy, features, numpy.array([len(v) for v in vectors], dtype=numpy.intp),
                           numpy.array([self._norms[i] for i in ids], dtype=numpy.float64), facts)
        return self._numpy or None

    def _similar_scores(self, profile: Profile, exclude: Collection[str] = ()) -> dict[str, float]:
        """:meth:`scores` at or above :data:`MIN_SIMILARITY` only, computed with numpy once the
        postings are built: the same sums of the same products in the same order per incident
        (each feature adds to every incident using it at once), so every score is the same float."""
        arrays = self._arrays() if self._postings is not None else None
        if arrays is None:
            return {i: s for i, s in self.scores(profile, exclude).items() if s >= MIN_SIMILARITY}
        numpy, features, lengths, norms, facts = arrays
        _, ids, vectors, _ = self._postings
        query = self._vector(profile)
        norm = math.sqrt(sum(w * w for w in query.values()))
        if not norm:
            return {}
        dots = numpy.zeros(len(ids))
        shared = numpy.zeros(len(ids), dtype=numpy.intp)
        for feature, weight in query.items():
            found = features.get(feature)
            if found is not None:
                dots[found[0]] += weight * found[1]
                shared[found[0]] += 1
        candidate = shared >= MIN_SHARED
        for position in numpy.flatnonzero(candidate & (lengths < len(query))).tolist():
            vector = vectors[position]
            dots[position] = sum(query[k] * vector[k] for k in vector if k in query)
        if CONFLICT:
            for name, feature in profile.facts.items():
                found = facts.get(name)
                if found is not None:
                    positions, codes, conflict, code = found
                    hit = (codes != code.get(feature, -1)) & candidate[positions]
                    dots[positions[hit]] -= conflict[hit]
        with numpy.errstate(divide="ignore", invalid="ignore"):
            scores = dots / (norm * norms)
        out: dict[str, float] = {}
        for position in numpy.flatnonzero(candidate & (dots > 0) & (scores >= MIN_SIMILARITY)).tolist():
            incident_id = ids[position]
            if exclude and (incident_id in exclude or self._incidents[incident_id].source in exclude):
                continue
            out[incident_id] = float(scores[position])
        return out

    def similar(self, profile: Profile, exclude: Collection[str] = (), limit: int | None = None) -> list[SimilarIncident]:
        """The most similar incidents at or above :data:`MIN_SIMILARITY`, best first (at most
        ``limit``, :data:`TOP` by default)."""
        scored = self._similar_scores(profile, exclude)
        ranked = sorted(((s, i) for i, s in scored.items() if s >= MIN_SIMILARITY), key=lambda item: (-item[0], item[1]))
        out = []
        for score, incident_id in ranked[:TOP if limit is None else limit]:
            incident = self._incidents[incident_id]
            out.append(SimilarIncident(incident_id, incident.source, incident.summary, incident.cause, min(score, 1.0)))
        return out


def evidence(similar: Iterable[SimilarIncident]) -> dict[str, tuple[float, tuple[SimilarIncident, ...]]]:
    """Evidence strength per cause (at most :data:`WEIGHT`) and the incidents behind it."""
    by_cause: dict[str, list[SimilarIncident]] = {}
    for incident in similar:
        by_cause.setdefault(incident.cause, []).append(incident)
    return {
        cause: (round(WEIGHT * combine_all(vote(i.score) for i in found), 4), tuple(found))
        for cause, found in by_cause.items()
    }


def vote(score: float) -> float:
    """How much one similar incident counts for its cause: 0 at :data:`MIN_SIMILARITY`, rising
    linearly to 1 at :data:`FULL`."""
    return max(0.0, min(1.0, (score - MIN_SIMILARITY) / (FULL - MIN_SIMILARITY)))
