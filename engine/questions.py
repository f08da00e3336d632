"""Choosing the next question: the one whose answer is expected to settle the most.

The model, in one place.

**Beliefs.** Every cause ``x`` gets ``w(x) = prior(x) · exp(K · cf(x))`` (``prior`` from how
often the incident library reports it, :mod:`engine.priors`; ``cf`` its certainty now; ``K`` =
:data:`SHARPNESS`, which fits the real cases' descriptions best between 10 and 15 by
log-likelihood of the right cause), normalised over *all* causes into ``p(x)`` — the leaders, the
causes nothing points at yet and those evidence speaks against alike; a cause the facts rule out
keeps a small weight rather than none. ``H(p)`` is its entropy in bits.

**When a question may be asked.** Its fact is not known — stated, derived, implied by another
fact (``implies`` in the KB) or set from a log or probe — nor answered "don't know", and its
premise (``asked_when``) holds on what is known: hang questions only for a hang, container
questions once a container is known, launcher flags only for that launcher.

**Yes/no and choice questions.** The answers are yes/no, the choices, or one value either side of
every bound a rule tests (:func:`answer_options`), plus "don't know". Each answer ``a`` is
simulated — chained forward from the current facts — and moves each cause by
``L_a(x) = exp(K · (cf_a(x) − cf(x)))``; the engine's belief after it is ``b_a ∝ p · L_a``.
Read as a likelihood, normalised over the answers, ``P(a | x) = (1 − d) · L_a(x) / Σ_b L_b(x)``
(a cause no answer moves finds every answer equally likely), with ``d`` the chance of "don't
know", which changes nothing — learned per fact from the incident library (how often reporters of
the causes it bears on knew it; :mod:`engine.consult_model`). So ``P(a) = Σ_x p(x) · P(a | x)``:
answers count as much as the current beliefs make them likely.

**Evidence questions** (the first error line, versions, the launch command, what changed) have a
free-text answer read by the same matching as descriptions and logs. Their outcomes are "the
answer shows evidence for cause ``c``", one per cause whose rules the answer could reach through
the facts it can set, and "nothing new" (don't know included), which changes nothing:
``P(shows c | x) = r(c) · [x = c]``, and showing it moves ``c`` by ``s(c)``:
``L(c) = exp(K · (cf_c ⊕ s(c) − cf_c))``. Both come from the incident library: each incident's own
answer (its log lines, or the revealed facts its reporter knew) is simulated, and ``r(c)`` is the
share of ``c``'s incidents whose answer raised ``c``, ``s(c)`` their mean lift, both smoothed
toward pooled values (:mod:`engine.consult_model`). Only what the answer can still tell counts:
the revealed facts not yet known firmly (answered, given, probed or logged; a fact read from the
user's words may still be corrected).

**Gain.** ``gain = Σ_o P(o) · (H(p) − H(b_o))`` over the outcomes ``o`` of a question: the
expected drop in entropy, yes/no and evidence questions on one scale. Gain is myopic (a rule
needing two unknown facts gains nothing from either alone; a premise question gains nothing from
the questions it opens), so the score adds ``RELEVANCE_WEIGHT ×`` the belief mass of the causes
the fact can move — through rules, or through the questions whose premise reads it — each weighed
by the chance its reporter can answer at all (``1 − d``, as above): a question hardly anyone can
answer earns no bonus for what an answer could have opened. A question is offered when its gain
reaches :data:`MIN_GAIN` or that mass :data:`MIN_RELEVANCE`; when none is, nothing useful is left
to ask.
"""
from __future__ import annotations

import heapq
import math
import weakref
from functools import partial
from collections.abc import Callable, Iterable, Mapping
from operator import mul
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # pragma: no cover - the format's one definition, for type checkers
    from ..kb.schema import Condition, Fact
from .certainty import combine
from .chaining import Inference, answers_evidence, extend, ready_rules
from .compiled import CompiledKB, direct_predicates
from .consult_model import ConsultModel, EvidenceReach
from .language import fact_texts, pick
from .memory import FactRecord, Source
from .results import Question
from .values import Value, coerce, parse_version

