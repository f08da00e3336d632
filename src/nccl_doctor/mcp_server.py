"""``diagnose mcp``: the consultation as Model Context Protocol tools, for LLM agents.

An agent (in a chat tool, an IDE or a ticketing system) drives a real consultation: start it
from the user's words (and a log), add logs, answer the engine's questions (or say "don't
know"), read the state (diagnoses, next questions, fix plan, facts), ask how a cause was
reached or why a question matters, and export a redacted Markdown report. The agent does the
talking; the knowledge base does the reasoning.

Built on the official ``mcp`` SDK (``MCPServer``), optional extra ``mcp``. The tools are thin:
sessions live in the HTTP server's :class:`~.server.store.SessionStore` (same limits and idle
expiry), turns and views are the jobs of :mod:`.server.work`, so no diagnosis logic lives here.
A session is named by the ``session_id`` a tool returns, or carried by the agent as ``state``
(stateless: pass the ``state`` you got back, nothing is kept here).

    diagnose mcp                 # stdio, for an MCP client's config (command + args)
    diagnose mcp --http 8765     # streamable HTTP on http://127.0.0.1:8765/mcp
"""
from __future__ import annotations

import argparse
import json
import socket
import sys
from typing import Any, NoReturn, Union

from . import __version__
from .engine.session import Doctor
from .errors import UsageError
from .server.limits import ApiError, Limits
from .server.work import check_turn_sizes

__all__ = ["build_server", "mcp_main", "INSTALL_HINT"]

INSTALL_HINT = "pip install 'nccl-doctor[mcp]'"

INSTRUCTIONS = (
    "nccl-doctor diagnoses why distributed training (NCCL, torch.distributed, MPI, EFA/InfiniBand, "
    "containers) hangs, times out or crashes, and what to change. Use it when a user reports such a "
    "failure. Start with start_consultation (the user's words, plus any log they pasted), then ask the "
    "user the returned next_question and pass the reply to answer_question, until next_question is null "
    "or the top diagnosis is clear; then show the plan. Every diagnosis, fix and reference comes from "
    "a curated knowledge base: quote them (with their references) rather than inventing your own, and "
    "say so when nothing was raised. Use explain_cause when the user asks why a cause is suspected, "
    "explain_question when they ask why a question matters, export_report for a ticket."
)
_STATE_HELP = ("Give session_id from start_consultation, or in stateless mode `state`: the `state` object "
               "the previous call returned (nothing is kept on the server).")


def _with_state(text: str) -> str:
    return " ".join(text.split()) + " " + _STATE_HELP
Value = Union[bool, int, float, str]


def _tool_error(exc: ApiError) -> NoReturn:
    from mcp.server.mcpserver.exceptions import ToolError

    raise ToolError(exc.message) from None


