"""The session API: one :class:`Doctor` per KB (:mod:`.doctor`), one :class:`Session` per conversation.

Every front end (the one-shot CLI, the TUI, the HTTP server, embedding bots) drives these two
objects and holds no diagnosis logic of its own. Nothing here does I/O: logs arrive as
iterables of lines, and state leaves as JSON text.
"""
from __future__ import annotations

import json
import weakref
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from ..errors import InputTooLarge, SessionError, StateError, UnknownFact
from .certainty import LEAD_THRESHOLD, RAISE_THRESHOLD, combine, counted
from .chaining import Inference, infer
from .explain import how as explain_how
from .explain import relevance_text, repeats_text
from .explain import why as explain_why
from .explain import why_evidence
from .language import LANGUAGES, cause_texts, detect, pick
from .matching import SignatureHit, SymptomMatch, match_symptoms, scan_lines
from .memory import SOURCE_PRIORITY, FactRecord, Source
from .plan import build_plan
from .priors import library_priors
from .consult_model import ConsultModel
from .doctor import Doctor
from .questions import Ranking, answer_options, leading_causes, ranking
from .relevance import LIBRARY_WEIGHT, RELEVANCE, incident_words
from .results import Diagnosis, EvidenceItem, How, Plan, Question, Why
from .similarity import SIMILAR, Profile, SimilarIncident, fact_feature, similar_text, words
from .similarity import evidence as similar_evidence
from .values import Value, ValueProblem, coerce

__all__ = [
    "Doctor",
    "Session",
    "SessionError",
    "UnknownFact",
    "InputTooLarge",
    "StateError",
    "LogSummary",
    "SimilarIncident",
    "STATE_FORMAT",
    "STATE_VERSION",
    "MAX_TEXT_CHARS",
    "LOG_GIVEN",
]

MAX_TEXT_CHARS = 200_000
MAX_LINE_CHARS = 8_192


def __getattr__(name: str) -> Any:
    """``STATE_FORMAT`` and ``STATE_VERSION`` from :mod:`.state`, which is imported only when a
    state is saved or read (a one-shot start does neither)."""
    if name in ("STATE_FORMAT", "STATE_VERSION"):
        from . import state

        return getattr(state, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
_LATER_WINS = {"answer", "cli", "probe"}
#: The KB fact the session sets when log lines arrive (a log, or error lines in the user's words),
#: so that questions asking for a log can be conditioned on it (``asked_when``).
LOG_GIVEN = "log_given"
_QUESTIONS_KEPT = 10


class LogSummary:
    """What one log added: lines read, and per signature the count and first place seen."""

    __slots__ = ("name", "lines", "hits")

    def __init__(self, name: str, lines: int = 0, hits: dict[str, dict[str, Any]] | None = None) -> None:
        self.name, self.lines, self.hits = name, lines, {} if hits is None else hits

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "lines": self.lines, "hits": self.hits}

    def __eq__(self, other: object) -> bool:
        if type(other) is not LogSummary:
            return NotImplemented
        return (self.name, self.lines, self.hits) == (other.name, other.lines, other.hits)

    __hash__ = None  # type: ignore[assignment] - mutable

    def __repr__(self) -> str:
        return f"LogSummary(name={self.name!r}, lines={self.lines!r}, hits={self.hits!r})"