__all__ = ["answer_options", "leading_causes", "rank_questions", "ranking", "Ranking", "simulate", "make_question", "ConsultModel",
           "MIN_GAIN", "LEADING", "SHARPNESS"]

SHARPNESS = 10.0
#: At most this many yes/no and choice questions are simulated per turn: those whose rules can
#: move the most belief (Σ p(x) × the strongest evidence on x the fact can reach).
SIMULATED = 24
#: ... and, for each of this many causes believed most, the question that moves it most (when
#: the first :data:`SIMULATED` hold none that moves it as strongly): :func:`_shortlist`.
DECIDERS = 10
MIN_GAIN = 0.01
MIN_RELEVANCE = 0.02
RELEVANCE_WEIGHT = 0.05
#: The causes :func:`leading_causes` returns for explanations (why a question is asked).
LEADING = 8
_LN2 = math.log(2)
_SIMULATED = Source("answer", "simulated")


def _literals(cond: Condition, out: dict[str, list[object]]) -> None:
    if cond.fact is not None:
        for key in ("eq", "ne", "lt", "le", "gt", "ge"):
            value = getattr(cond, key)
            if value is not None:
                out.setdefault(cond.fact, []).append(value)
        for value in cond.in_ or []:
            out.setdefault(cond.fact, []).append(value)
        return
    for part in cond.all or cond.any or ([cond.not_] if cond.not_ else []):
        _literals(part, out)


def answer_options(ckb: CompiledKB) -> dict[str, list[Value]]:
    """The answers worth simulating for each askable fact.

    bool: yes/no; choice: its choices; number and version: one value on each side of every
    bound the rules test; text: the literal values the rules compare with. Evidence questions
    have none (their outcomes are estimated, see the module's docstring).
    """
    literals: dict[str, list[object]] = {}
    for rule in ckb.rules:
        _literals(rule.rule.when, literals)
    options: dict[str, list[Value]] = {}
    for fact in ckb.kb.facts.values():
        if (fact.question is None and not fact.probes) or fact.get("evidence"):
            continue
        if fact.type == "bool":
            options[fact.id] = [True, False]
        elif fact.type == "choice":
            options[fact.id] = list(fact.choices)
        elif fact.type == "number":
            bounds = sorted({float(v) for v in literals.get(fact.id, []) if _is_number(v)})
            if bounds:
                points = [bounds[0] - 1] + [(a + b) / 2 for a, b in zip(bounds, bounds[1:])] + [bounds[-1] + 1]
                options[fact.id] = [int(p) if float(p).is_integer() else p for p in points]
        elif fact.type == "version":
            found = sorted({parse_version(v) for v in literals.get(fact.id, [])} - {None})
            if found:
                values = [_version_below(found[0])] + [".".join(map(str, v)) for v in found]
                options[fact.id] = values
        else:
            values = [str(v) for v in literals.get(fact.id, [])]
            if values:
                options[fact.id] = list(dict.fromkeys(values)) + ["something else"]
    return options


def _is_number(value: object) -> bool:
    try:
        float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return not isinstance(value, bool)


def _version_below(version: tuple[int, ...]) -> str:
    parts = list(version)
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] > 0:
            parts[i] -= 1
            return ".".join(map(str, parts))
    return "0"


def _clamp(value: float, bound: float) -> float:
    """Certainties live in [-1, 1]; a damaged state must not overflow exp()."""
    return max(-bound, min(bound, value)) if value == value else 0.0


#: Per compiled KB (by id, with the KB itself to check it), the weights with no certainty at all.
_BASE_BELIEFS: dict[int, tuple[CompiledKB, dict[str, float], dict[str, float]]] = {}


