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

Engine work runs off the event loop in worker processes (one per core by default), each
request within a time budget; slow and idle connections are closed, and each client address
has its own caps on connections and sessions (see :mod:`.limits`).

The parts: :mod:`.limits` (what is accepted), :mod:`.store` (sessions, shared with the MCP
server), :mod:`.work` (the session work and views, shared with the MCP server), :mod:`.pool`
(where that work runs), :mod:`.bodies`, :mod:`.routes`, :mod:`.middleware`,
:mod:`.connections` and :mod:`.main` (``serve_main``).

FastAPI and uvicorn are the optional extra ``serve``: ``pip install 'nccl-doctor[serve]'``.
"""
from __future__ import annotations

from typing import Any

from .limits import INSTALL_HINT, ApiError, Limits
from .main import require_fastapi, serve_main
from .store import SessionStore

__all__ = ["create_app", "serve_main", "SessionStore", "ApiError", "Limits", "INSTALL_HINT"]


def create_app(*args: Any, **kwargs: Any):
    """The FastAPI application (see :func:`.routes.create_app`); ImportError with the install hint
    when the ``serve`` extra is missing."""
    require_fastapi()
    from .routes import create_app as make

    return make(*args, **kwargs)
