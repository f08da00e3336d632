"""ASGI middleware of the HTTP server: body size and the number of requests in flight.

Both answer before the application runs, with ``{"error": message}`` naming the limit.
"""
from __future__ import annotations

import json

__all__ = ["BodyLimit", "InFlightLimit", "refuse"]


async def refuse(send, status: int, message: str, *, close: bool = False, headers: dict[str, str] | None = None) -> None:
    """Send a complete JSON error response."""
    body = json.dumps({"error": message}).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    if close:
        raw.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class BodyLimit:
    """Refuse a body over ``max_bytes`` with 413: on the ``Content-Length`` header when it is
    declared (nothing of it is read), else as soon as the chunks read pass the limit."""

    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            if not declared.isdigit() or len(declared) > 19:
                return await refuse(send, 400, "Content-Length is not a whole number of bytes", close=True)
            if int(declared) > self.max_bytes:
                return await refuse(send, 413, self._message(int(declared)), close=True)
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                return await refuse(send, 413, self._message(size, at_least=True), close=True)
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


class InFlightLimit:
    """Answer 503 (with Retry-After) when ``limit`` requests are already being served."""

    def __init__(self, app, limit: int):
        self.app = app
        self.limit = limit
        self.now = 0

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if self.now >= self.limit:
            return await refuse(send, 503, f"the server is serving its maximum of {self.limit} requests; retry shortly",
                                headers={"Retry-After": "2"})
        self.now += 1
        try:
            return await self.app(scope, receive, send)
        finally:
            self.now -= 1