def build_server(doctor: Doctor | None = None, *, limits: Limits | None = None, workers: int = 0):
    """The :class:`mcp.server.mcpserver.MCPServer` with the consultation tools and KB resources."""
    from mcp.server.mcpserver import MCPServer

    from .server.pool import Engine
    from .server.store import SessionStore

    if doctor is None:
        from . import load_doctor

        doctor = load_doctor()
    if limits is None:  # one agent host is one client: it may use the whole table
        limits = Limits(max_sessions_per_client=Limits().max_sessions)
    store = SessionStore(limits)
    engine = Engine(doctor, limits, workers=workers)
    kb = doctor.kb
    server = MCPServer("nccl-doctor", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")

    async def turn(session_id: str | None, state: dict[str, Any] | str | None, data: dict[str, Any]) -> dict[str, Any]:
        try:
            check_turn_sizes(data, limits)
            if state is not None:
                new_state, view = await engine.run("turn", state, {**data, "client_state": True})
                return {"state": new_state, **json.loads(view)}
            if not session_id:
                raise ApiError(422, "give session_id (from start_consultation) or state (stateless mode)")
            entry = store.get(session_id)
            async with entry.lock:
                new_state, view = await engine.run("turn", entry.state, data)
                store.update(entry, new_state, (data.get("questions", 3), view))
            return {"session_id": session_id, **json.loads(view)}
        except ApiError as exc:
            _tool_error(exc)

    async def read(session_id: str | None, state: dict[str, Any] | str | None, job: str, data: dict[str, Any]) -> Any:
        try:
            if state is None:
                if not session_id:
                    raise ApiError(422, "give session_id (from start_consultation) or state (stateless mode)")
                return await engine.run(job, store.get(session_id).state, data)
            return await engine.run(job, state, {**data, "client_state": True})
        except ApiError as exc:
            _tool_error(exc)

    @server.tool()
    async def start_consultation(description: str, log_text: str | None = None, log_name: str = "log",
                                 stateless: bool = False) -> dict[str, Any]:
        """Start diagnosing a distributed-training failure from the user's own words.

        description: what happened, in the user's words (pasted error lines welcome).
        log_text: optional log text (NCCL_DEBUG output, tracebacks, launcher logs).
        stateless: true to get the whole `state` back instead of a session_id.
        Returns ranked diagnoses (with evidence, fixes and references from the knowledge base),
        next_question (ask the user exactly that), the fix plan and the facts so far, plus a
        session_id for the next calls. Sessions expire after an hour idle.
        """
        data = {"text": description, "log": log_text, "log_name": log_name, "questions": 3}
        try:
            check_turn_sizes(data, limits)
            state, view = await engine.run("turn", None, data)
            if stateless:
                return {"state": state, **json.loads(view)}
            key = store.create(state, "mcp", (3, view))
        except ApiError as exc:
            _tool_error(exc)
        return {"session_id": key, "expires_after_idle_s": limits.session_ttl, **json.loads(view)}

    @server.tool(description=_with_state("""Add log text the user pasted or attached (NCCL_DEBUG=INFO output,
        tracebacks, per-rank logs); log_name names it in the evidence (e.g. "rank3.log"). Returns the
        updated diagnoses, next_question and plan."""))
    async def add_log(log_text: str, log_name: str = "log", session_id: str | None = None,
                      state: dict[str, Any] | None = None) -> dict[str, Any]:
        return await turn(session_id, state, {"log": log_text, "log_name": log_name, "questions": 3})

    @server.tool(description=_with_state("""Add more of the user's own words (new symptoms, what they tried, pasted lines).

        Use answer_question instead when the user replies to next_question."""))
    async def add_description(text: str, session_id: str | None = None,
                              state: dict[str, Any] | None = None) -> dict[str, Any]:
        return await turn(session_id, state, {"text": text, "questions": 3})

    @server.tool(description=_with_state("""Give the user's answer to a question: `fact` is the question's `id`, `answer` a value
        (yes/no as true/false, one of the question's `choices`, a number or a version), or
        dont_know=true when the user cannot tell (it is not asked again).

        Returns the updated diagnoses, the next question and the plan."""))
    async def answer_question(fact: str, answer: Value | None = None, dont_know: bool = False,
                              session_id: str | None = None, state: dict[str, Any] | None = None) -> dict[str, Any]:
        if (answer is None) == (not dont_know):
            from mcp.server.mcpserver.exceptions import ToolError

            raise ToolError("give either `answer` or dont_know=true")
        item = {"fact": fact, "value": answer, "dont_know": dont_know, "retract": False}
        return await turn(session_id, state, {"answers": [item], "questions": 3})

    @server.tool(description=_with_state("""The consultation now: diagnoses (best first, with evidence, fixes and references), the
        next questions, the fix plan, every fact with its source, and what logs contributed."""))
    async def get_state(session_id: str | None = None, state: dict[str, Any] | None = None,
                        questions: int = 3) -> dict[str, Any]:
        if not 0 <= questions <= 20:
            _tool_error(ApiError(422, "questions: must be between 0 and 20"))
        return json.loads(await read(session_id, state, "view", {"questions": questions}))

    @server.tool(description=_with_state("""How a diagnosis was reached: the rules that fired, their contributions and the facts (with
        where each came from). Use when the user asks "why do you think that?"."""))
    async def explain_cause(cause_id: str, session_id: str | None = None,
                            state: dict[str, Any] | None = None) -> dict[str, Any]:
        return json.loads(await read(session_id, state, "how", {"cause": cause_id}))

    @server.tool(description=_with_state("""Why a question is worth asking: which causes each answer would move. Use when the user
        asks "why do you need to know?"."""))
    async def explain_question(fact: str, session_id: str | None = None,
                               state: dict[str, Any] | None = None) -> dict[str, Any]:
        return json.loads(await read(session_id, state, "why", {"fact": fact}))

    @server.tool(description=_with_state("""The consultation as a Markdown report for a ticket or a chat: plan, diagnoses with
        references, answers and facts. Host names, addresses and secrets are redacted."""))
    async def export_report(session_id: str | None = None, state: dict[str, Any] | None = None) -> str:
        return await read(session_id, state, "report", {"redact": True})

    @server.tool()
    async def end_consultation(session_id: str) -> dict[str, Any]:
        """Forget a consultation held on the server (it also expires after an hour idle)."""
        return {"session_id": session_id, "deleted": store.delete(session_id)}

    @server.resource("nccl-doctor://causes", mime_type="application/json",
                     description="Every cause the knowledge base knows: id, title, area and references.")
    def causes() -> str:
        return json.dumps([{"id": c.id, "title": c.title, "area": c.area, "references": list(c.references)}
                           for c in kb.causes.values()], ensure_ascii=False)

    @server.resource("nccl-doctor://causes/{cause_id}", mime_type="application/json",
                     description="One cause: explanation, references and fixes, to quote.")
    def cause(cause_id: str) -> str:
        from mcp.server.mcpserver.exceptions import ResourceNotFoundError

        found = kb.causes.get(cause_id)
        if found is None:
            raise ResourceNotFoundError(f"unknown cause {cause_id[:200]!r}")
        return json.dumps({"id": found.id, "title": found.title, "area": found.area,
                           "explanation": found.explanation, "references": list(found.references),
                           "fixes": [dict(kb.fixes[f]) for f in found.fixes]}, ensure_ascii=False)

    @server.resource("nccl-doctor://probes", mime_type="application/json",
                     description="The host probes `diagnose --probe` can run, and the facts each establishes.")
    def probes() -> str:
        from .probes.api import list_probes

        return json.dumps([{"name": p.name, "title": p.title, "facts": p.facts} for p in list_probes()])

    server.nccl_doctor_engine = engine  # type: ignore[attr-defined]  # closed by mcp_main
    return server


# ------------------------------------------------------------------------------- CLI
class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def mcp_main(argv: list[str]) -> int:
    """``diagnose mcp [--http PORT]``: serve the tools on stdio, or streamable HTTP on loopback."""
    from .server.main import _port

    parser = _Parser(prog="diagnose mcp", description="Serve the consultation as MCP tools (stdio by default).")
    parser.add_argument("--http", type=_port, metavar="PORT",
                        help="serve streamable HTTP on http://127.0.0.1:PORT/mcp instead (0 picks a free port)")
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        print(f"diagnose mcp: {exc}", file=sys.stderr)
        return 2
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError:
        print(f"diagnose mcp: the mcp SDK is not installed; {INSTALL_HINT}", file=sys.stderr)
        return 2
    server = build_server()
    try:
        if args.http is None:
            server.run("stdio")
            return 0
        return _serve_http(server, args.http)
    except KeyboardInterrupt:
        return 0
    finally:
        server.nccl_doctor_engine.close()


def _serve_http(server, port: int) -> int:
    import uvicorn

    from .server.connections import guarded_protocol

    try:
        sock = socket.create_server(("127.0.0.1", port))
    except OSError as exc:
        print(f"diagnose mcp: cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    limits = server.nccl_doctor_engine.limits
    app = server.streamable_http_app(host="127.0.0.1", max_request_body_size=limits.max_body_bytes)
    print(f"nccl-doctor MCP server on http://127.0.0.1:{sock.getsockname()[1]}/mcp  (Ctrl-C stops)",
          file=sys.stderr, flush=True)
    config = uvicorn.Config(app, log_level="warning", http=guarded_protocol(limits), timeout_keep_alive=5,
                            timeout_graceful_shutdown=max(1, round(limits.drain_s)))
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
    return 0
