"""What the servers (HTTP and MCP) accept, and the error they answer with when they refuse.

Every limit has a default here and a flag in ``diagnose serve``; every refusal is an
:class:`ApiError` whose message names the limit, so a client (or an agent) can act on it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

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

    max_body_bytes: int = field(default=6 << 20,
        metadata={"help": "one request body; a log inside JSON is escaped, so it needs more room than the log"})
    max_log_bytes: int = field(default=4 << 20,
        metadata={"help": "one log"})
    max_sessions: int = field(default=1_000,
        metadata={"help": "sessions held at once, all clients together"})
    max_sessions_per_client: int = field(default=250,
        metadata={"help": "held by one client address"})
    session_ttl: float = field(default=3_600.0,
        metadata={"help": "seconds idle before a session is dropped"})
    max_session_text_chars: int = field(default=400_000,
        metadata={"help": "all texts of one session together (two of the longest)"})
    max_session_logs: int = field(default=200,
        metadata={"help": "logs added to one session"})
    max_state_bytes: int = field(default=1 << 20,
        metadata={"help": "a session's JSON state: held sessions x this bounds memory"})
    budget_s: float = field(default=10.0,
        metadata={"help": "engine time for one request before it is stopped"})
    request_timeout_s: float = field(default=20.0,
        metadata={"help": "to send a request's headers and body; also how long an idle kept-alive connection "
                      "is held (keep it above clients' own idle expiry, 5 s for httpx)"})
    max_connections: int = field(default=2_048,
        metadata={"help": "open connections, all clients together"})
    max_connections_per_client: int = field(default=512,
        metadata={"help": "open connections from one address"})
    max_requests_in_flight: int = field(default=1_024,
        metadata={"help": "requests being served or queued at once"})
    drain_s: float = field(default=10.0,
        metadata={"help": "on SIGTERM / Ctrl-C: wait this long for requests in flight"})

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not value > 0:
                raise ValueError(f"{name.replace('_', '-')} must be positive, got {value}")
        if self.max_log_bytes > self.max_body_bytes:
            object.__setattr__(self, "max_log_bytes", self.max_body_bytes)
