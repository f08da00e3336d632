"""The session work behind every request of the HTTP and the MCP server, and the views they return.

Each job takes a session's JSON state (or none, to start one) and plain data, and returns
plain data: the new state and the view already encoded as JSON. Nothing here holds a session
between calls, so a job runs the same inline or in an engine worker process, and a job that
fails or is stopped changes nothing. All diagnosis is the session API's; this module only
checks sizes, applies a turn in order and shapes what a client sees.
"""
from __future__ import annotations

import time
import weakref
from functools import partial
from typing import Any

from ..engine.results import compact_json
from ..engine.session import MAX_TEXT_CHARS, Doctor, Session
from ..errors import InputTooLarge, SessionError, StateError, UnknownFact
from .limits import ApiError, Limits

__all__ = ["JOBS", "CLIENT_SOURCES", "turn", "view", "how", "why", "report", "check_turn_sizes", "clean"]

#: The fact sources a client's own state may carry: what a client can give (no probe, no flag).
CLIENT_SOURCES = ("text", "log", "answer")
MAX_NAME_CHARS = 200


def clean(text: str) -> str:
    """Text as it can be stored and sent back: a lone surrogate (invalid Unicode) becomes '?'."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _engine_error(exc: SessionError) -> ApiError:
    if isinstance(exc, InputTooLarge):
        return ApiError(413, str(exc))
    if isinstance(exc, StateError):
        return ApiError(422, f"state: {exc}")
    return ApiError(422, str(exc))


def check_turn_sizes(data: dict[str, Any], limits: Limits) -> None:
    """Refuse a turn's text or log over its limit (cheap; done before any engine work)."""
    text, log = data.get("text"), data.get("log")
    if text is not None and len(text) > MAX_TEXT_CHARS:
        raise ApiError(413, f"text is {len(text)} characters; the limit is {MAX_TEXT_CHARS} "
                       "(send long logs as a log instead)")
    if log is not None:
        size = len(log.encode("utf-8", "replace"))
        if size > limits.max_log_bytes:
            raise ApiError(413, f"log is {size} bytes; the limit is {limits.max_log_bytes} bytes "
                           "(send the part around the first error)")


def restore(doctor: Doctor, state: dict[str, Any] | str | None, *, client: bool = False) -> Session:
    """A session from its state (a new one for None); a client's state may claim only client sources."""
    if state is None:
        return doctor.session()
    try:
        return Session.from_json(doctor, state, sources=CLIENT_SOURCES if client else None)
    except SessionError as exc:
        raise _engine_error(exc) from None


def _apply(session: Session, data: dict[str, Any], limits: Limits, deadline: float) -> None:
    """Answers first (they are the user's word), then text, then log; totals per session checked."""
    text, log = data.get("text"), data.get("log")
    if text:
        total = sum(len(t) for t in session.texts) + len(text)
        if total > limits.max_session_text_chars:
            raise ApiError(413, f"this session would hold {total} characters of text; the limit is "
                           f"{limits.max_session_text_chars} (start a new session, or send logs as logs)")
    if log and len(session.logs) >= limits.max_session_logs:
        raise ApiError(413, f"this session already holds {len(session.logs)} logs, its limit; start a new session")
    try:
        for answer in data.get("answers") or ():
            fact = answer["fact"]
            try:
                if answer.get("retract"):
                    session.retract(fact)
                elif answer.get("dont_know"):
                    session.dont_know(fact)
                else:
                    session.answer(fact, answer["value"])
            except UnknownFact:
                raise ApiError(422, f"answers: unknown fact {fact[:MAX_NAME_CHARS]!r} (use the `id` of a question)") from None
            except SessionError as exc:
                raise ApiError(422, f"answers: {exc}") from None
        if text:
            session.tell(clean(text))
        if log:
            from ..ingest import ingest_text  # the one way logs enter: signatures and hang analysis

            try:
                ingest_text(session, clean(log), name=clean(data.get("log_name") or "log"), deadline=deadline)
            except InputTooLarge:
                raise ApiError(413, f"reading this log took more than the {limits.budget_s:g} s a request may use; "
                               "send the part around the first error") from None
    except SessionError as exc:
        raise _engine_error(exc) from None


def _encode(data: Any) -> bytes:
    return compact_json(data).encode("utf-8")