class _Beliefs:
    """``w(x)`` over all causes with the sums that give the entropy, updated for a few causes
    in O(changed) (``H = ln W − S / W`` with ``W = Σ w`` and ``S = Σ w ln w``)."""

    def __init__(self, ckb: CompiledKB, certainties: Mapping[str, float]):
        self.cf = certainties
        base = _base_beliefs(ckb)
        # most causes have no certainty: their w(x) is their prior, the same every turn; the dicts
        # keep the causes' order, so the sums below add the same terms in the same order
        self.base_w, self.base_w_ln_w = base[1], base[2]  # what w(x) is for a cause with no certainty
        w, w_ln_w = dict(base[1]), dict(base[2])
        for cause, cf in certainties.items():
            old = w.get(cause)
            if old is None:
                continue
            new = w[cause] = ckb.priors[cause] * math.exp(SHARPNESS * _clamp(cf, 1.0))
            if (new > 0) != (cause in w_ln_w):  # a weight gone to 0 (or back): the plain way
                w, w_ln_w = self._weights(ckb, certainties)
                break
            if new > 0:
                w_ln_w[cause] = new * math.log(new)
        self.w, self._w_ln_w = w, w_ln_w
        self.total = sum(w.values()) or 1.0
        self.s = sum(w_ln_w.values())
        self.entropy = self.entropy_with({})

    @staticmethod
    def _weights(ckb: CompiledKB, certainties: Mapping[str, float]) -> tuple[dict[str, float], dict[str, float]]:
        w = {c: ckb.priors[c] * math.exp(SHARPNESS * _clamp(certainties.get(c, 0.0), 1.0)) for c in ckb.kb.causes}
        return w, {c: v * math.log(v) for c, v in w.items() if v > 0}

    def entropy_with(self, factor: Mapping[str, float]) -> float:
        """Entropy (bits) of the beliefs with ``w(x)`` multiplied by ``factor[x]``."""
        total, s = self.total, self.s
        w, w_ln_w = self.w, self._w_ln_w
        for cause, f in factor.items():
            old = w.get(cause)
            if old is None or f == 1.0:
                continue
            dw, ds = _weight_change(old, f, w_ln_w.get(cause))
            total += dw
            s += ds
        return _entropy(total, s)

    def entropy_one(self, cause: str, f: float) -> float:
        """``entropy_with({cause: f})``, the same operations without the mapping."""
        old = self.w.get(cause)
        if old is None or f == 1.0:
            return self.entropy
        dw, ds = _weight_change(old, f, self._w_ln_w.get(cause))
        return _entropy(self.total + dw, self.s + ds)

    def mass(self, causes: Iterable[str]) -> float:
        return sum(self.w.get(c, 0.0) for c in causes) / self.total


def _weight_change(old: float, f: float, before: float | None) -> tuple[float, float]:
    """The changes to ``W`` and ``S`` when a weight ``old`` (whose ``w ln w`` is ``before``, when
    kept) is multiplied by ``f``."""
    new = old * f
    return new - old, (new * math.log(new) if new > 0 else 0.0) - (before if before is not None else old * math.log(old))


def _entropy(total: float, s: float) -> float:
    """Entropy in bits from ``W`` and ``S`` (``H = ln W − S / W``)."""
    if total <= 0:
        return 0.0
    return max((math.log(total) - s / total) / _LN2, 0.0)


def _base_beliefs(ckb: CompiledKB) -> tuple[CompiledKB, dict[str, float], dict[str, float]]:
    """``(ckb, w, w ln w)`` with no certainty at all, kept per KB."""
    base = _BASE_BELIEFS.get(id(ckb))
    if base is None or base[0] is not ckb:
        if len(_BASE_BELIEFS) >= 4:  # the few most recent KBs (tests load several)
            _BASE_BELIEFS.clear()
        base = _BASE_BELIEFS[id(ckb)] = (ckb, *_Beliefs._weights(ckb, {}))
    return base


