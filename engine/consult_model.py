"""What question ranking learns once per KB: the answers to simulate, which questions a fact's
value opens, and — from the incident library — how likely a reporter is to know a fact and what
an evidence question's answer shows for the cause it came from.

From the incidents (each with its cause and a ``knows:`` map of what its reporter could tell):

- **the chance of an answer** to a yes/no or choice question about fact ``F`` when ``c`` is the
  cause: the share of ``c``'s incidents whose reporter knew ``F``, smoothed toward the share among
  incidents of all the causes ``F`` bears on (or, for a cause it does not bear on, among all
  incidents), each smoothed toward ``1 − DONT_KNOW`` (``(k + M·p0) / (n + M)``);
- **evidence questions**: each incident's own answer is simulated — its log lines for the log
  question, the revealed facts it knows for the others — on top of what else it knows, and the
  change in its cause's certainty kept (``incident_lifts``; the KB artifact stores them, so a start
  does not recompute them). For a cause ``c``, ``r(c)`` is the smoothed share of its incidents
  whose answer raised it (toward the pooled share over all causes the question can reach) and
  ``s(c)`` their mean lift (toward the strongest rule the revealed facts reach). Causes without
  incidents take the pooled values. An answer can only show what the session does not know yet:
  the versions, launch command or what changed that the user already gave reveal nothing again.
  So each revealed fact's own lift is kept too (``fact_lifts``), and :meth:`ConsultModel.reach`
  estimates ``r`` and ``s`` from the facts not yet known firmly (their lifts combined) - a fact
  read from the user's words still counts, the answer may correct it.

A benchmark scoring an incident leaves it out (:meth:`ConsultModel.leaving_out`).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from .certainty import combine
from .chaining import consequences, infer
from .compiled import IMPLIES, CompiledKB
from .conditions import condition_facts
from .matching import scan_lines
from .memory import FactRecord, Source
from .values import Value, ValueProblem, coerce

__all__ = ["ConsultModel", "EvidenceReach", "incident_lifts", "artifact_part", "reporter_knowledge", "DONT_KNOW",
           "REVEAL_DEFAULT", "SHOWS"]

#: The chance of "don't know" to a yes/no or choice question, without incidents to go by.
DONT_KNOW = 0.3
#: The chance an evidence question's answer shows something for a cause, without incidents.
REVEAL_DEFAULT = 0.3
#: A lift above this counts as "the answer showed evidence for its cause".
SHOWS = 0.05
#: Weight of the prior in the smoothed shares (pseudo-incidents).
PRIOR_WEIGHT = 2.0
#: Reaches kept per model for (evidence question, revealed facts still unknown).
_REACH_CACHE = 512
#: Sources whose facts an evidence question's answer would not change.
_FIRM = frozenset({"answer", "cli", "probe", "log"})
_SIMULATED = Source("answer", "simulated")
_LOG_GIVEN = "log_given"


class EvidenceReach(NamedTuple):
    """What an evidence question's answer could show: per cause, the chance it shows evidence
    for that cause when it is the cause (``rate``) and how far it moves it (``strength``)."""

    rate: dict[str, float]
    strength: dict[str, float]


class ConsultModel:
    """Computed once per Doctor (``lifts`` from the KB artifact, else simulated on first use)."""

    def __init__(self, ckb: CompiledKB, options: Mapping[str, list[Value]],
                 saved: Mapping[str, Any] | None = None):
        """``saved``: :func:`artifact_part` of this KB, as the KB artifact keeps it."""
        kb = ckb.kb
        self._ckb = ckb
        self.records: dict[str, list[FactRecord]] = {}
        for fact_id, answers in options.items():
            fact = kb.facts[fact_id]
            records = []
            for answer in answers:
                try:
                    records.append(FactRecord(fact_id, coerce(answer, fact.type, fact.choices), _SIMULATED))
                except ValueProblem:
                    continue
            self.records[fact_id] = records
        opens: dict[str, set[str]] = defaultdict(set)
        for fact_id, fact in kb.facts.items():
            if fact.get("asked_when") is not None:
                for name in condition_facts(fact.asked_when):
                    opens[name].add(fact_id)
        self.opens = {name: frozenset(found) for name, found in opens.items()}
        #: Causes a fact bears on: through rules, or through the questions its value opens.
        self.bears_on: dict[str, tuple[str, ...]] = {}
        for fact_id in self.records:
            causes = set(ckb.influence.get(fact_id, ()))
            for opened in self.opens.get(fact_id, ()):
                causes |= ckb.influence.get(opened, frozenset())
            self.bears_on[fact_id] = tuple(sorted(causes))
        incidents = kb.get("incidents") or {}
        self._incidents = {i.id: i for i in incidents.values() if i.get("knows")}
        if saved is not None:
            self.moves, self._raising = saved["either"], saved["raising"]
            self._lifts, self._fact_lifts = saved["lifts"], saved["fact_lifts"]
        else:
            self.moves, self._raising = _strengths(ckb)
            self._lifts, self._fact_lifts = incident_lifts(ckb) if self._incidents else ({}, {})
        self._learn(frozenset())

    def leaving_out(self, incidents: Iterable[str]) -> "ConsultModel":
        """The same model with the given incidents left out of what it learned."""
        left_out = frozenset(incidents)
        if left_out == self._left_out:
            return self
        other = object.__new__(ConsultModel)
        other.__dict__.update(self.__dict__)
        other._learn(left_out)
        return other

    def _learn(self, left_out: frozenset[str]) -> None:
        self._left_out = left_out
        kb = self._ckb.kb
        by_cause: dict[str, list[Any]] = defaultdict(list)
        for incident in self._incidents.values():
            if incident.id not in left_out and incident.cause in kb.causes:
                by_cause[incident.cause].append(incident)
        self._known_rates(by_cause)
        self.answer_chance = {fact_id: {c: self.known_given(fact_id, c, True) for c in causes}
                              for fact_id, causes in self.bears_on.items()}
        self._by_cause = by_cause
        self._reaches: dict[tuple[str, frozenset[str] | None], EvidenceReach] = {}
        #: Each evidence question's reach when nothing it reveals is known yet.
        self.evidence = {fact_id: self._reach(fact_id, by_cause) for fact_id, fact in kb.facts.items()
                         if fact.get("evidence") and fact.question}

    def reach(self, fact_id: str, known: Mapping[str, FactRecord]) -> EvidenceReach:
        """What evidence question ``fact_id`` could still show, given the facts ``known`` now:
        only its revealed facts not yet known firmly count - a fact read from the user's own
        words (or derived from them) may still be corrected by the pasted command or versions,
        one answered, given on the command line, probed or logged will not change. The log
        question reveals whatever the log lines say, so it always has its full reach."""
        revealed = self._ckb.kb.facts[fact_id].get("reveals") or ()
        if not revealed:
            return self.evidence[fact_id]
        unknown = frozenset(name for name in revealed
                            if name not in known or known[name].source.kind not in _FIRM)
        if len(unknown) == len(revealed):
            return self.evidence[fact_id]
        key = (fact_id, unknown)
        found = self._reaches.get(key)
        if found is None:
            if len(self._reaches) >= _REACH_CACHE:
                self._reaches.clear()
            found = self._reaches[key] = self._reach(fact_id, self._by_cause, unknown)
        return found

    def _known_rates(self, by_cause: Mapping[str, list[Any]]) -> None:
        """``known[F]``: the share of all incidents whose reporter knew ``F`` (for causes ``F``
        does not bear on); ``known_relevant[F]``: the share among incidents of causes it bears on
        (a reporter tends to know what bears on the cause); :meth:`known_given` per cause."""
        prior = 1 - DONT_KNOW
        self._known_given: dict[tuple[str, str, bool], float] = {}  # what known_given computed from these rates
        self._per_cause = {cause: len(found) for cause, found in by_cause.items() if found}
        self._knew: dict[str, dict[str, int]] = defaultdict(dict)  # fact -> cause -> incidents that knew it
        for cause, found in by_cause.items():
            for incident in found:
                for name in incident.knows:
                    self._knew[name][cause] = self._knew[name].get(cause, 0) + 1
        everyone = sum(self._per_cause.values())
        self.known: dict[str, float] = {}
        self.known_relevant: dict[str, float] = {}
        for fact_id in self.bears_on:
            knew = self._knew.get(fact_id, {})
            bears = self._ckb.influence.get(fact_id, frozenset())
            near_n = sum(self._per_cause.get(c, 0) for c in bears)
            near_k = sum(knew.get(c, 0) for c in bears)
            self.known[fact_id] = (sum(knew.values()) + PRIOR_WEIGHT * prior) / (everyone + PRIOR_WEIGHT)
            self.known_relevant[fact_id] = (near_k + PRIOR_WEIGHT * prior) / (near_n + PRIOR_WEIGHT)

    def known_given(self, fact_id: str, cause: str, moved: bool) -> float:
        """The chance a reporter of ``cause`` knows ``fact_id``: the share of its incidents that
        did, smoothed toward ``known_relevant`` when the fact bears on it (``moved``), else
        toward ``known``. (A pure function of its arguments once learned: kept as computed,
        question ranking asks it thousands of times a turn.)"""
        key = (fact_id, cause, moved)
        found = self._known_given.get(key)
        if found is None:
            base = (self.known_relevant if moved else self.known).get(fact_id, 1 - DONT_KNOW)
            seen = self._per_cause.get(cause, 0)
            found = base if not seen else (self._knew.get(fact_id, {}).get(cause, 0) + PRIOR_WEIGHT * base) / (seen + PRIOR_WEIGHT)
            self._known_given[key] = found
        return found

    def _reach(self, fact_id: str, by_cause: Mapping[str, list[Any]],
               unknown: frozenset[str] | None = None) -> EvidenceReach:
        """``unknown``: the revealed facts still unknown (None: all of them)."""
        fact = self._ckb.kb.facts[fact_id]
        revealed = set(fact.get("reveals") or ())
        if unknown is not None:
            revealed &= unknown
        if fact.get("evidence") == "log":
            revealed |= {name for sig in self._ckb.kb.signatures.values() for name in sig.sets}
        static: dict[str, float] = {}
        for name in revealed:
            for cause, value in self._raising.get(name, {}).items():
                static[cause] = max(static.get(cause, 0.0), value)
        if unknown is None:
            lifts = self._lifts.get(fact_id, {})
        else:
            lifts = {}
            for incident, by_fact in self._fact_lifts.get(fact_id, {}).items():
                lift = 0.0
                for name, value in by_fact.items():
                    if name in unknown:
                        lift = combine(lift, value)
                if lift:
                    lifts[incident] = lift
        shown_total = tried_total = 0
        per_cause: dict[str, tuple[int, int, float]] = {}
        for cause in static:
            seen = [lifts.get(i.id, 0.0) for i in by_cause.get(cause, ())]
            shown = [v for v in seen if v > SHOWS]
            per_cause[cause] = (len(seen), len(shown), sum(shown))
            tried_total += len(seen)
            shown_total += len(shown)
        pooled = (shown_total + PRIOR_WEIGHT * REVEAL_DEFAULT) / (tried_total + PRIOR_WEIGHT)
        rate, strength = {}, {}
        for cause, (tried, shown, total) in per_cause.items():
            rate[cause] = (shown + PRIOR_WEIGHT * pooled) / (tried + PRIOR_WEIGHT)
            strength[cause] = (total + PRIOR_WEIGHT * static[cause]) / (shown + PRIOR_WEIGHT)
        return EvidenceReach(rate, strength)


def _strengths(ckb: CompiledKB) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """Per fact, per cause: the strongest evidence a rule reading the fact (or a fact derived from
    it, at any depth) can give — either way, and for it only."""
    either: dict[str, dict[str, float]] = defaultdict(dict)
    raising: dict[str, dict[str, float]] = defaultdict(dict)
    feeds: dict[str, set[str]] = defaultdict(set)
    for compiled in ckb.rules:
        for name in compiled.reads:
            for cause, strength in compiled.evidence:
                either[name][cause] = max(either[name].get(cause, 0.0), abs(strength))
                if strength > 0:
                    raising[name][cause] = max(raising[name].get(cause, 0.0), strength)
            feeds[name].update(name for name, _ in compiled.sets)
    out_either: dict[str, dict[str, float]] = {}
    out_raising: dict[str, dict[str, float]] = {}
    for start in ckb.kb.facts:
        seen, stack, best, up = {start}, [start], {}, {}
        while stack:
            name = stack.pop()
            for cause, value in either.get(name, {}).items():
                if value > best.get(cause, 0.0):
                    best[cause] = value
            for cause, value in raising.get(name, {}).items():
                if value > up.get(cause, 0.0):
                    up[cause] = value
            for nxt in feeds.get(name, ()):
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        if best:
            out_either[start] = best
        if up:
            out_raising[start] = up
    return out_either, out_raising


def artifact_part(ckb: CompiledKB) -> dict[str, Any]:
    """What the KB artifact keeps for the model, so a start does not recompute it."""
    either, raising = _strengths(ckb)
    lifts, fact_lifts = incident_lifts(ckb)
    return {"either": either, "raising": raising, "lifts": lifts, "fact_lifts": fact_lifts}


def _lift(ckb: CompiledKB, base: Any, new: Mapping[str, FactRecord], cause: str) -> float:
    """How far adding ``new`` to the inference ``base`` moves ``cause``'s certainty."""
    before = base.certainty(cause)
    _, evidence = consequences(ckb, base, new)
    after = before
    for value in evidence.get(cause, ()):
        after = combine(after, value)
    return after - before