#: Per KB, the JSON of what each diagnosis takes from its cause's entry (see Diagnosis.to_json).
_FROM_KB: weakref.WeakKeyDictionary[Doctor, dict[tuple[str, str], str]] = weakref.WeakKeyDictionary()


def _view(session: Session, questions: int) -> bytes:
    """What a client shows after a turn: the report plus the single next question, as JSON
    (the bytes ``_encode`` gives for that dict; diagnoses, questions and the plan arrive
    already encoded, their KB parts kept per KB, and the next question is the first one's text)."""
    kept = _FROM_KB.get(session.doctor)
    if kept is None:
        kept = _FROM_KB.setdefault(session.doctor, {})
    encoded = partial(_to_json, kept=kept)
    report = session.report(questions=max(questions, 1), diagnosis_as=encoded, question_as=encoded, plan_as=encoded)
    asked = report["questions"]
    report["next_question"] = asked[0] if asked else "null"
    report["questions"] = "[" + ",".join(asked[:questions]) + "]"
    report["diagnoses"] = "[" + ",".join(report["diagnoses"]) + "]"
    report["answers"] = compact_json(session.answers())
    report["unknown"] = compact_json(session.unknown)
    parts = [f"{compact_json(key)}:{value if key in _ENCODED else compact_json(value)}" for key, value in report.items()]
    return ("{" + ",".join(parts) + "}").encode("utf-8")


_ENCODED = frozenset({"diagnoses", "questions", "next_question", "plan", "answers", "unknown"})


def _to_json(result: Any, kept: dict[tuple[str, str], str]) -> str:
    return result.to_json(kept)


def _state(session: Session, limits: Limits) -> dict[str, Any]:
    state = session.to_dict()
    size = len(_encode(state))
    if size > limits.max_state_bytes:
        raise ApiError(413, f"the session's state would be {size} bytes; the limit is {limits.max_state_bytes} "
                       "(start a new session)")
    return state


# --------------------------------------------------------------------------- jobs
def _restore_for(doctor: Doctor, state: Any, data: dict[str, Any]) -> Session:
    return restore(doctor, state, client=bool(data.get("client_state")))


def turn(doctor: Doctor, state: Any, data: dict[str, Any], limits: Limits) -> tuple[dict[str, Any], bytes | None]:
    """Apply one turn (text, log, answers) to a state; the new state and its view (None when
    ``data["view"]`` is False: the client reads the view later, and nothing builds it now).

    In every job, ``data["client_state"]`` marks a state sent by a client (stateless mode): it
    may claim only client sources. A refused turn returns nothing, so nothing changes.
    """
    deadline = time.monotonic() + limits.budget_s
    session = _restore_for(doctor, state, data)
    _apply(session, data, limits, deadline)
    state = _state(session, limits)
    return state, (_view(session, data.get("questions", 3)) if data.get("view", True) else None)


def view(doctor: Doctor, state: Any, data: dict[str, Any], limits: Limits) -> bytes:
    """The view of a state as it is."""
    return _view(_restore_for(doctor, state, data), data.get("questions", 3))


def how(doctor: Doctor, state: Any, data: dict[str, Any], limits: Limits) -> bytes:
    """How the engine weighed one cause, as JSON."""
    cause = data["cause"]
    if cause not in doctor.kb.causes:
        raise ApiError(404, f"unknown cause {cause[:MAX_NAME_CHARS]!r} (use the `id` of a diagnosis)")
    return _encode(_restore_for(doctor, state, data).how(cause).to_dict())


def why(doctor: Doctor, state: Any, data: dict[str, Any], limits: Limits) -> bytes:
    """Why one question is worth asking, as JSON."""
    fact = data["fact"]
    if fact not in doctor.kb.facts:
        raise ApiError(404, f"unknown fact {fact[:MAX_NAME_CHARS]!r} (use the `id` of a question)")
    return _encode(_restore_for(doctor, state, data).why(fact).to_dict())


def report(doctor: Doctor, state: Any, data: dict[str, Any], limits: Limits) -> str:
    """The session as a Markdown report, redacted unless ``data["redact"]`` is false."""
    from .. import report as reports

    return reports.session_markdown(_restore_for(doctor, state, data), redact=data.get("redact", True))


JOBS = {"turn": turn, "view": view, "how": how, "why": why, "report": report}
