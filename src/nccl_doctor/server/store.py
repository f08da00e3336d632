"""Server-side sessions, shared by the HTTP and the MCP server.

A session is held as its JSON state (what :meth:`Session.to_dict` gives), so any engine
worker can take a turn on it and a turn that fails or is stopped leaves it exactly as it was.
Each entry caches its last views until the session changes. The table has a cap, a cap per
client address (one client cannot fill it), and idle expiry.
"""
from __future__ import annotations

import asyncio
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .limits import ApiError, Limits

__all__ = ["SessionStore", "Entry", "MAX_CACHED_VIEWS"]

MAX_CACHED_VIEWS = 8  # per session: views, how and why answers kept until it changes


@dataclass
class Entry:
    """One session: its state, who made it, a lock that orders its turns, cached views."""

    state: dict[str, Any]
    owner: str
    created: float
    used: float
    version: int = 0
    views: dict[Any, bytes] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class SessionStore:
    """Sessions in memory: a cap overall and per client, idle expiry, one lock for the table."""

    def __init__(self, limits: Limits | None = None, *, clock: Callable[[], float] = time.monotonic):
        self.limits = limits or Limits()
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[str, Entry] = {}
        self._owners: Counter[str] = Counter()

    @property
    def ttl(self) -> float:
        return self.limits.session_ttl

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def _drop(self, key: str) -> Entry | None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._owners[entry.owner] -= 1
            if self._owners[entry.owner] <= 0:
                del self._owners[entry.owner]
        return entry

    def _purge(self, now: float) -> None:
        for key in [k for k, e in self._entries.items() if now - e.used > self.ttl]:
            self._drop(key)

    def create(self, state: dict[str, Any], owner: str = "local", view: tuple[Any, bytes] | None = None) -> str:
        """Keep a new session's state (and its first view); return its id."""
        now = self._clock()
        limits = self.limits
        with self._lock:
            self._purge(now)
            if self._owners[owner] >= limits.max_sessions_per_client:
                raise ApiError(429, f"this client already holds {limits.max_sessions_per_client} sessions, its limit; "
                               "DELETE sessions you no longer need, or use POST /stateless/turn", {"Retry-After": "60"})
            if len(self._entries) >= limits.max_sessions:
                raise ApiError(503, f"the server already holds its maximum of {limits.max_sessions} sessions; "
                               "retry later, DELETE sessions you no longer need, or use POST /stateless/turn",
                               {"Retry-After": "30"})
            key = secrets.token_urlsafe(16)
            entry = Entry(state=state, owner=owner, created=now, used=now)
            if view is not None:
                entry.views[view[0]] = view[1]
            self._entries[key] = entry
            self._owners[owner] += 1
            return key

    def get(self, key: str) -> Entry:
        """The live session ``key`` (its idle clock restarts), or a 404 naming why it may be gone."""
        now = self._clock()
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or now - entry.used > self.ttl:
                self._drop(key)
                raise ApiError(404, f"no session {key[:64]!r}: it expired after {int(self.ttl)} s idle, "
                               "was deleted, or never existed")
            entry.used = now
            return entry

    def update(self, entry: Entry, state: dict[str, Any], view: tuple[Any, bytes] | None = None) -> None:
        """Replace a session's state after a turn; cached views of the old state are dropped."""
        with self._lock:
            entry.state = state
            entry.version += 1
            entry.views = {view[0]: view[1]} if view is not None else {}

    def remember_view(self, entry: Entry, version: int, key: Any, view: bytes) -> None:
        """Cache a view computed from ``version`` of the state (ignored if the session changed since)."""
        with self._lock:
            if entry.version == version:
                if len(entry.views) >= MAX_CACHED_VIEWS:  # the oldest goes first
                    entry.views.pop(next(iter(entry.views)))
                entry.views[key] = view

    def delete(self, key: str) -> bool:
        with self._lock:
            return self._drop(key) is not None

    def owners(self) -> dict[str, int]:
        """Sessions held per client address (for health checks and tests)."""
        with self._lock:
            return dict(self._owners)