def incident_lifts(ckb: CompiledKB) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, dict[str, float]]]]:
    """Per evidence question, per incident: how far the incident's own answer moves its cause's
    certainty, on top of the other facts its reporter knows; and, for the questions that reveal
    named facts, how far each of those facts alone moves it (pure; a few seconds for hundreds of
    incidents, so the KB artifact keeps the result)."""
    kb = ckb.kb
    questions = [f for f in kb.facts.values() if f.get("evidence") and f.question]
    out: dict[str, dict[str, float]] = {f.id: {} for f in questions}
    by_fact: dict[str, dict[str, dict[str, float]]] = {f.id: {} for f in questions if f.get("reveals")}
    for incident in (kb.get("incidents") or {}).values():
        if not incident.get("knows") or incident.cause not in kb.causes:
            continue
        knows = _records(kb, incident.knows)
        log = _log_facts(ckb, incident.get("log") or "")
        for fact in questions:
            revealed = set(fact.get("reveals") or ())
            if fact.evidence == "log":
                new = log
            else:
                new = {name: record for name, record in knows.items() if name in revealed}
            if not new:
                continue
            base = infer(ckb, {name: r for name, r in knows.items() if name not in new})
            lift = _lift(ckb, base, new, incident.cause)
            if abs(lift) > 1e-6:
                out[fact.id][incident.id] = round(lift, 4)
            if fact.id in by_fact:
                single = {name: round(_lift(ckb, base, {name: record}, incident.cause), 4)
                          for name, record in new.items()}
                single = {name: value for name, value in single.items() if abs(value) > 1e-6}
                if single:
                    by_fact[fact.id][incident.id] = single
    return out, by_fact


