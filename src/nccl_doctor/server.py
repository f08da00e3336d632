"""``diagnose serve``: the session API as a small HTTP JSON service (FastAPI on uvicorn).

For chat bots, ticket systems and portals that cannot embed Python. Two ways to hold a
conversation:

- server-side sessions: ``POST /sessions`` returns an id; send text, logs and answers to
  ``/sessions/{id}/...``; ``GET /sessions/{id}`` gives diagnoses, next questions and the plan.
  Sessions live in memory, at most ``max_sessions`` of them, each dropped after ``session_ttl``
  seconds without use.
- stateless: ``POST /stateless/turn`` with the state the previous turn returned (or none) plus
  this turn's text, log and answers; the reply carries the new state. Nothing is kept.

Everything a client sends is data: it is matched against the knowledge base and never reaches
a shell, a file name or a probe. Bodies, texts and logs have size limits and are refused with
413 and a message naming the limit; malformed requests get 4xx with a message naming the field.
The OpenAPI description is at ``/openapi.json`` (and browsable at ``/docs``).

FastAPI and uvicorn are the optional extra ``serve``: ``pip install 'nccl-doctor[serve]'``.
"""
from __future__ import annotations

import argparse
import ipaddress
import json
import secrets
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

from . import __version__
from .errors import DoctorError
from .engine.session import (
    MAX_TEXT_CHARS,
    Doctor,
    InputTooLarge,
    Session,
    SessionError,
    StateError,
    UnknownFact,
)

try:  # the optional extra `serve`; the module imports without it so the CLI can explain
    from fastapi import Body, FastAPI, Request
    from fastapi.concurrency import run_in_threadpool
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, Response
    from starlette.exceptions import HTTPException as StarletteHTTPException
except ImportError:  # pragma: no cover - exercised by serve_main's message
    FastAPI = None  # type: ignore[assignment,misc]

__all__ = [
    "create_app",
    "serve_main",
    "SessionStore",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_LOG_BYTES",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_SESSION_TTL",
    "INSTALL_HINT",
]

DEFAULT_MAX_BODY_BYTES = 6 << 20  # a JSON body; a log inside it is escaped, so leave room
DEFAULT_MAX_LOG_BYTES = 4 << 20
DEFAULT_MAX_SESSIONS = 1_000
DEFAULT_SESSION_TTL = 3_600.0
MAX_ANSWERS_PER_REQUEST = 100
MAX_NAME_CHARS = 200
INSTALL_HINT = "pip install 'nccl-doctor[serve]'"


# ------------------------------------------------------------------------ request bodies
class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Answer(_Body):
    """One answer: a value, or ``dont_know: true``, or ``retract: true`` to take one back."""

    fact: str = Field(min_length=1, max_length=MAX_NAME_CHARS, description="fact id, as in a question's `id`")
    value: Union[bool, int, float, str, None] = Field(None, description="the answer (yes/no, a choice, a number, a version)")
    dont_know: bool = Field(False, description="the user cannot tell; the question is not asked again")
    retract: bool = Field(False, description="take back an earlier answer")

    @model_validator(mode="after")
    def _one_kind(self) -> "Answer":
        kinds = (self.value is not None) + self.dont_know + self.retract
        if kinds != 1:
            raise ValueError("give exactly one of `value`, `dont_know: true` or `retract: true`")
        return self


class Turn(_Body):
    """What one message from the user adds: free text, a log, answers (all optional)."""

    text: str | None = Field(None, description=f"the user's words or pasted lines (at most {MAX_TEXT_CHARS} characters)")
    log: str | None = Field(None, description="log text (NCCL_DEBUG output, tracebacks); size-limited")
    log_name: str = Field("log", min_length=1, max_length=MAX_NAME_CHARS, description="shown as the source of log evidence")
    answers: list[Answer] = Field(default_factory=list, max_length=MAX_ANSWERS_PER_REQUEST)
    questions: int = Field(3, ge=0, le=20, description="how many next questions to return")


class StatelessTurn(Turn):
    """A turn for a client that keeps the state itself; send back the `state` you got."""

    state: Union[dict[str, Any], str, None] = Field(None, description="the `state` of the previous reply; omit to start")


class TextBody(_Body):
    text: str = Field(description=f"at most {MAX_TEXT_CHARS} characters")
    questions: int = Field(3, ge=0, le=20)


class LogBody(_Body):
    log: str
    name: str = Field("log", min_length=1, max_length=MAX_NAME_CHARS)
    questions: int = Field(3, ge=0, le=20)


