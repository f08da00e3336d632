"""Connections of the HTTP server: idle and slow clients cannot lock others out.

uvicorn's HTTP/1.1 protocol (httptools, the C parser, when installed: the ``serve`` extra brings
it; else h11, pure Python and ~0.3 ms slower a request) with three additions:

- a request must arrive whole (headers and body) within ``request_timeout_s`` of the
  connection opening or of the previous response, else the connection is closed; this is
  also the keep-alive idle time, longer than common clients' own expiry (httpx: 5 s) so the
  client closes an idle connection first and never sends on one the server is closing;
- at most ``max_connections_per_client`` connections per client address and
  ``max_connections`` in all; when a cap is reached, the oldest connection that is waiting
  for a request (idle or still sending one) is closed to make room, so silent connections
  never keep a working client out; only when every connection is busy is the new one
  answered 503;
- replies are sent without Nagle's delay (TCP_NODELAY);
- connections, not requests, are what is capped here; requests in flight are capped by
  :class:`.middleware.InFlightLimit`.
"""
from __future__ import annotations

import json
import socket
from collections import OrderedDict
from typing import Any

from .limits import Limits

__all__ = ["guarded_protocol", "base_protocol"]


def base_protocol(parser: str = "auto") -> type:
    """uvicorn's HTTP/1.1 protocol class: ``"httptools"``, ``"h11"``, or the first importable."""
    if parser in ("auto", "httptools"):
        try:
            from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

            return HttpToolsProtocol
        except ImportError:
            if parser == "httptools":
                raise
    from uvicorn.protocols.http.h11_impl import H11Protocol

    return H11Protocol


class _Registry:
    """Open connections per client address, oldest first."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.by_client: dict[str, OrderedDict[int, Any]] = {}
        self.count = 0

    def add(self, client: str, conn) -> bool:
        """Register ``conn``; make room by closing an idle connection if a cap is reached."""
        mine = self.by_client.setdefault(client, OrderedDict())
        if len(mine) >= self.limits.max_connections_per_client and not self._evict(mine.values()):
            return False
        if self.count >= self.limits.max_connections and not self._evict(
                c for group in self.by_client.values() for c in group.values()):
            return False
        mine[id(conn)] = conn
        self.count += 1
        return True

    def remove(self, client: str, conn) -> None:
        mine = self.by_client.get(client)
        if mine is not None and mine.pop(id(conn), None) is not None:
            self.count -= 1
            if not mine:
                del self.by_client[client]

    @staticmethod
    def _evict(candidates) -> bool:
        for conn in list(candidates):
            if conn.waiting_for_request():
                conn.close_now()
                return True
        return False


def _no_delay(transport) -> None:
    """Send small writes at once. asyncio does this only for sockets made with proto=IPPROTO_TCP,
    which ``socket.create_server`` does not give; without it every reply on a kept-alive
    connection waits ~40 ms for the client's delayed ACK (headers and body are two writes)."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass


def guarded_protocol(limits: Limits, parser: str = "auto") -> type:
    """A protocol class for ``uvicorn.Config(http=...)`` enforcing ``limits`` (over
    :func:`base_protocol` ``(parser)``)."""
    registry = _Registry(limits)
    busy = json.dumps({"error": "the server has too many connections open; retry shortly"}).encode()

    class GuardedProtocol(base_protocol(parser)):
        _deadline = None
        _client_key = ""
        _registered = False

        def connection_made(self, transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            _no_delay(transport)
            self._client_key = self.client[0] if self.client else "unknown"
            if not registry.add(self._client_key, self):
                transport.write(b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
                                b"connection: close\r\nretry-after: 2\r\ncontent-length: "
                                + str(len(busy)).encode() + b"\r\n\r\n" + busy)
                transport.close()
                return
            self._registered = True
            self._arm()

        def connection_lost(self, exc) -> None:
            if self._registered:
                registry.remove(self._client_key, self)
                self._registered = False
            if self._deadline is not None:
                self._deadline.cancel()
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def _arm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._deadline = self.loop.call_later(limits.request_timeout_s, self._too_slow)

        def waiting_for_request(self) -> bool:
            """True while no request is being served: idle, or its headers or body still arriving."""
            cycle = self.cycle
            return cycle is None or cycle.response_complete or (cycle.more_body and not cycle.response_started)

        def _too_slow(self) -> None:
            self._deadline = None
            if self.waiting_for_request():
                self.close_now()

        def close_now(self) -> None:
            if not self.transport.is_closing():
                self.transport.close()

    return GuardedProtocol