def fact_gain(beliefs: _Beliefs, moves: list[dict[str, float]],
              known: Callable[[str, bool], float] | None = None) -> float:
    """Expected entropy drop of a yes/no or choice question (module docstring). ``moves`` holds,
    per answer, ``L_a(x)`` for the causes that answer moves (1 elsewhere); ``known(x, moved)``
    is ``1 − d`` when ``x`` is the cause (always 1 when not given); the causes no answer moves
    share ``known(None, False)``."""
    n = len(moves)
    if n == 0:
        return 0.0
    moved = set().union(*moves)
    if not moved:  # no answer moves anything: every term below is 0
        return 0.0
    known = known or (lambda cause, moved: 1.0)
    w = beliefs.w
    # per moved cause, w(x)·(1 − d) and Σ_a L_a(x), computed once; the sums run in the same
    # order and the products in the same grouping as the formula's, so the gain is the same
    terms = [(x, w.get(x, 0.0) * known(x, True), sum(m.get(x, 1.0) for m in moves)) for x in moved]
    unmoved = (beliefs.total - sum(w.get(x, 0.0) for x in moved)) * known(None, False)
    gain = 0.0
    for move in moves:
        if not move:  # an answer that moves nothing leaves the entropy as it is: it adds 0
            continue
        likely = unmoved / n + sum(wx * move.get(x, 1.0) / norm for x, wx, norm in terms)
        gain += likely / beliefs.total * (beliefs.entropy - beliefs.entropy_with(move))
    return gain


def evidence_gain(beliefs: _Beliefs, reach: EvidenceReach) -> float:
    """Expected entropy drop of an evidence question (module docstring)."""
    gain = 0.0
    w, total, cf, entropy = beliefs.w, beliefs.total, beliefs.cf, beliefs.entropy
    unraised = _unraised_terms(beliefs, reach)
    s = beliefs.s
    for cause, rate in reach.rate.items():
        now = cf.get(cause)
        if now is None:
            # a cause with no certainty: w(x) is its base weight, and the lift and the changes
            # ``entropy_one`` makes to W and S depend on the reach alone (kept, same operations)
            rw, change = unraised[cause]
            p_shows = rw / total
            if p_shows <= 1e-6:
                continue
            if change is not None:  # (None: ``entropy_one`` would return the entropy itself, a term of 0)
                gain += p_shows * (entropy - _entropy(total + change[0], s + change[1]))
            continue
        p_shows = rate * w.get(cause, 0.0) / total
        if p_shows <= 1e-6:
            continue
        lift = math.exp(SHARPNESS * _clamp(combine(now, reach.strength[cause]) - now, 2.0))
        gain += p_shows * (entropy - beliefs.entropy_one(cause, lift))
    return gain


#: Per evidence reach (by id, with the reach and the base weights to check it), for each cause
#: the terms of :func:`evidence_gain` while it has no certainty: ``rate · w(x)`` and the changes
#: to W and S its lift makes (None when the lift leaves the entropy as it is): most causes, the
#: same every turn.
_UNRAISED_TERMS: dict[int, tuple[EvidenceReach, dict[str, float], dict[str, tuple[float, tuple[float, float] | None]]]] = {}


def _unraised_terms(beliefs: _Beliefs, reach: EvidenceReach) -> dict[str, tuple[float, tuple[float, float] | None]]:
    found = _UNRAISED_TERMS.get(id(reach))
    if found is None or found[0] is not reach or found[1] is not beliefs.base_w:
        if len(_UNRAISED_TERMS) >= 4096:
            _UNRAISED_TERMS.clear()
        base_w, base_w_ln_w = beliefs.base_w, beliefs.base_w_ln_w
        terms = {}
        for cause, rate in reach.rate.items():
            old = base_w.get(cause)
            rw = rate * (old if old is not None else 0.0)
            change = None
            # entropy_one's terms, computed only where it is reached (p(shows) above 1e-6)
            if old is not None:
                lift = math.exp(SHARPNESS * _clamp(combine(0.0, reach.strength[cause]) - 0.0, 2.0))
                if lift != 1.0 and old > 0:
                    change = _weight_change(old, lift, base_w_ln_w.get(cause))
            terms[cause] = (rw, change)
        found = _UNRAISED_TERMS[id(reach)] = (reach, base_w, terms)
    return found[2]