class AnswersBody(_Body):
    answers: list[Answer] = Field(min_length=1, max_length=MAX_ANSWERS_PER_REQUEST)
    questions: int = Field(3, ge=0, le=20)


# ------------------------------------------------------------------------------ errors
class ApiError(DoctorError):
    """An error the client caused (or a full server); becomes ``{"error": message}`` with ``status``."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def _engine_error(exc: SessionError) -> ApiError:
    if isinstance(exc, InputTooLarge):
        return ApiError(413, str(exc))
    if isinstance(exc, StateError):
        return ApiError(422, f"state: {exc}")
    return ApiError(422, str(exc))


# ------------------------------------------------------------------------ session store
@dataclass
class _Entry:
    session: Session
    lock: threading.Lock = field(default_factory=threading.Lock)
    created: float = field(default_factory=time.monotonic)
    used: float = field(default_factory=time.monotonic)


class SessionStore:
    """Sessions in memory: a cap, idle expiry, one lock for the table and one per session."""

    def __init__(self, doctor: Doctor, *, max_sessions: int = DEFAULT_MAX_SESSIONS,
                 ttl: float = DEFAULT_SESSION_TTL, clock: Callable[[], float] = time.monotonic):
        self.doctor = doctor
        self.max_sessions = max_sessions
        self.ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def _purge(self, now: float) -> None:
        expired = [k for k, e in self._entries.items() if now - e.used > self.ttl]
        for key in expired:
            del self._entries[key]

    def create(self, session: Session) -> str:
        now = self._clock()
        with self._lock:
            self._purge(now)
            if len(self._entries) >= self.max_sessions:
                raise ApiError(503, f"the server already holds its maximum of {self.max_sessions} sessions; "
                               "retry later, DELETE sessions you no longer need, or use POST /stateless/turn",
                               {"Retry-After": "30"})
            key = secrets.token_urlsafe(16)
            self._entries[key] = _Entry(session, created=now, used=now)
            return key

    def get(self, key: str) -> _Entry:
        now = self._clock()
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or now - entry.used > self.ttl:
                self._entries.pop(key, None)
                raise ApiError(404, f"no session {key[:64]!r}: it expired after {int(self.ttl)} s idle, "
                               "was deleted, or never existed")
            entry.used = now
            return entry

    def delete(self, key: str) -> bool:
        with self._lock:
            return self._entries.pop(key, None) is not None


# ------------------------------------------------------------------------- engine work
@dataclass(frozen=True)
class _Limits:
    max_body_bytes: int
    max_log_bytes: int


def _check_text(text: str) -> None:
    if len(text) > MAX_TEXT_CHARS:
        raise ApiError(413, f"text is {len(text)} characters; the limit is {MAX_TEXT_CHARS} "
                       "(send long logs to the log endpoint instead)")


def _check_log(log: str, limits: _Limits) -> None:
    size = len(log.encode("utf-8", "replace"))
    if size > limits.max_log_bytes:
        raise ApiError(413, f"log is {size} bytes; the limit is {limits.max_log_bytes} bytes "
                       "(send the part around the first error)")


def _apply(session: Session, turn: Turn, limits: _Limits) -> None:
    """Feed one turn into a session: answers first (they are the user's word), then text, then log."""
    if turn.text is not None:
        _check_text(turn.text)
    if turn.log is not None:
        _check_log(turn.log, limits)
    try:
        for answer in turn.answers:
            _apply_answer(session, answer)
        if turn.text:
            session.tell(turn.text)
        if turn.log:
            from .ingest import ingest_text  # the one way logs enter: signatures and hang analysis

            ingest_text(session, turn.log, name=turn.log_name)
    except SessionError as exc:
        raise _engine_error(exc) from None


def _apply_answer(session: Session, answer: Answer) -> None:
    try:
        if answer.retract:
            session.retract(answer.fact)
        elif answer.dont_know:
            session.dont_know(answer.fact)
        else:
            session.answer(answer.fact, answer.value)
    except UnknownFact:
        raise ApiError(422, f"answers: unknown fact {answer.fact[:MAX_NAME_CHARS]!r} "
                       "(use the `id` of a question)") from None
    except SessionError as exc:
        raise ApiError(422, f"answers: {exc}") from None


def _parse_answers(body: Any) -> tuple[list[Answer], int]:
    """One answer, a list of them, or ``{"answers": [...], "questions": n}``."""
    from pydantic import TypeAdapter, ValidationError

    try:
        if isinstance(body, dict) and "answers" in body:
            parsed = AnswersBody.model_validate(body)
            return parsed.answers, parsed.questions
        if isinstance(body, dict):
            return [Answer.model_validate(body)], 3
        if isinstance(body, list):
            if not 0 < len(body) <= MAX_ANSWERS_PER_REQUEST:
                raise ApiError(422, f"answers: send 1 to {MAX_ANSWERS_PER_REQUEST} answers")
            return TypeAdapter(list[Answer]).validate_python(body), 3
    except ValidationError as exc:
        raise ApiError(422, _validation_message(list(exc.errors()))) from None
    raise ApiError(422, "answers: send {\"fact\": ..., \"value\": ...}, a list of them, or {\"answers\": [...]}")


def _view(session: Session, questions: int = 3) -> dict[str, Any]:
    """What a client shows after a turn: the session's report plus the single next question."""
    report = session.report(questions=max(questions, 1))
    asked = report["questions"]
    report["next_question"] = asked[0] if asked else None
    report["questions"] = asked[:questions]
    report["answers"] = session.answers()
    report["unknown"] = session.unknown
    return report


# --------------------------------------------------------------------------------- app
def _require_fastapi():
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"{exc.name or 'fastapi'} is not installed; {INSTALL_HINT}") from None


