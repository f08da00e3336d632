"""The HTTP API: FastAPI routes over the session store and the engine jobs of :mod:`.work`."""
from __future__ import annotations

import json
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

from fastapi import Body, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import TypeAdapter, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__
from ..engine.session import Doctor
from .bodies import MAX_ANSWERS_PER_REQUEST, MAX_NAME_CHARS, Answer, AnswersBody, LogBody, StatelessTurn, TextBody, Turn
from .limits import ApiError, Limits
from .middleware import BodyLimit, InFlightLimit
from .pool import HEAVY_CHARS, Engine
from .store import SessionStore
from .work import check_turn_sizes, clean

__all__ = ["create_app", "validation_message"]


def validation_message(errors: list[dict[str, Any]]) -> str:
    """pydantic's errors as one line naming each field."""
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
    return clean("; ".join(parts) or "invalid request")


def _json(payload: bytes, **extra: Any) -> Response:
    """A view (JSON object bytes from a worker) with ``extra`` keys in front, sent as it is."""
    head = json.dumps(extra, ensure_ascii=False, separators=(",", ":"))[1:-1].encode("utf-8")
    return Response(b"{" + head + (b"," if extra and payload != b"{}" else b"") + payload[1:],
                    media_type="application/json")


def _parse_answers(body: Any) -> tuple[list[Answer], int]:
    """One answer, a list of them, or ``{"answers": [...], "questions": n}``."""
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
        raise ApiError(422, validation_message(list(exc.errors()))) from None
    raise ApiError(422, "answers: send {\"fact\": ..., \"value\": ...}, a list of them, or {\"answers\": [...]}")


def _turn_data(turn: Turn) -> dict[str, Any]:
    return {"text": turn.text, "log": turn.log, "log_name": turn.log_name, "questions": turn.questions,
            "answers": [a.model_dump() for a in turn.answers]}


def _is_heavy(data: dict[str, Any]) -> bool:
    """A turn with a large input (log or text) takes the lane that leaves a worker for small turns;
    a log of a few lines costs what a sentence does and is served like one."""
    return len(data.get("log") or "") > HEAVY_CHARS or len(data.get("text") or "") > HEAVY_CHARS


#: ``?view=`` on a turn that changes a held session: ``full`` (the default) answers with the view,
#: as GET /sessions/{id} gives it; ``none`` with the session's id alone, for a client that reads
#: the view later (GET builds it then, once): a turn whose view nobody reads costs no view.
View = Annotated[Literal["full", "none"], Query(description="`none`: reply with the id only; GET the view when needed")]


def _check_questions(questions: int) -> None:
    if not 0 <= questions <= 20:
        raise ApiError(422, "questions: must be between 0 and 20")


