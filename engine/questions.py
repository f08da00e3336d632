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
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - the format's one definition, for type checkers
    from ..kb.schema import Condition, Fact
from .certainty import combine
from .chaining import Inference, answers_evidence, extend, ready_rules
from .compiled import CompiledKB
from .consult_model import ConsultModel, EvidenceReach
from .language import fact_texts, pick
from .memory import FactRecord, Source
from .results import Question
from .values import Value, coerce, parse_version

__all__ = ["answer_options", "leading_causes", "rank_questions", "simulate", "make_question", "ConsultModel",
           "MIN_GAIN", "LEADING", "SHARPNESS"]

SHARPNESS = 10.0
#: At most this many yes/no and choice questions are simulated per turn: those whose rules can
#: move the most belief (Σ p(x) × the strongest evidence on x the fact can reach).
SIMULATED = 24
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
        base = _BASE_BELIEFS.get(id(ckb))
        if base is None or base[0] is not ckb:
            if len(_BASE_BELIEFS) >= 4:  # the few most recent KBs (tests load several)
                _BASE_BELIEFS.clear()
            base = _BASE_BELIEFS[id(ckb)] = (ckb, *self._weights(ckb, {}))
        # most causes have no certainty: their w(x) is their prior, the same every turn; the dicts
        # keep the causes' order, so the sums below add the same terms in the same order
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
            new = old * f
            total += new - old
            before = w_ln_w.get(cause)
            s += (new * math.log(new) if new > 0 else 0.0) - (before if before is not None else old * math.log(old))
        if total <= 0:
            return 0.0
        return max((math.log(total) - s / total) / _LN2, 0.0)

    def entropy_one(self, cause: str, f: float) -> float:
        """``entropy_with({cause: f})``, the same operations without the mapping."""
        old = self.w.get(cause)
        if old is None or f == 1.0:
            return self.entropy
        new = old * f
        total = self.total + (new - old)
        before = self._w_ln_w.get(cause)
        s = self.s + ((new * math.log(new) if new > 0 else 0.0) - (before if before is not None else old * math.log(old)))
        if total <= 0:
            return 0.0
        return max((math.log(total) - s / total) / _LN2, 0.0)

    def mass(self, causes: Iterable[str]) -> float:
        return sum(self.w.get(c, 0.0) for c in causes) / self.total


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
    lifts = _UNRAISED_LIFTS.get(id(reach))
    if lifts is None or lifts[0] is not reach:
        if len(_UNRAISED_LIFTS) >= 4096:
            _UNRAISED_LIFTS.clear()
        lifts = _UNRAISED_LIFTS[id(reach)] = (reach, {})
    unraised = lifts[1]  # the lift of a cause with no certainty yet depends on the reach alone
    for cause, rate in reach.rate.items():
        p_shows = rate * w.get(cause, 0.0) / total
        if p_shows <= 1e-6:
            continue
        now = cf.get(cause)
        if now is None:
            lift = unraised.get(cause)
            if lift is None:
                lift = unraised[cause] = math.exp(SHARPNESS * _clamp(combine(0.0, reach.strength[cause]) - 0.0, 2.0))
        else:
            lift = math.exp(SHARPNESS * _clamp(combine(now, reach.strength[cause]) - now, 2.0))
        gain += p_shows * (entropy - beliefs.entropy_one(cause, lift))
    return gain


#: Per evidence reach (by id, with the reach to check it), the lift of each cause that has no
#: certainty yet: most causes, the same every turn.
_UNRAISED_LIFTS: dict[int, tuple[EvidenceReach, dict[str, float]]] = {}


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


_Row = tuple[str, list, tuple[str, ...], tuple[float, ...], tuple[str, ...], tuple[float, ...], bool, bool]
_ROWS: weakref.WeakKeyDictionary[ConsultModel, list[_Row]] = weakref.WeakKeyDictionary()


def _rows(model: ConsultModel) -> list[_Row]:
    """Per fact a question could be asked about, in the model's order, what ranking reads of it
    every turn: its simulated answers, the causes it bears on with the chance of an answer for
    each, the causes its answers can move most with that strength, and whether it has a question
    and probes. Facts that bear on no cause are left out (they are never offered)."""
    rows = _ROWS.get(model)
    if rows is None:
        facts = model._ckb.kb.facts
        rows = []
        for fact_id, records in model.records.items():
            bears_on = model.bears_on[fact_id]
            if not bears_on:
                continue
            chance = model.answer_chance[fact_id]
            moves = model.moves.get(fact_id, {})
            fact = facts[fact_id]
            rows.append((fact_id, records, bears_on, tuple(chance[c] for c in bears_on), tuple(moves),
                         tuple(moves.values()), fact.question is not None, bool(fact.probes)))
        _ROWS[model] = rows
    return rows


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
    certainties = state.certainties()
    beliefs = _Beliefs(ckb, certainties)
    skipped = set(skip)
    scored: list[tuple[float, str, float, list[str] | None, list[dict[str, float]] | None]] = []
    facts = ckb.kb.facts
    candidates = []
    known, premises = state.facts, ckb.premises
    weight, total = beliefs.w.__getitem__, beliefs.total
    # the sums below add the same products in the same order as Σ w(c)·… over ``bears_on`` (and
    # over the fact's strongest moves), through map() rather than a generator: same floats
    for fact_id, records, bears_on, chance, move_causes, move_strengths, question, probes in _rows(model):
        if fact_id in skipped or (not probes if by_probe else not question) or fact_id in known:
            continue
        premise = premises.get(fact_id)  # askable(): unknown, and the question's premise holds
        if premise is not None and premise(known)[0] is not True:
            continue
        relevance = sum(map(weight, bears_on)) / total
        potential = sum(map(mul, map(weight, move_causes), move_strengths)) / total
        candidates.append((potential, fact_id, records, relevance, bears_on, chance))
    candidates.sort(key=lambda c: (-c[0], c[1]))
    ready = ready_rules(ckb, state, [c[1] for c in candidates[:SIMULATED]])
    for rank, (potential, fact_id, records, relevance, bears_on, chance) in enumerate(candidates):
        if rank >= SIMULATED:
            if relevance >= MIN_RELEVANCE:  # most are not: their reach is summed only when it counts
                reachable = sum(map(mul, map(weight, bears_on), chance)) / total
                scored.append((RELEVANCE_WEIGHT * reachable, fact_id, 0.0, None, None))  # separates: below
            continue
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
        reachable = sum(map(mul, map(weight, bears_on), chance)) / total
        scored.append((gain + RELEVANCE_WEIGHT * reachable, fact_id, gain, None, moves))  # separates: below
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
    out = []
    weights = beliefs.w
    # the first ``limit`` of scored.sort(key=...) (the keys are distinct: the same list); the
    # causes a simulated question separates are found only for the questions returned
    for score, fact_id, _, separates, moves in heapq.nsmallest(limit, scored, key=lambda item: (-round(item[0], 6), item[1])):
        if separates is None:  # a yes/no or choice question: those its answers move, else all it bears on
            separates = (_separates(moves) if moves else []) or sorted(model.bears_on[fact_id])
        # the LEADING first of sorted(separates, key=...): the keys are distinct, so the same list
        order = heapq.nsmallest(LEADING, separates, key=lambda c: (-weights.get(c, 0.0), c))
        out.append(make_question(facts[fact_id], score, order, lang))
    return out