def _validation_message(errors: list[dict[str, Any]]) -> str:
    parts = []
    for error in errors[:10]:
        where = ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "body"
        if error.get("type") == "json_invalid":
            detail = error.get("ctx", {}).get("error", "")
            parts.append(f"request body is not valid JSON ({detail})" if detail else "request body is not valid JSON")
            continue
        if error.get("type") == "missing" and where == "body":
            parts.append("request body is missing (send a JSON object)")
            continue
        message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
        parts.append(f"{where}: {message}")
    return "; ".join(parts) or "invalid request"


class _BodyLimit:
    """ASGI middleware: refuse bodies over a byte limit with 413 before the app reads them."""

    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            try:
                too_big = int(declared) > self.max_bytes
            except ValueError:
                return await self._refuse(send, 400, "Content-Length is not a number")
            if too_big:
                await self._drain(receive)
                return await self._refuse(send, 413, self._message(int(declared)))
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                if message.get("more_body", False):
                    await self._drain(receive)
                return await self._refuse(send, 413, self._message(size, at_least=True))
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)

    def _message(self, size: int, at_least: bool = False) -> str:
        return (f"request body is {'over ' if at_least else ''}{size} bytes; the limit is {self.max_bytes} "
                "bytes (send a shorter log: the part around the first error)")

    async def _drain(self, receive) -> None:
        """Read and drop the rest of a refused body (up to a bound) so the client sees the 413
        instead of a reset connection."""
        dropped, bound = 0, max(self.max_bytes * 8, 64 << 20)
        while dropped <= bound:
            message = await receive()
            if message["type"] != "http.request":
                return
            dropped += len(message.get("body", b""))
            if not message.get("more_body", False):
                return

    @staticmethod
    async def _refuse(send, status: int, message: str) -> None:
        body = json.dumps({"error": message}).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