def _separates(moves: list[dict[str, float]]) -> list[str]:
    """Causes whose certainty differs by more than 0.02 between two answers."""
    out = []
    for cause in set().union(*moves) if moves else ():
        factors = [m.get(cause, 1.0) for m in moves]
        if math.log(max(factors) / min(factors)) > SHARPNESS * 0.02:
            out.append(cause)
    return out


def leading_causes(ckb: CompiledKB, certainties: Mapping[str, float], limit: int = LEADING) -> list[str]:
    """The causes an explanation names: those with support first, then the most common."""
    raised = sorted((c for c, v in certainties.items() if v > 0), key=lambda c: (-certainties[c], -ckb.priors[c], c))
    if len(raised) >= limit:
        return raised[:limit]
    rest = sorted((c for c in ckb.kb.causes if c not in certainties or certainties[c] <= 0),
                  key=lambda c: (-ckb.priors[c], c))
    return raised + rest[: (limit - len(raised)) if not raised else max(0, 3 - len(raised))]


def simulate(ckb: CompiledKB, state: Inference, fact: Fact, value: Value) -> Inference:
    """The inference as it would be after answering ``fact = value``."""
    record = FactRecord(fact.id, coerce(value, fact.type, fact.choices), Source("answer", "simulated"))
    return extend(ckb, state, {fact.id: record})


def askable(ckb: CompiledKB, state: Inference, fact_id: str) -> bool:
    """The fact is unknown and its question's premise holds on what is known."""
    if fact_id in state.facts:
        return False
    premise = ckb.premises.get(fact_id)
    return premise is None or premise(state.facts)[0] is True


def make_question(fact: Fact, gain: float, separates: list[str], lang: str) -> Question:
    """The question for ``fact``, its text in ``lang`` and every language in ``texts``."""
    texts = fact_texts(fact)
    labels = dict(pick(texts, "choices", lang) or {})
    if lang != "en" and not texts[lang]["text"]:
        labels = texts["en"]["choices"]
    return Question(fact.id, pick(texts, "text", lang), fact.type, list(fact.choices),
                    pick(texts, "help", lang) if texts[lang]["text"] else texts["en"]["help"], gain,
                    separates, "evidence" if fact.get("evidence") else "fact", labels, texts)


class _Row(NamedTuple):
    """What ranking reads of one fact every turn (see :func:`_rows`)."""

    fact_id: str
    records: list
    bears_on: tuple[str, ...]
    chance: tuple[float, ...]
    move_causes: tuple[str, ...]
    move_strengths: tuple[float, ...]
    question: bool
    probes: bool
    causes: frozenset[str]  # bears_on and move_causes: the weights the sums below read
    #: Σ w(c) over bears_on, Σ w(c)·strength over the strongest moves and Σ w(c)·chance over
    #: bears_on, with every weight its base one (no cause with a certainty): the sums of a turn
    #: where none of ``causes`` has one, the same terms in the same order
    relevance: float
    potential: float
    reachable: float


_ROWS: weakref.WeakKeyDictionary[ConsultModel, tuple[dict[str, float], list[_Row]]] = weakref.WeakKeyDictionary()


def _rows(model: ConsultModel) -> list[_Row]:
    """Per fact a question could be asked about, in the model's order, what ranking reads of it
    every turn: its simulated answers, the causes it bears on with the chance of an answer for
    each, the causes its answers can move most with that strength, whether it has a question
    and probes, and its sums on the base weights. Facts that bear on no cause are left out (they
    are never offered)."""
    base = _base_beliefs(model._ckb)[1]
    kept = _ROWS.get(model)
    if kept is None or kept[0] is not base:
        facts = model._ckb.kb.facts
        weight = base.__getitem__
        rows = []
        for fact_id, records in model.records.items():
            bears_on = model.bears_on[fact_id]
            if not bears_on:
                continue
            chance = model.answer_chance[fact_id]
            moves = model.moves.get(fact_id, {})
            fact = facts[fact_id]
            chances, move_causes, move_strengths = tuple(chance[c] for c in bears_on), tuple(moves), tuple(moves.values())
            rows.append(_Row(fact_id, records, bears_on, chances, move_causes, move_strengths,
                             fact.question is not None, bool(fact.probes), frozenset(bears_on) | frozenset(move_causes),
                             sum(map(weight, bears_on)), sum(map(mul, map(weight, move_causes), move_strengths)),
                             sum(map(mul, map(weight, bears_on), chances))))
        kept = _ROWS[model] = (base, rows)
    return kept[1]


