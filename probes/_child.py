"""The child side of an isolated probe: read one request line on stdin, report JSON lines on stdout.

Protocol (one JSON object per line): ``{"step": "..."}`` whenever the probe says what it is
doing, then ``{"result": {...}}``. The probe's own prints go to stderr so they cannot corrupt
the protocol. stdin stays open after the request: it is the lifeline to the parent. When it
closes — the parent is done with us, or died of any signal — this child kills its whole
process group (itself, the commands it ran, anything they started).
"""
from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import threading
import traceback


def _watch_lifeline(stdin) -> None:
    """Block until the parent closes our stdin (or dies), then kill our process group."""
    try:
        while stdin.read1(4096):
            pass
    except (OSError, ValueError):
        pass
    if os.getpgrp() == os.getpid():  # started as a group leader, as the parent does
        os.killpg(0, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def main(argv: list[str] | None = None) -> None:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything the probe prints lands on stderr
    stdin = sys.stdin.buffer
    request = json.loads(stdin.readline() or b"{}")
    threading.Thread(target=_watch_lifeline, args=(stdin,), name="lifeline", daemon=True).start()

    def emit(obj: dict) -> None:
        proto.write(json.dumps(obj, default=str) + "\n")
        proto.flush()

    from .registry import Context, ProbeError, Skip

    ctx = Context(env=dict(request.get("env") or {}), deadline=float(request.get("deadline", 4.0)),
                  on_step=lambda what: emit({"step": what}))
    module_name, func_name = request["target"].split(":")
    status, detail = "ok", ""
    try:
        ctx.step(f"importing {module_name}")
        func = getattr(importlib.import_module(module_name), func_name)
        ctx.step("starting")
        func(ctx)
        status = "failed" if ctx.failed else "ok"
    except Skip as exc:
        status, detail = "skipped", str(exc)
    except ProbeError as exc:
        status, detail = "failed", str(exc)
    except Exception as exc:  # a bug or an unexpected environment: report, never hide
        status = "failed"
        detail = f"{type(exc).__name__}: {exc}"
        tail = traceback.format_exc().strip().splitlines()[-3:]
        ctx.data["traceback"] = tail
    emit({"result": {"status": status, "facts": ctx.facts, "findings": ctx.findings,
                     "detail": detail, "data": ctx.data}})
    proto.close()
    sys.stdout.flush()
    os._exit(0)  # do not wait for stray threads (a hung library thread must not hang us)


if __name__ == "__main__":
    main()