def create_app(doctor: Doctor | None = None, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
               max_log_bytes: int = DEFAULT_MAX_LOG_BYTES, max_sessions: int = DEFAULT_MAX_SESSIONS,
               session_ttl: float = DEFAULT_SESSION_TTL):
    """The FastAPI application over one shared :class:`Doctor` (the packaged KB by default).

    ``max_body_bytes`` caps any request body, ``max_log_bytes`` a log inside one;
    ``max_sessions`` and ``session_ttl`` (seconds idle) bound the in-memory sessions.
    """
    _require_fastapi()
    if doctor is None:
        from . import load_doctor

        doctor = load_doctor()
    limits = _Limits(max_body_bytes=max_body_bytes, max_log_bytes=min(max_log_bytes, max_body_bytes))
    store = SessionStore(doctor, max_sessions=max_sessions, ttl=session_ttl)
    kb = doctor.kb

    app = FastAPI(
        title="nccl-doctor",
        version=__version__,
        description=(
            "Why distributed training hangs, times out or crashes (NCCL, torch.distributed, MPI, "
            "the network), and what to change. Send what the user says, logs and answers; get "
            "ranked diagnoses, the next question to ask and a fix plan. Errors are "
            "`{\"error\": message}`."
        ),
    )
    app.state.store = store
    app.state.doctor = doctor
    app.add_middleware(_BodyLimit, max_bytes=max_body_bytes)

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError):
        return JSONResponse({"error": exc.message}, status_code=exc.status, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        return JSONResponse({"error": _validation_message(list(exc.errors()))}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException):
        message = exc.detail if isinstance(exc.detail, str) else "request failed"
        if exc.status_code == 404 and message == "Not Found":
            message = f"no such endpoint: {request.method} {request.url.path[:200]} (see /openapi.json)"
        elif exc.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path[:200]} (see /openapi.json)"
        return JSONResponse({"error": message}, status_code=exc.status_code, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception):  # pragma: no cover - a bug, not a client error
        return JSONResponse({"error": f"internal error ({type(exc).__name__}); the session is unchanged"},
                            status_code=500)

    def locked(key: str, work: Callable[[Session], Any]) -> Any:
        entry = store.get(key)
        with entry.lock:
            return work(entry.session)

    # ------------------------------------------------------------------ endpoints
    @app.get("/healthz", summary="Liveness and what is loaded")
    def healthz() -> dict[str, Any]:
        return {"status": "ok", "version": __version__, "sessions": len(store),
                "kb": {"causes": len(kb.causes), "facts": len(kb.facts), "rules": len(kb.rules),
                       "signatures": len(kb.signatures), "symptoms": len(kb.symptoms)}}

    @app.post("/sessions", status_code=201, summary="Start a conversation (optionally with a first turn)")
    def create_session(turn: Turn | None = Body(None)) -> dict[str, Any]:
        session = doctor.session()
        if turn is not None:
            _apply(session, turn, limits)
        view = _view(session, turn.questions if turn else 3)
        key = store.create(session)
        return {"id": key, "expires_after_idle_s": store.ttl, **view}

    @app.get("/sessions/{session_id}", summary="Diagnoses, next questions, plan and facts")
    def get_session(session_id: str, questions: int = 3) -> dict[str, Any]:
        if not 0 <= questions <= 20:
            raise ApiError(422, "questions: must be between 0 and 20")
        return {"id": session_id, **locked(session_id, lambda s: _view(s, questions))}

    @app.post("/sessions/{session_id}/text", summary="Add what the user said (or pasted)")
    def add_text(session_id: str, body: TextBody) -> dict[str, Any]:
        _check_text(body.text)

        def work(session: Session) -> dict[str, Any]:
            _apply(session, Turn(text=body.text), limits)
            return _view(session, body.questions)
        return {"id": session_id, **locked(session_id, work)}

    @app.post(
        "/sessions/{session_id}/log",
        summary="Add a log: a JSON body {log, name} or the raw text (text/plain)",
        openapi_extra={"requestBody": {"required": True, "content": {
            "application/json": {"schema": LogBody.model_json_schema()},
            "text/plain": {"schema": {"type": "string"}},
        }}},
    )
    async def add_log(session_id: str, request: Request, name: str = "log", questions: int = 3) -> dict[str, Any]:
        raw = await request.body()
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind in ("application/json", ""):
            try:
                body = LogBody.model_validate_json(raw) if raw else None
            except ValueError as exc:
                errors = exc.errors() if hasattr(exc, "errors") else [{"msg": str(exc)}]
                raise ApiError(422, _validation_message(errors)) from None
            if body is None:
                raise ApiError(422, "request body is missing: send {\"log\": \"...\"} or text/plain")
            log, name, questions = body.log, body.name, body.questions
        elif kind.startswith("text/"):
            log = raw.decode("utf-8", "replace")
            if not 0 < len(name) <= MAX_NAME_CHARS:
                raise ApiError(422, f"name: must be 1 to {MAX_NAME_CHARS} characters")
        else:
            raise ApiError(415, f"content type {kind[:100]!r} is not accepted: use application/json or text/plain")
        if not 0 <= questions <= 20:
            raise ApiError(422, "questions: must be between 0 and 20")
        _check_log(log, limits)

        def work(session: Session) -> dict[str, Any]:
            _apply(session, Turn(log=log, log_name=name), limits)
            return _view(session, questions)
        return {"id": session_id, **await run_in_threadpool(locked, session_id, work)}

    @app.post(
        "/sessions/{session_id}/answers",
        summary="Answer questions: {fact, value} or {fact, dont_know: true}, one, a list, or {answers: [...]}",
        openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": {"oneOf": [
            Answer.model_json_schema(), {"type": "array", "items": Answer.model_json_schema()},
            AnswersBody.model_json_schema(),
        ]}}}}},
    )
    def add_answers(session_id: str, body: Any = Body(...)) -> dict[str, Any]:
        answers, questions = _parse_answers(body)

        def work(session: Session) -> dict[str, Any]:
            # Check every fact first so a bad answer leaves the session unchanged.
            for answer in answers:
                if answer.fact not in kb.facts:
                    raise ApiError(422, f"answers: unknown fact {answer.fact!r} (use the `id` of a question)")
            _apply(session, Turn(answers=answers), limits)
            return _view(session, questions)
        return {"id": session_id, **locked(session_id, work)}

    @app.get("/sessions/{session_id}/how/{cause_id}", summary="How the engine weighed a cause")
    def how(session_id: str, cause_id: str) -> dict[str, Any]:
        if cause_id not in kb.causes:
            raise ApiError(404, f"unknown cause {cause_id[:MAX_NAME_CHARS]!r}")
        return locked(session_id, lambda s: s.how(cause_id).to_dict())

    @app.get("/sessions/{session_id}/why/{fact_id}", summary="Why a question is worth asking")
    def why(session_id: str, fact_id: str) -> dict[str, Any]:
        if fact_id not in kb.facts:
            raise ApiError(404, f"unknown fact {fact_id[:MAX_NAME_CHARS]!r}")
        return locked(session_id, lambda s: s.why(fact_id).to_dict())

    @app.get("/sessions/{session_id}/state", summary="The session's state, for POST /stateless/turn or later")
    def get_state(session_id: str) -> dict[str, Any]:
        return {"id": session_id, "state": locked(session_id, lambda s: s.to_dict())}

    @app.delete("/sessions/{session_id}", status_code=204, response_class=Response, summary="Forget a session")
    def delete_session(session_id: str) -> Response:
        if not store.delete(session_id):
            raise ApiError(404, f"no session {session_id[:64]!r}")
        return Response(status_code=204)

    @app.post("/stateless/turn", summary="One turn for a client that keeps the state itself")
    def stateless_turn(turn: StatelessTurn) -> dict[str, Any]:
        if turn.state is None:
            session = doctor.session()
        else:
            try:
                session = Session.from_json(doctor, turn.state)
            except SessionError as exc:
                raise _engine_error(exc) from None
        _apply(session, turn, limits)
        return {"state": session.to_dict(), **_view(session, turn.questions)}

    return app