def _shortlist(candidates: list[tuple], weights: Mapping[str, float]) -> set[str]:
    """The questions simulated this turn: the :data:`SIMULATED` first by potential, and for each
    of the :data:`DECIDERS` causes believed most, the question that moves it most strongly.

    Potential (belief times strength, summed) favours questions about the leading cause or about
    many causes at once; the question that alone would settle the fifth or seventh cause (an
    inference engine's own switch while common training causes lead on their priors) scores low
    and would never be simulated, so its gain would never be weighed against the others.
    ``candidates`` come sorted by potential as (potential, fact, row, relevance); a row holds its
    fact's strongest moves (``move_causes``, ``move_strengths``)."""
    chosen = {c[1] for c in candidates[:SIMULATED]}
    leaders = set(heapq.nsmallest(DECIDERS, weights, key=lambda c: (-weights[c], c)))
    best: dict[str, tuple[float, str]] = {}  # leading cause: (strongest move on it, its fact)
    for candidate in candidates:  # by potential: of equal strengths the shortlisted one stays
        row = candidate[2]
        for cause, strength in zip(row.move_causes, row.move_strengths):
            if cause in leaders and strength > best.get(cause, (0.0, ""))[0]:
                best[cause] = (strength, candidate[1])
    chosen.update(fact_id for _, fact_id in best.values())
    return chosen


def rank_questions(
    ckb: CompiledKB,
    state: Inference,
    model: ConsultModel,
    skip: Iterable[str] = (),
    limit: int = 3,
    by_probe: bool = False,
    lang: str = "en",
) -> list[Question]:
    """The best questions to ask now, best first (empty when none is worth asking).

    With ``by_probe`` the candidates are the facts a probe can establish instead of the facts
    with a question for the user.
    """
    return ranking(ckb, state, model, skip, limit, by_probe, lang).first(limit)


class Ranking:
    """The best ``limit`` questions of a turn, in order, each made into a :class:`Question` (its
    texts, the causes it separates) only when asked for: a view shows three of the ten a session
    keeps for its next calls."""

    def __init__(self, chosen: list[tuple[float, str, list[str] | None, list[dict[str, float]] | None]],
                 facts: Mapping[str, Fact], bears_on: Mapping[str, tuple[str, ...]], weights: Mapping[str, float],
                 lang: str) -> None:
        self._chosen, self._facts, self._bears_on, self._weights, self._lang = chosen, facts, bears_on, weights, lang
        self._made: list[Question] = []

    def __len__(self) -> int:
        return len(self._chosen)

    def first(self, limit: int) -> list[Question]:
        """The best ``limit`` questions (at most as many as were ranked)."""
        weights = self._weights
        for score, fact_id, separates, moves in self._chosen[len(self._made):limit]:
            if separates is None:  # a yes/no or choice question: those its answers move, else all it bears on
                separates = (_separates(moves) if moves else []) or sorted(self._bears_on[fact_id])
            # the LEADING first of sorted(separates, key=...): the keys are distinct, so the same list
            order = heapq.nsmallest(LEADING, separates, key=lambda c: (-weights.get(c, 0.0), c))
            self._made.append(make_question(self._facts[fact_id], score, order, self._lang))
        return self._made[:limit]