def create_app(doctor: Doctor | None = None, *, limits: Limits | None = None, workers: int = 0,
               kb_dir: str | None = None, **overrides: Any):
    """The FastAPI application over one KB (the packaged one by default).

    ``limits`` (or keyword overrides of its fields, e.g. ``max_sessions=3``) bound what clients
    can send and hold; ``workers`` > 0 runs engine work in that many processes with a hard time
    budget (see :mod:`.pool`), 0 in threads of this process.
    """
    if limits is None:
        limits = Limits(**overrides)
    elif overrides:
        raise TypeError("give either limits or keyword overrides, not both")
    if doctor is None:
        from .. import load_doctor

        doctor = load_doctor(kb_dir)
    store = SessionStore(limits)
    engine = Engine(doctor, limits, workers=workers, kb_dir=kb_dir)
    kb = doctor.kb

    @asynccontextmanager
    async def lifespan(app):
        try:
            yield
        finally:
            engine.close()

    app = FastAPI(
        title="nccl-doctor",
        version=__version__,
        lifespan=lifespan,
        description=(
            "Why distributed training hangs, times out or crashes (NCCL, torch.distributed, MPI, "
            "the network), and what to change. Send what the user says, logs and answers; get "
            "ranked diagnoses, the next question to ask and a fix plan. Errors are "
            "`{\"error\": message}`."
        ),
    )
    app.state.store, app.state.doctor, app.state.engine, app.state.limits = store, doctor, engine, limits
    app.add_middleware(BodyLimit, max_bytes=limits.max_body_bytes)
    app.add_middleware(InFlightLimit, limit=limits.max_requests_in_flight)

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError):
        return JSONResponse({"error": clean(exc.message)}, status_code=exc.status, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        return JSONResponse({"error": validation_message(list(exc.errors()))}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException):
        message = exc.detail if isinstance(exc.detail, str) else "request failed"
        if exc.status_code == 404 and message == "Not Found":
            message = f"no such endpoint: {request.method} {request.url.path[:200]} (see /openapi.json)"
        elif exc.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path[:200]} (see /openapi.json)"
        elif exc.status_code == 400 and "parsing the body" in message:
            message = "request body is not valid JSON (or is nested too deeply)"
        return JSONResponse({"error": clean(message)}, status_code=exc.status_code, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception):  # a bug, not a client error
        return JSONResponse({"error": f"internal error ({type(exc).__name__}); the session is unchanged"},
                            status_code=500)

    def client_of(request: Request) -> str:
        return request.client.host if request.client else "local"

    async def change(session_id: str, data: dict[str, Any], view: str) -> Response:
        """A turn on a held session: run it on the state, keep the new state only if it succeeds.
        With ``view="none"`` the reply holds only the id and no view is built (GET builds it)."""
        check_turn_sizes(data, limits)
        data["view"] = view != "none"
        entry = store.get(session_id)
        async with entry.lock:
            state, shown = await engine.run("turn", entry.state, data, heavy=_is_heavy(data))
            store.update(entry, state, (data["questions"], shown) if shown is not None else None)
        return _json(shown if shown is not None else b"{}", id=session_id)

    async def look(session_id: str, job: str, data: dict[str, Any], cache_key: Any = None) -> bytes:
        """A job that reads a held session (a view, how, why), cached until the session changes."""
        entry = store.get(session_id)
        cached = entry.views.get(cache_key) if cache_key is not None else None
        if cached is not None:
            return cached
        version = entry.version
        result = await engine.run(job, entry.state, data)
        if cache_key is not None:
            store.remember_view(entry, version, cache_key, result)
        return result

    # ------------------------------------------------------------------ endpoints
    # Every endpoint is ``async``: those that only read or change the store (a dict under a lock held
    # for microseconds) run on the event loop, where a plain ``def`` would be handed to a thread and
    # its answer waited for (a thread hop per DELETE, ~5 % of the main process's CPU under load).
    @app.get("/healthz", summary="Liveness and what is loaded")
    async def healthz() -> dict[str, Any]:
        return {"status": "ok", "version": __version__, "sessions": len(store), "workers": engine.workers,
                "workers_ready": engine.ready_workers,
                "kb": {"causes": len(kb.causes), "facts": len(kb.facts), "rules": len(kb.rules),
                       "signatures": len(kb.signatures), "symptoms": len(kb.symptoms)}}

    @app.post("/sessions", status_code=201, summary="Start a conversation (optionally with a first turn)")
    async def create_session(request: Request, turn: Turn | None = Body(None), view: View = "full") -> Response:
        data = {**_turn_data(turn or Turn()), "view": view != "none"}
        check_turn_sizes(data, limits)
        state, shown = await engine.run("turn", None, data, heavy=_is_heavy(data))
        key = store.create(state, client_of(request), (data["questions"], shown) if shown is not None else None)
        response = _json(shown if shown is not None else b"{}", id=key, expires_after_idle_s=store.ttl)
        response.status_code = 201
        return response

    @app.get("/sessions/{session_id}", summary="Diagnoses, next questions, plan and facts")
    async def get_session(session_id: str, questions: int = 3) -> Response:
        _check_questions(questions)
        return _json(await look(session_id, "view", {"questions": questions}, questions), id=session_id)

    @app.post("/sessions/{session_id}/text", summary="Add what the user said (or pasted)")
    async def add_text(session_id: str, body: TextBody, view: View = "full") -> Response:
        return await change(session_id, {"text": body.text, "questions": body.questions}, view)

    @app.post(
        "/sessions/{session_id}/log",
        summary="Add a log: a JSON body {log, name} or the raw text (text/plain)",
        openapi_extra={"requestBody": {"required": True, "content": {
            "application/json": {"schema": LogBody.model_json_schema()},
            "text/plain": {"schema": {"type": "string"}},
        }}},
    )
    async def add_log(session_id: str, request: Request, name: str = "log", questions: int = 3,
                      view: View = "full") -> Response:
        raw = await request.body()
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind in ("application/json", ""):
            try:  # the same JSON reader as every other body (it takes a lone surrogate, pydantic's does not)
                parsed = json.loads(raw) if raw else None
                if isinstance(parsed, dict):
                    parsed = {k: clean(v) if isinstance(v, str) else v for k, v in parsed.items()}
                body = LogBody.model_validate(parsed) if parsed is not None else None
            except ValidationError as exc:
                raise ApiError(422, validation_message(list(exc.errors()))) from None
            except (ValueError, RecursionError):
                raise ApiError(422, "request body is not valid JSON (or is nested too deeply)") from None
            if body is None:
                raise ApiError(422, "request body is missing: send {\"log\": \"...\"} or text/plain")
            log, name, questions = body.log, body.name, body.questions
        elif kind.startswith("text/"):
            log = raw.decode("utf-8", "replace")
            if not 0 < len(name) <= MAX_NAME_CHARS:
                raise ApiError(422, f"name: must be 1 to {MAX_NAME_CHARS} characters")
        else:
            raise ApiError(415, f"content type {kind[:100]!r} is not accepted: use application/json or text/plain")
        _check_questions(questions)
        return await change(session_id, {"log": log, "log_name": name, "questions": questions}, view)

    @app.post(
        "/sessions/{session_id}/answers",
        summary="Answer questions: {fact, value} or {fact, dont_know: true}, one, a list, or {answers: [...]}",
        openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": {"oneOf": [
            Answer.model_json_schema(), {"type": "array", "items": Answer.model_json_schema()},
            AnswersBody.model_json_schema(),
        ]}}}}},
    )
    async def add_answers(session_id: str, body: Any = Body(...), view: View = "full") -> Response:
        answers, questions = _parse_answers(body)
        return await change(session_id, {"answers": [a.model_dump() for a in answers], "questions": questions}, view)

    @app.get("/sessions/{session_id}/how/{cause_id}", summary="How the engine weighed a cause")
    async def how(session_id: str, cause_id: str) -> Response:
        if cause_id not in kb.causes:
            raise ApiError(404, f"unknown cause {cause_id[:MAX_NAME_CHARS]!r}")
        return _json(await look(session_id, "how", {"cause": cause_id}, ("how", cause_id)))

    @app.get("/sessions/{session_id}/why/{fact_id}", summary="Why a question is worth asking")
    async def why(session_id: str, fact_id: str) -> Response:
        if fact_id not in kb.facts:
            raise ApiError(404, f"unknown fact {fact_id[:MAX_NAME_CHARS]!r}")
        return _json(await look(session_id, "why", {"fact": fact_id}, ("why", fact_id)))

    @app.get("/sessions/{session_id}/report", summary="The session as a Markdown report (redacted by default)",
             response_class=Response, responses={200: {"content": {"text/markdown": {}}}})
    async def report(session_id: str, redact: bool = True) -> Response:
        entry = store.get(session_id)
        text = await engine.run("report", entry.state, {"redact": redact})
        return Response(text, media_type="text/markdown; charset=utf-8")

    @app.get("/sessions/{session_id}/state", summary="The session's state, for POST /stateless/turn or later")
    async def get_state(session_id: str) -> dict[str, Any]:
        return {"id": session_id, "state": store.get(session_id).state}

    @app.delete("/sessions/{session_id}", status_code=204, response_class=Response, summary="Forget a session")
    async def delete_session(session_id: str) -> Response:
        if not store.delete(session_id):
            raise ApiError(404, f"no session {session_id[:64]!r}")
        return Response(status_code=204)

    @app.post("/stateless/turn", summary="One turn for a client that keeps the state itself")
    async def stateless_turn(request: Request, turn: StatelessTurn) -> Response:
        data = {**_turn_data(turn), "client_state": turn.state is not None}
        check_turn_sizes(data, limits)
        if isinstance(turn.state, str) and len(turn.state) > limits.max_state_bytes:
            raise ApiError(413, f"state is {len(turn.state)} characters; the limit is {limits.max_state_bytes}")
        size = request.headers.get("content-length", "")
        heavy = _is_heavy(data) or (size.isdigit() and int(size) > 4 * HEAVY_CHARS)
        try:
            state, view = await engine.run("turn", turn.state, data, heavy=heavy)
        except RecursionError:
            raise ApiError(422, "state: nested too deeply to be a session state") from None
        return _json(view, state=state)

    return app