# ------------------------------------------------------------------------------- CLI
def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve_main(argv: list[str]) -> int:
    """``diagnose serve [--host 127.0.0.1] [--port 8000]``: run the HTTP API until interrupted."""
    parser = argparse.ArgumentParser(prog="diagnose serve", description="Serve the diagnosis API over HTTP (JSON).")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    parser.add_argument("--max-sessions", type=int, default=DEFAULT_MAX_SESSIONS)
    parser.add_argument("--session-ttl", type=float, default=DEFAULT_SESSION_TTL, help="seconds idle before a session is dropped")
    parser.add_argument("--max-body-bytes", type=int, default=DEFAULT_MAX_BODY_BYTES)
    parser.add_argument("--max-log-bytes", type=int, default=DEFAULT_MAX_LOG_BYTES)
    parser.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"])
    args = parser.parse_args(argv)
    try:
        _require_fastapi()
    except ImportError as exc:
        print(f"diagnose serve: {exc}", file=sys.stderr)
        return 2
    import uvicorn

    from .kb import KBError

    try:
        app = create_app(max_body_bytes=args.max_body_bytes, max_log_bytes=args.max_log_bytes,
                         max_sessions=args.max_sessions, session_ttl=args.session_ttl)
    except (KBError, ValueError) as exc:
        print(f"diagnose serve: the knowledge base cannot be loaded:\n{exc}", file=sys.stderr)
        return 1
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    try:
        sock = socket.create_server((args.host, args.port), family=family, reuse_port=False)
    except OSError as exc:
        print(f"diagnose serve: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    port = sock.getsockname()[1]
    shown = f"[{args.host}]" if family == socket.AF_INET6 else args.host
    print(f"nccl-doctor API on http://{shown}:{port}  (OpenAPI: /openapi.json, docs: /docs; Ctrl-C stops)",
          file=sys.stderr, flush=True)
    if not _is_loopback(args.host):
        print("warning: listening beyond this machine; the API has no authentication - put it behind "
              "your own proxy", file=sys.stderr)
    config = uvicorn.Config(app, log_level=args.log_level, timeout_keep_alive=5, limit_concurrency=512)
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # pragma: no cover
        pass
    finally:
        sock.close()
    return 0