def reporter_knowledge(ckb: CompiledKB, knows: Mapping[str, Any]) -> dict[str, Value]:
    """What a reporter who knows ``knows`` can tell: those facts (of the right type) and what they
    settle by the KB's ``implies`` (an init failure did not run for hours first; a job that hangs
    at init did not finish training). Not what the diagnostic rules derive. (The model's chance of
    an answer is learned from ``knows`` alone, which counts a fact implied by another as unknown:
    asking for the implying fact is the better question.)"""
    records = _records(ckb.kb, knows)
    state = infer(ckb, records)
    out = {name: record.value for name, record in records.items()}
    for name, record in state.facts.items():
        if name not in out and record.source.kind == "rule" and record.source.detail.startswith(f"{IMPLIES}_"):
            out[name] = record.value
    return out


def _records(kb: Any, values: Mapping[str, Any]) -> dict[str, FactRecord]:
    out = {}
    for name, value in values.items():
        fact = kb.facts.get(name)
        if fact is None:
            continue
        try:
            out[name] = FactRecord(name, coerce(value, fact.type, fact.choices), _SIMULATED)
        except ValueProblem:
            continue
    return out


def _log_facts(ckb: CompiledKB, log: str) -> dict[str, FactRecord]:
    """The facts a log sets, as the session would take them (first value of each fact wins)."""
    if not log.strip():
        return {}
    kb = ckb.kb
    out: dict[str, FactRecord] = {}
    if _LOG_GIVEN in kb.facts:
        out[_LOG_GIVEN] = FactRecord(_LOG_GIVEN, True, _SIMULATED)
    for hit in scan_lines(ckb, log.splitlines()):
        signature = kb.signatures[hit.signature]
        for name, value in signature.sets.items():
            if name in out or name not in kb.facts:
                continue
            if isinstance(value, str) and "{" in value:
                for key, text in hit.captures.items():
                    value = value.replace("{" + key + "}", text)
            fact = kb.facts[name]
            try:
                out[name] = FactRecord(name, coerce(value, fact.type, fact.choices), _SIMULATED, signature.certainty)
            except ValueProblem:
                continue
    return out
