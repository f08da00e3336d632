"""What the servers (HTTP and MCP) accept, and the error they answer with when they refuse.

Every limit has a default here and a flag in ``diagnose serve``; every refusal is an
:class:`ApiError` whose message names the limit, so a client (or an agent) can act on it.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import DoctorError

__all__ = ["ApiError", "Limits", "INSTALL_HINT"]

INSTALL_HINT = "pip install 'nccl-doctor[serve]'"


class ApiError(DoctorError):
    """A request the server refuses (or cannot serve now): HTTP ``status`` and a one-line message."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


@dataclass(frozen=True)
class Limits:
    """Sizes, counts and times that bound what one client can make the server hold or do."""

    max_body_bytes: int = 6 << 20            # one request body; a log inside JSON is escaped, so leave room
    max_log_bytes: int = 4 << 20             # one log
    max_sessions: int = 1_000                # sessions held at once, all clients together
    max_sessions_per_client: int = 250       # held by one client address
    session_ttl: float = 3_600.0             # seconds idle before a session is dropped
    max_session_text_chars: int = 400_000    # all texts of one session together (two of the longest)
    max_session_logs: int = 200              # logs added to one session
    max_state_bytes: int = 1 << 20           # a session's JSON state: held sessions x this bounds memory
    budget_s: float = 10.0                   # engine time for one request before it is stopped
    request_timeout_s: float = 20.0          # to send a request's headers and body
    max_connections: int = 2_048             # open connections, all clients together
    max_connections_per_client: int = 512    # open connections from one address
    max_requests_in_flight: int = 1_024      # requests being served or queued at once
    drain_s: float = 10.0                    # on SIGTERM / Ctrl-C: wait this long for requests in flight

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not value > 0:
                raise ValueError(f"{name.replace('_', '-')} must be positive, got {value}")
        if self.max_log_bytes > self.max_body_bytes:
            object.__setattr__(self, "max_log_bytes", self.max_body_bytes)