def ranking(
    ckb: CompiledKB,
    state: Inference,
    model: ConsultModel,
    skip: Iterable[str] = (),
    limit: int = 3,
    by_probe: bool = False,
    lang: str = "en",
) -> Ranking:
    """:func:`rank_questions`'s best ``limit`` questions, made into questions as they are read."""
    certainties = state.certainties()
    beliefs = _Beliefs(ckb, certainties)
    skipped = set(skip)
    scored: list[tuple[float, str, float, list[str] | None, list[dict[str, float]] | None]] = []
    facts = ckb.kb.facts
    candidates = []
    known, premises = state.facts, direct_predicates(ckb)[1]
    weight, total = beliefs.w.__getitem__, beliefs.total
    # the sums below add the same products in the same order as Σ w(c)·… over ``bears_on`` (and
    # over the fact's strongest moves), through map() rather than a generator: same floats; a
    # weight differs from its base one only for a cause with a certainty, so a fact none of whose
    # causes has one takes the sums kept in its row (the same terms in the same order)
    weighed = frozenset(certainties)  # the causes whose w(x) may differ from its base one
    for row in _rows(model):
        fact_id = row.fact_id
        if fact_id in skipped or (not row.probes if by_probe else not row.question) or fact_id in known:
            continue
        premise = premises.get(fact_id)  # askable(): unknown, and the question's premise holds
        if premise is not None and premise(known)[0] is not True:
            continue
        if row.causes.isdisjoint(weighed):
            relevance, potential = row.relevance / total, row.potential / total
        else:
            relevance = sum(map(weight, row.bears_on)) / total
            potential = sum(map(mul, map(weight, row.move_causes), row.move_strengths)) / total
        candidates.append((potential, fact_id, row, relevance))
    candidates.sort(key=lambda c: (-c[0], c[1]))
    shortlist = _shortlist(candidates, beliefs.w)
    ready = ready_rules(ckb, state, [c[1] for c in candidates if c[1] in shortlist])

    def reachable(row: _Row) -> float:
        if row.causes.isdisjoint(weighed):
            return row.reachable / total
        return sum(map(mul, map(weight, row.bears_on), row.chance)) / total

    for potential, fact_id, row, relevance in candidates:
        if fact_id not in shortlist:
            if relevance >= MIN_RELEVANCE:  # most are not: their reach is summed only when it counts
                scored.append((RELEVANCE_WEIGHT * reachable(row), fact_id, 0.0, None, None))  # separates: below
            continue
        records = row.records
        moves: list[dict[str, float]] = []
        if ready.get(fact_id):  # else no rule can fire on any answer: nothing to simulate
            for evidence in answers_evidence(ckb, state, fact_id, records, ready):
                move = {}
                for cause, contributions in evidence.items():
                    now = certainties.get(cause, 0.0)
                    after = now
                    for value in contributions:
                        after = combine(after, value)
                    if abs(after - now) > 1e-9:
                        move[cause] = math.exp(SHARPNESS * _clamp(after - now, 2.0))
                moves.append(move)
        gain = fact_gain(beliefs, moves, partial(model.known_given, fact_id))
        if gain < MIN_GAIN and relevance < MIN_RELEVANCE:
            continue
        scored.append((gain + RELEVANCE_WEIGHT * reachable(row), fact_id, gain, None, moves))  # separates: below
    if not by_probe:
        for fact_id in model.evidence:
            if fact_id in skipped or not askable(ckb, state, fact_id):
                continue
            reach = model.reach(fact_id, state.facts)
            gain = evidence_gain(beliefs, reach)
            relevance = beliefs.mass(reach.rate)
            if gain < MIN_GAIN and relevance < MIN_RELEVANCE:
                continue
            scored.append((gain + RELEVANCE_WEIGHT * relevance, fact_id, gain, sorted(reach.rate), None))
    # the first ``limit`` of scored.sort(key=...) (the keys are distinct: the same list); the
    # causes a simulated question separates are found only for the questions returned
    chosen = heapq.nsmallest(limit, scored, key=lambda item: (-round(item[0], 6), item[1]))
    return Ranking([(score, fact_id, separates, moves) for score, fact_id, _, separates, moves in chosen],
                   facts, model.bears_on, beliefs.w, lang)