class Session:
    """One conversation: facts in, ranked diagnoses, questions and a fix plan out."""

    def __init__(self, doctor: Doctor, *, lang: str | None = None, leave_out: Iterable[str] = (),
                 case_based: bool = True):
        """``leave_out``: incidents of the library (ids or source URLs) this session must not learn
        from: not similar incidents, not counted in the priors or the consultation model, so a
        benchmark can score an incident as if it were new. ``case_based=False`` turns evidence
        from similar incidents off altogether."""
        if isinstance(leave_out, str):
            raise SessionError("leave_out takes a list of incident ids or sources, not one string")
        self.doctor = doctor
        named = {str(i) for i in leave_out}
        self._leave_out = frozenset(i for i, incident in doctor.kb.get("incidents", {}).items()
                                    if i in named or incident.source in named) if named else frozenset()
        self._left_out_as_given = sorted(named)
        self._case_based = bool(case_based)
        self._priors = (library_priors(doctor.kb.causes, doctor.kb.get("incidents", {}), self._leave_out)
                        if self._leave_out else doctor.compiled.priors)
        self._text_signatures: set[str] | None = set()  # None: to be recomputed from the texts
        self._weighed = False  # case-based evidence added to self._state
        self._consult: ConsultModel | None = None
        self._assertions: list[FactRecord] = []
        self._unknown: list[str] = []
        self._texts: list[str] = []
        self._text_origins: list[str] = []  # "" for the user's words, else the evidence question answered
        self._logs: list[LogSummary] = []
        self._matches: list[dict[str, Any]] = []
        self._hang: dict[str, Any] | None = None
        self._hang_facts: list[FactRecord] = []
        self._state: Inference | None = None
        self._ranked: dict[bool, tuple[int, Ranking]] = {}
        self._lang: str | None = None
        if lang is not None:
            self.set_language(lang)

    # --------------------------------------------------------------- language
    @property
    def language(self) -> str:
        """"en" or "zh": the language chosen with :meth:`set_language`, else the user's own."""
        if self._lang is not None:
            return self._lang
        return detect(t for t, origin in zip(self._texts, self._text_origins) if not origin)

    def set_language(self, lang: str | None) -> None:
        """Answer in ``lang`` ("en" or "zh"); None goes back to the language the user writes."""
        if lang is not None and lang not in LANGUAGES:
            raise SessionError(f"unknown language {lang!r}; one of {', '.join(LANGUAGES)}")
        self._lang = lang
        self._ranked = {}

    # ----------------------------------------------------------------- inputs
    def tell(self, text: str) -> list[SymptomMatch]:
        """The user's own words (a description, or pasted log lines); returns what matched."""
        return self._tell(text)

    def _tell(self, text: str, origin: str = "") -> list[SymptomMatch]:
        if len(text) > MAX_TEXT_CHARS:
            raise InputTooLarge(f"text of {len(text)} characters is over the limit of {MAX_TEXT_CHARS}")
        self._texts.append(text)
        self._text_origins.append(origin)
        kb = self.doctor.kb
        prefix = f"answer to {origin}: " if origin else ""
        matches = match_symptoms(self.doctor.compiled, text)
        for match in matches:
            symptom = kb.symptoms[match.symptom]
            detail = f"{prefix}{match.symptom}: {match.phrase!r}"
            for name, value in symptom.sets.items():
                value = _fill(value, match.captures)
                self._assert_coerced(name, value, Source("text", detail), symptom.certainty * match.score)
            self._matches.append({"symptom": match.symptom, "phrase": match.phrase, "score": round(match.score, 3)})
        summary = LogSummary(name="text")
        self._scan(text.splitlines(), summary, kind="text", prefix=prefix)
        if self._text_signatures is not None:
            self._text_signatures.update(summary.hits)
        if summary.hits:
            self._log_given(Source("text", f"{prefix}pasted log lines"))
        self._changed()
        return matches

    def add_log(self, lines: Iterable[str], name: str = "log") -> LogSummary:
        """Log lines the caller has read (NCCL_DEBUG output, tracebacks, launcher logs), matched
        against the KB's signatures line by line, as :meth:`tell` matches pasted lines. Kept for
        embedders; ``nccl_doctor.ingest`` (files, stdin, uploaded text) also runs the hang analysis."""
        summary = LogSummary(name=name)
        self._scan(lines, summary, kind="log")
        self._logs.append(summary)
        self._log_given(Source("log", name))
        self._changed()
        return summary

    def add_hits(self, name: str, lines: int, hits: Iterable[SignatureHit],
                 counts: Mapping[str, int] | None = None) -> LogSummary:
        """Signature hits found by a scanner outside the engine (e.g. the fast file scanner),
        with optional per-signature line counts when only first hits are passed."""
        hits = list(hits)
        summary = LogSummary(name=name, lines=lines)
        for hit in hits:
            if hit.signature not in self.doctor.kb.signatures:
                raise SessionError(f"unknown signature {hit.signature!r}")
        self._take_hits(hits, summary, kind="log")
        for signature, count in (counts or {}).items():
            if signature in summary.hits:
                summary.hits[signature]["count"] = count
        self._logs.append(summary)
        self._log_given(Source("log", name))
        self._changed()
        return summary

    def set_hang(self, hang: Mapping[str, Any] | None, *, facts: Mapping[str, tuple[Any, str]] | None = None,
                 evidence: list[Any] | None = None) -> None:
        """Keep the hang analysis of the logs read so far, as plain JSON data: the report (the
        ``hang`` object of :meth:`report`), the facts it establishes (fact -> (value, "file:line"),
        replacing those of the previous analysis) and the evidence it was drawn from, which
        ``nccl_doctor.ingest`` reads back to analyse the next logs together with these."""
        if hang is not None and not isinstance(hang, Mapping):
            raise SessionError("a hang report is a JSON object")
        records = []
        for name, (value, where) in (facts or {}).items():
            fact = self.doctor.kb.facts.get(name)
            if fact is None:
                continue
            try:
                records.append(FactRecord(name, coerce(value, fact.type, fact.choices), Source("log", str(where))))
            except ValueProblem:
                continue
        self._hang = json.loads(json.dumps({"report": dict(hang) if hang is not None else None,
                                            "evidence": list(evidence or [])}))
        self._hang_facts = records
        self._changed()

    @property
    def hang(self) -> dict[str, Any] | None:
        """The hang analysis of the logs read so far, or None when they show no hang."""
        report = (self._hang or {}).get("report")
        return json.loads(json.dumps(report)) if report is not None else None

    @property
    def hang_evidence(self) -> list[Any]:
        """What the last hang analysis was drawn from (plain data, for nccl_doctor.ingest)."""
        return list((self._hang or {}).get("evidence", []))

    def answer(self, fact_id: str, value: object) -> None:
        """Answer a question (or change an earlier answer).

        An evidence question's answer is free text (a pasted log line, versions, a command): it
        is read like the user's words and log lines, and everything it establishes is taken back
        with it when the answer is changed or retracted.
        """
        fact = self._fact(fact_id)
        self._assertions = [a for a in self._assertions if not (a.name == fact_id and a.source.kind == "answer")]
        if fact_id in self._unknown:
            self._unknown.remove(fact_id)
        if fact.get("evidence"):
            self._drop_evidence(fact_id)
            text = str(value)
            if len(text) > MAX_TEXT_CHARS:
                raise InputTooLarge(f"answer of {len(text)} characters is over the limit of {MAX_TEXT_CHARS}")
            self._assert_checked(fact_id, text[:2000], Source("answer"))
            if fact.evidence == "log":  # pasted log lines: read exactly as an uploaded log is
                self._read_pasted_log(text, f"answer to {fact_id}")
            else:
                self._tell(text, origin=fact_id)
            return
        self._assert_checked(fact_id, value, Source("answer"))

    def dont_know(self, fact_id: str) -> None:
        """The user cannot tell; the engine will not ask again."""
        fact = self._fact(fact_id)
        self._assertions = [a for a in self._assertions if not (a.name == fact_id and a.source.kind == "answer")]
        if fact.get("evidence"):
            self._drop_evidence(fact_id)
        if fact_id not in self._unknown:
            self._unknown.append(fact_id)
        self._changed()

    def set_fact(self, fact_id: str, value: object, *, source: str = "cli", detail: str = "",
                 certainty: float = 1.0) -> None:
        """Set a fact from a flag, a probe or a report (``source`` is one of the source kinds)."""
        if source not in SOURCE_PRIORITY or source == "rule":
            raise SessionError(f"unknown source kind {source!r}")
        if self._fact(fact_id).get("evidence") and source in ("answer", "cli"):
            self.answer(fact_id, value)  # an evidence answer is read, not just stored
            return
        self._assert_checked(fact_id, value, Source(source, detail), certainty)  # type: ignore[arg-type]

    def retract(self, fact_id: str) -> None:
        """Take back an answer (and a "don't know") so the question can be asked again."""
        fact = self._fact(fact_id)
        self._assertions = [a for a in self._assertions if not (a.name == fact_id and a.source.kind in ("answer", "cli"))]
        if fact.get("evidence"):
            self._drop_evidence(fact_id)
        if fact_id in self._unknown:
            self._unknown.remove(fact_id)
        self._changed()

    # ---------------------------------------------------------------- outputs
    def facts(self) -> dict[str, FactRecord]:
        """Every known fact, given and derived."""
        return dict(self._chained().facts)

    def fired_rules(self) -> list[str]:
        """The ids of the rules that fired, in firing order."""
        return [firing.rule for firing in self._chained().fired]

    def diagnoses(self, limit: int | None = None) -> list[Diagnosis]:
        """Raised causes, best first: those rules support (``supported``: rule evidence and a
        confidence of ``LEAD_THRESHOLD`` or more) by confidence, then the others ("possibly
        related": barely supported, or only the user's words or similar incidents point at)."""
        state = self._inference()
        kb = self.doctor.kb
        certainties = state.certainties()
        supported = {c for c, items in state.evidence.items() if certainties.get(c, 0.0) >= LEAD_THRESHOLD
                     and any(r not in (RELEVANCE, SIMILAR) and v > 0 for r, v in items)}
        ranked = sorted(
            (c for c, v in certainties.items() if v > RAISE_THRESHOLD),
            key=lambda c: (c not in supported, -round(certainties[c], 6), -self._priors[c], c),
        )
        lang = self.language
        out = []
        for cause_id in ranked[:limit]:
            cause = kb.causes[cause_id]
            texts = cause_texts(cause)
            out.append(Diagnosis(
                id=cause.id, title=pick(texts, "title", lang), area=cause.area, confidence=certainties[cause_id],
                explanation=pick(texts, "explanation", lang), evidence=self._evidence(state, cause_id),
                fixes=[dict(kb.fixes[f]) for f in cause.fixes], references=list(cause.references),
                supported=cause_id in supported, texts=texts,
            ))
        return out

    def similar(self, limit: int | None = None) -> list[SimilarIncident]:
        """The reported incidents most like this session, best first (see :mod:`engine.similarity`)."""
        similar = self._inference().similar
        return list(similar[:limit] if limit is not None else similar)

    def profile(self) -> Profile:
        """What case-based evidence compares with the library: the words of the texts, the
        signatures the logs and texts hit, the facts given (not derived), except answers to
        questions and ``log_given`` (see :mod:`engine.similarity`)."""
        if self._text_signatures is None:  # restored from a state: the texts are scanned again
            self._text_signatures = set(_from_texts(self.doctor, "signatures", self._texts, lambda: frozenset(
                hit.signature for text in self._texts for hit in scan_lines(self.doctor.compiled, text.splitlines()))))
        signatures = set(self._text_signatures).union(*(log.hits for log in self._logs))
        given = {name: record.value for name, record in self._base(answers=False).items() if name != LOG_GIVEN}
        return Profile(_from_texts(self.doctor, "words", self._texts, lambda: words("\n".join(self._texts))),
                       frozenset(signatures), {name: fact_feature(name, value) for name, value in given.items()})

    def recognised(self) -> bool:
        """True when some raised cause has support beyond shared words (a rule, symptom or log line)."""
        return any(d.supported for d in self.diagnoses())

    def questions(self, limit: int = 3) -> list[Question]:
        """The most useful questions now, best first; empty when nothing useful is left."""
        return self._questions(limit, by_probe=False)

    def _questions(self, limit: int, by_probe: bool) -> list[Question]:
        kept = self._ranked.get(by_probe)
        state = self._inference()
        if kept is None or kept[0] < limit:
            keep = max(limit, _QUESTIONS_KEPT)
            found = ranking(self.doctor.compiled, state, self._model(), skip=self._unknown,
                            limit=keep, by_probe=by_probe, lang=self.language)
            kept = self._ranked[by_probe] = (keep, found)
        return kept[1].first(limit)

    def suggest_probes(self, limit: int = 3) -> list[dict[str, Any]]:
        """Probes whose results would best separate the leading causes, best first.

        Each entry names the probe, the facts it would establish and the causes it separates;
        the front end asks the user's consent before running any.
        """
        ranked = self._questions(50, by_probe=True)
        best: dict[str, dict[str, Any]] = {}
        for question in ranked:
            for probe in self.doctor.kb.facts[question.id].probes:
                entry = best.setdefault(probe, {"probe": probe, "gain": 0.0, "facts": [], "separates": []})
                entry["gain"] = max(entry["gain"], round(question.gain, 4))
                entry["facts"].append(question.id)
                entry["separates"] = list(dict.fromkeys(entry["separates"] + question.separates))
        return sorted(best.values(), key=lambda e: (-e["gain"], e["probe"]))[:limit]

    def next_question(self) -> Question | None:
        """The single most useful question now, or None when nothing useful is left to ask."""
        found = self.questions(limit=1)
        return found[0] if found else None

    def plan(self) -> Plan:
        """The fix plan over the leading causes rules support, ordered by expected value (see
        :mod:`engine.plan`); when none has such support, what to collect next instead."""
        return self._plan(self.diagnoses())

    def _plan(self, diagnoses: list[Diagnosis]) -> Plan:
        told = bool(self._texts or self._logs or self._assertions)
        return build_plan(self.doctor.kb, diagnoses, self.language, told=told)

    def how(self, cause_id: str) -> How:
        """How the engine weighed a cause: rules, contributions, facts and their sources."""
        if cause_id not in self.doctor.kb.causes:
            raise SessionError(f"unknown cause {cause_id!r}")
        return explain_how(self.doctor.compiled, self._inference(), cause_id)

    def why(self, fact_id: str) -> Why:
        """Why a question is worth asking: the causes each answer would move."""
        fact = self._fact(fact_id)
        state = self._inference()
        if fact.get("evidence"):
            reach = self._model().reach(fact_id, state.facts) if fact_id in self._model().evidence else None
            return why_evidence(self.doctor.compiled, state, fact_id, reach)
        answers = self.doctor.answer_options.get(fact_id, [])
        leading = leading_causes(self.doctor.compiled, state.certainties())
        return explain_why(self.doctor.compiled, state, fact_id, answers, leading)

    @property
    def texts(self) -> list[str]:
        return list(self._texts)

    @property
    def logs(self) -> list[LogSummary]:
        return list(self._logs)

    @property
    def symptom_matches(self) -> list[dict[str, Any]]:
        return list(self._matches)

    @property
    def unknown(self) -> list[str]:
        return list(self._unknown)

    def answers(self) -> dict[str, Value]:
        """The questions answered so far, in order."""
        return {a.name: a.value for a in self._assertions if a.source.kind == "answer"}

    def report(self, *, questions: int = 3,
               diagnosis_as: Callable[[Diagnosis], Any] = Diagnosis.to_dict,
               question_as: Callable[[Question], Any] = Question.to_dict,
               plan_as: Callable[[Plan], Any] = Plan.to_dict) -> dict[str, Any]:
        """Everything a front end shows, as one JSON-ready dict (the CLI's ``--json``).

        ``recognised`` is False when no cause has support beyond shared words; the plan then
        holds no steps but what to collect next. ``diagnosis_as``, ``question_as`` and ``plan_as``
        turn each diagnosis, question and the plan into what the dict holds (a server that sends
        JSON passes their ``to_json`` texts).
        """
        diagnoses = self.diagnoses()  # once: the plan is drawn from the same list
        plan = self._plan(diagnoses)
        hang = self.hang
        return {
            "lang": self.language,
            "recognised": plan.recognised,
            "diagnoses": [diagnosis_as(d) for d in diagnoses],
            "questions": [question_as(q) for q in self.questions(limit=questions)],
            "plan": plan_as(plan),
            "facts": {name: record.to_dict() for name, record in sorted(self.facts().items())},
            "symptoms": self.symptom_matches,
            "logs": [s.to_dict() for s in self._logs],
            **({"hang": hang} if hang is not None else {}),
            "similar": [i.to_dict() for i in self.similar()],
        }

    # ------------------------------------------------------------ persistence
    def to_dict(self) -> dict[str, Any]:
        """The session's state as a JSON-ready dict (see :meth:`to_json`)."""
        from .state import STATE_FORMAT, STATE_VERSION

        return {
            "format": STATE_FORMAT,
            "version": STATE_VERSION,
            "assertions": [
                {"name": a.name, "value": a.value, "source": a.source.to_dict(), "certainty": a.certainty}
                for a in self._assertions
            ],
            "unknown": list(self._unknown),
            "texts": list(self._texts),
            "text_origins": list(self._text_origins),
            "lang": self._lang,
            "logs": [s.to_dict() for s in self._logs],
            "matches": list(self._matches),
            **({"hang": {**self._hang, "facts": [
                {"name": r.name, "value": r.value, "detail": r.source.detail} for r in self._hang_facts]}}
               if self._hang is not None else {}),
            **({"leave_out": self._left_out_as_given} if self._left_out_as_given else {}),
            **({"case_based": False} if not self._case_based else {}),
        }

    def to_json(self) -> str:
        """The session's state as JSON text (format-versioned) for :meth:`from_json`."""
        return json.dumps(self.to_dict(), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, doctor: Doctor, text: str | bytes | Mapping[str, Any], *,
                  sources: Collection[str] | None = None) -> "Session":
        """Restore a session saved by :meth:`to_json`; facts the KB no longer has are dropped.

        Every field is checked as strictly as fresh input (:mod:`.state`); ``sources`` limits
        the fact sources the state may claim, so a server can refuse a client's forged probe
        result. A bad state raises :class:`StateError` naming the field.
        """
        from .state import read_state

        saved = read_state(doctor.kb, text, sources)
        session = cls(doctor, leave_out=saved.leave_out, case_based=saved.case_based)
        session._text_signatures = None  # the texts are scanned again when similar incidents are asked for
        session._assertions = saved.assertions
        session._unknown = saved.unknown
        session._texts = saved.texts
        session._matches = saved.matches
        session._logs = [LogSummary(name=name, lines=lines, hits=hits) for name, lines, hits in saved.logs]
        if saved.hang is not None:
            session._hang = {"report": saved.hang.report, "evidence": saved.hang.evidence}
            session._hang_facts = saved.hang.facts
        session._text_origins = saved.text_origins
        if saved.lang is not None:
            session.set_language(saved.lang)
        return session

    # --------------------------------------------------------------- helpers
    def _fact(self, fact_id: str):
        try:
            return self.doctor.kb.facts[fact_id]
        except KeyError:
            raise UnknownFact(f"unknown fact {fact_id!r}") from None

    def _assert_checked(self, fact_id: str, value: object, source: Source, certainty: float = 1.0) -> None:
        fact = self._fact(fact_id)
        try:
            coerced = coerce(value, fact.type, fact.choices)
        except ValueProblem as exc:
            raise SessionError(f"{fact_id}: {exc}") from None
        if not 0 < certainty <= 1:
            raise SessionError(f"certainty must be in (0, 1], got {certainty}")
        self._assertions.append(FactRecord(fact_id, coerced, source, certainty))
        self._changed()

    def _read_pasted_log(self, text: str, name: str) -> None:
        """Log lines given as an answer go the way every log goes (``nccl_doctor.ingest``:
        the same reader, signatures and hang forensics); the engine's own scan stands in where
        the package around the engine is not there."""
        try:
            from ..ingest import ingest_text
        except ImportError:  # the engine used on its own
            summary = LogSummary(name=name)
            self._scan(text.splitlines(), summary, kind="log")
            self._logs.append(summary)
            if summary.lines:
                self._log_given(Source("log", name))
            self._changed()
            return
        ingest_text(self, text, name=name)
        self._changed()

    def _model(self) -> ConsultModel:
        if self._consult is None:
            self._consult = self.doctor.consult_model.leaving_out(self._leave_out)
        return self._consult

    def _changed(self) -> None:
        self._state = None
        self._ranked = {}

    def _log_given(self, source: Source) -> None:
        if LOG_GIVEN in self.doctor.kb.facts and not any(a.name == LOG_GIVEN and a.source == source for a in self._assertions):
            self._assertions.append(FactRecord(LOG_GIVEN, True, source))

    def _drop_evidence(self, fact_id: str) -> None:
        """Withdraw an evidence question's earlier answer: its text and what the text established."""
        prefix = f"answer to {fact_id}:"
        self._assertions = [a for a in self._assertions if not (a.source.detail.startswith(prefix)
                                                                or a.source.detail == prefix[:-1])]
        self._logs = [log for log in self._logs if log.name != prefix[:-1]]
        keep = [i for i, origin in enumerate(self._text_origins) if origin != fact_id]
        self._texts = [self._texts[i] for i in keep]
        self._text_origins = [self._text_origins[i] for i in keep]

    def _assert_coerced(self, name: str, value: object, source: Source, certainty: float) -> None:
        fact = self.doctor.kb.facts[name]
        try:
            coerced = coerce(value, fact.type, fact.choices)
        except ValueProblem:
            return  # a capture that does not fit the fact's type says nothing
        self._assertions.append(FactRecord(name, coerced, source, min(max(certainty, 0.01), 1.0)))

    def _scan(self, lines: Iterable[str], summary: LogSummary, kind: str, prefix: str = "") -> None:
        counted = 0

        def counting(source: Iterable[str]):
            nonlocal counted
            for line in source:
                counted += 1
                yield line[:MAX_LINE_CHARS]

        self._take_hits(scan_lines(self.doctor.compiled, counting(lines)), summary, kind, prefix)
        summary.lines = counted

    def _take_hits(self, hits: Iterable[SignatureHit], summary: LogSummary, kind: str, prefix: str = "") -> None:
        kb = self.doctor.kb
        seen_facts: set[str] = {a.name for a in self._assertions if a.source.kind == kind}
        for hit in hits:
            entry = summary.hits.get(hit.signature)
            if entry is None:
                summary.hits[hit.signature] = {"count": 1, "first": f"{summary.name}:{hit.line_no}",
                                               "line": hit.line[:300], "captures": hit.captures}
            else:
                entry["count"] += 1
            signature = kb.signatures[hit.signature]
            for name, value in signature.sets.items():
                if name in seen_facts:
                    continue
                seen_facts.add(name)
                detail = f"{summary.name}:{hit.line_no}" if kind == "log" else f"{prefix}pasted line {hit.line_no}"
                self._assert_coerced(name, _fill(value, hit.captures), Source(kind, detail), signature.certainty)  # type: ignore[arg-type]

    def _base(self, answers: bool = True) -> dict[str, FactRecord]:
        """The given facts, each from its most trusted source (``answers=False``: as if no
        question had been answered)."""
        best: dict[str, FactRecord] = {}
        for record in [*self._assertions, *self._hang_facts]:
            if not answers and record.source.kind == "answer":
                continue
            current = best.get(record.name)
            if current is None:
                best[record.name] = record
                continue
            new_rank, old_rank = SOURCE_PRIORITY[record.source.kind], SOURCE_PRIORITY[current.source.kind]
            if new_rank > old_rank or (new_rank == old_rank and record.source.kind in _LATER_WINS):
                best[record.name] = record
        return best

    def _chained(self) -> Inference:
        """The rules chained to a fixpoint, with relevance evidence (not yet case-based evidence:
        facts and fired rules do not need the library)."""
        if self._state is None:
            base = self._base()
            state = infer(self.doctor.compiled, base)
            if self._texts:
                weighed = self._relevance()
                for cause_id, (strength, words) in weighed.items():
                    state.evidence.setdefault(cause_id, []).append((RELEVANCE, strength))
                state.matched_words = {cause_id: words for cause_id, (_, words) in weighed.items()}
            self._state, self._weighed = state, False
        return self._state

    def _relevance(self) -> dict[str, tuple[float, tuple[str, ...]]]:
        """Relevance evidence for the texts: the KB's words, and with case-based evidence the
        library's words (less those of the incidents left out), combined per cause."""
        weighed = _from_texts(self.doctor, "relevance", self._texts, lambda: self.doctor.relevance.evidence(self._texts))
        if not self._case_based or not self.doctor.kb.get("incidents"):
            return weighed
        if self._leave_out:
            without: dict[str, Counter[str]] = {}
            library = self.doctor.kb.get("incidents", {})
            for incident_id in sorted(self._leave_out):
                incident = library[incident_id]
                without[incident.cause] = without.get(incident.cause, Counter()) + incident_words(incident)
            users = self.doctor.library_relevance.evidence(self._texts, without, LIBRARY_WEIGHT)
        else:
            users = _from_texts(self.doctor, "library relevance", self._texts,
                                lambda: self.doctor.library_relevance.evidence(self._texts, weight=LIBRARY_WEIGHT))
        if not users:
            return weighed
        out = dict(weighed)
        for cause_id, (strength, matched) in users.items():
            if cause_id in out:
                kb_strength, kb_matched = out[cause_id]
                out[cause_id] = (round(combine(kb_strength, strength), 4), tuple(sorted({*kb_matched, *matched})))
            else:
                out[cause_id] = (strength, matched)
        return out

    def _inference(self) -> Inference:
        """All evidence: the rules, relevance and similar incidents."""
        state = self._chained()
        if not self._weighed:
            if self._case_based and self.doctor.kb.get("incidents") and (self._texts or _points_anywhere(state)):
                state.similar = tuple(self.doctor.incidents.similar(self.profile(), self._leave_out))
                for cause_id, (strength, found) in similar_evidence(state.similar).items():
                    state.evidence.setdefault(cause_id, []).append((SIMILAR, strength))
                    state.similar_by_cause[cause_id] = found
            self._weighed = True
        return state

    def _evidence(self, state: Inference, cause_id: str) -> list[EvidenceItem]:
        firings = {f.rule: f for f in state.fired}
        items = []
        for rule_id, contribution, repeats in counted(state.evidence.get(cause_id, []), state.roots):
            if rule_id == RELEVANCE:
                items.append(EvidenceItem(rule_id, relevance_text(state, cause_id), round(contribution, 3), {}))
                continue
            if rule_id == SIMILAR:
                found = state.similar_by_cause.get(cause_id, ())
                items.append(EvidenceItem(rule_id, similar_text(found), round(contribution, 3),
                                          {f"incident:{i.id}": {"value": round(i.score, 3), "source": i.source}
                                           for i in found}))
                continue
            rule = self.doctor.kb.rules[rule_id]
            facts = {
                name: {"value": state.facts[name].value, "source": str(state.facts[name].source)}
                for name in firings[rule_id].facts
            }
            items.append(EvidenceItem(rule_id, rule.description + repeats_text(repeats), round(contribution, 3), facts))
        return items


