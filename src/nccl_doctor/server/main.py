"""``diagnose serve``: arguments, the listening socket and uvicorn, each problem one line."""
from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import math
import os
import socket
import sys
from typing import NoReturn

from ..errors import UsageError
from .limits import INSTALL_HINT, Limits

__all__ = ["serve_main", "require_fastapi", "default_workers"]


def require_fastapi() -> None:
    """Raise ImportError with the install hint when the ``serve`` extra is missing."""
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"{exc.name or 'fastapi'} is not installed; {INSTALL_HINT}") from None


def default_workers() -> int:
    """One engine worker per core this process may use, at most 8."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, 8))


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:20]!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port: use 1-65535 (0 picks a free one)")
    return port


def _positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:20]!r} is not a number") from None
        if not value > 0 or value != value or value == float("inf"):
            raise argparse.ArgumentTypeError(f"{text[:20]} must be a positive number")
        return value
    return parse


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="diagnose serve", description="Serve the diagnosis API over HTTP (JSON).")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=_port, default=8000, help="port (default 8000; 0 picks a free one)")
    parser.add_argument("--workers", type=int, default=None,
                        help=f"engine worker processes (default: one per core, here {default_workers()}; 0: in-process)")
    parser.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"])
    parser.add_argument("--http", default="auto", choices=["auto", "httptools", "h11"],
                        help="HTTP/1.1 parser: httptools (C, the faster) when installed, else h11 (default auto)")
    for field in dataclasses.fields(Limits):
        kind = int if field.type in ("int", int) else float
        parser.add_argument("--" + field.name.replace("_", "-"), type=_positive(kind), default=field.default,
                            metavar="N",
                            help=f"{field.metadata.get('help', '')} (default {field.default if kind is int else f'{field.default:g}'})")
    return parser


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve_main(argv: list[str]) -> int:
    """``diagnose serve [--host 127.0.0.1] [--port 8000] ...``: run the HTTP API until stopped."""
    try:
        args = _parser().parse_args(argv)
        limits = Limits(**{f.name: getattr(args, f.name) for f in dataclasses.fields(Limits)})
        workers = default_workers() if args.workers is None else args.workers
        if not 0 <= workers <= 64:
            raise UsageError(f"--workers {workers}: use 0 to 64")
    except (UsageError, ValueError) as exc:
        print(f"diagnose serve: {exc}", file=sys.stderr)
        return 2
    try:
        require_fastapi()
    except ImportError as exc:
        print(f"diagnose serve: {exc}", file=sys.stderr)
        return 2
    import uvicorn

    from ..kb import KBError
    from .connections import guarded_protocol
    from .pool import frozen_after_start
    from .routes import create_app

    try:
        protocol = guarded_protocol(limits, args.http)
    except ImportError:
        print(f"diagnose serve: --http {args.http}: httptools is not installed; {INSTALL_HINT}", file=sys.stderr)
        return 2
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    try:
        sock = socket.create_server((args.host, args.port), family=family, reuse_port=False)
    except (OSError, OverflowError) as exc:
        print(f"diagnose serve: cannot listen on {args.host}:{args.port}: {getattr(exc, 'strerror', None) or exc}",
              file=sys.stderr)
        return 1
    try:
        app = create_app(limits=limits, workers=workers)
    except (KBError, ValueError) as exc:
        sock.close()
        print(f"diagnose serve: the knowledge base cannot be loaded:\n{exc}", file=sys.stderr)
        return 1
    frozen_after_start()
    if workers and not app.state.engine.wait_ready(120):
        print("warning: an engine worker has not started yet; the first requests may wait for it", file=sys.stderr)
    port = sock.getsockname()[1]
    shown = f"[{args.host}]" if family == socket.AF_INET6 else args.host
    print(f"nccl-doctor API on http://{shown}:{port}  (OpenAPI: /openapi.json, docs: /docs; "
          f"{workers} engine worker(s); Ctrl-C stops)", file=sys.stderr, flush=True)
    if not _is_loopback(args.host):
        print("warning: listening beyond this machine; the API has no authentication - put it behind "
              "your own proxy", file=sys.stderr)
    config = uvicorn.Config(app, log_level=args.log_level, http=protocol,
                            # an idle kept-alive connection is closed by the guard after request_timeout_s;
                            # uvicorn's own 5 s equals httpx's client-side expiry, and a server that closes
                            # first races a client sending its next request on that connection (ReadError)
                            timeout_keep_alive=max(1, math.ceil(limits.request_timeout_s)) + 1,
                            limit_concurrency=None, timeout_graceful_shutdown=max(1, round(limits.drain_s)))
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # pragma: no cover
        pass
    finally:
        app.state.engine.close()
        sock.close()
    return 0