#: Per Doctor, what was last computed from a session's texts alone (relevance evidence, the
#: signatures pasted lines hit, the words): a server restores a session from its state at every
#: turn, and most turns (a log, answers) leave the texts as they were.
_TEXT_WORK: weakref.WeakKeyDictionary[Doctor, dict[tuple[str, tuple[str, ...]], Any]] = weakref.WeakKeyDictionary()
_TEXT_WORK_CHARS = 32_000  # longer texts are not kept
#: What the cache may hold: entries, and characters of texts in all (the values grow with the
#: texts), the least recently used dropped first. A server's worker sees every session's turns in
#: turn, three entries each: 512 entries were fewer than 200 concurrent sessions need, so each
#: entry was dropped before its session's next turn and computed again.
_TEXT_WORK_KEPT = 8_192
_TEXT_WORK_KEPT_CHARS = 3_000_000
_TEXT_WORK_SIZE: weakref.WeakKeyDictionary[Doctor, list[int]] = weakref.WeakKeyDictionary()


def _from_texts(doctor: Doctor, kind: str, texts: list[str], compute: Callable[[], Any]) -> Any:
    """``compute()``, a pure function of ``texts`` and the KB, kept for the next turn on the same
    texts (the value is shared: callers read it and never change it)."""
    cache = _TEXT_WORK.get(doctor)
    if cache is None:
        cache = _TEXT_WORK.setdefault(doctor, {})
        _TEXT_WORK_SIZE[doctor] = [0]
    key = (kind, tuple(texts))
    found = cache.pop(key, None)
    if found is not None:
        cache[key] = found  # the most recently used goes last
        return found
    found = compute()
    size = sum(map(len, texts))
    if size <= _TEXT_WORK_CHARS:
        held = _TEXT_WORK_SIZE[doctor]
        while cache and (len(cache) >= _TEXT_WORK_KEPT or held[0] + size > _TEXT_WORK_KEPT_CHARS):
            oldest = next(iter(cache))
            del cache[oldest]
            held[0] -= sum(map(len, oldest[1]))
        cache[key] = found
        held[0] += size
    return found


def _points_anywhere(state: Inference) -> bool:
    """Whether some rule already counts for a cause: a session with neither a description nor such
    a rule reports no problem and gets no similar incidents (see :mod:`engine.similarity`)."""
    return any(strength > 0 for items in state.evidence.values() for _, strength in items)


def _fill(value: Value, captures: Mapping[str, str]) -> Value:
    if isinstance(value, str) and "{" in value:
        for key, text in captures.items():
            value = value.replace("{" + key + "}", text)
    return value


def incident_profile(doctor: Doctor, incident_id: str) -> Profile:
    """An incident's profile: what a session told its reporter's words and fed its log would
    hold, plus the facts the incident ``knows`` (those the KB has, of the right type)."""
    incident = doctor.kb.incidents[incident_id]
    session = Session(doctor, case_based=False)
    session.tell(incident.reporter)
    if incident.log:
        session.add_log(incident.log.splitlines(), name=incident_id)
    for name, value in incident.knows.items():
        if name in doctor.kb.facts:
            try:
                session.set_fact(name, value, source="cli")
            except SessionError:
                pass
    profile = session.profile()
    return Profile(Counter(profile.words) + words(incident.summary), profile.signatures, profile.facts)
