"""Where the engine work of a request runs: off the event loop, within a time budget, fairly.

``Engine(workers=0)`` runs jobs in threads of this process (embedding, tests, the MCP server
on stdio). ``Engine(workers=N)`` runs them in N worker processes, each with its own copy of
the KB: the cores are used, and a job over its budget is stopped by killing its worker (a fresh
one takes its place) and answered with a message naming the budget, so no input can keep the
server busy. Jobs carry states, not sessions, so sessions stay isolated whichever worker runs
them.

Fairness: a job with a large input (a log or text over ``HEAVY_CHARS`` characters) may occupy
at most N-1 workers, so small turns are always served while big uploads queue.

A small job is sent to its worker and its answer read on the event loop (the loop watches the
worker's pipe); a thread waits for a worker only when none is idle (large jobs, a worker still
starting, more jobs admitted than workers): handing every job to a thread and waking it was a
quarter of the main process's CPU under load.
"""
from __future__ import annotations

import asyncio
import gc
import multiprocessing
import os
import queue
import struct
import time
import weakref
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from ..engine.session import Doctor
from .limits import ApiError, Limits
from .work import JOBS

__all__ = ["Engine", "HEAVY_CHARS", "frozen_after_start"]

HEAVY_CHARS = 16_384
#: A job whose message is larger is written to its worker from a thread: the pipe holds about
#: this much, and a larger write would hold the event loop until the worker has read the rest.
_LOOP_SEND_BYTES = 64 * 1024


#: What a worker runs before it says it is ready: a turn with words and a log line, and a second
#: one, so the rule conditions, regexes and indexes every turn uses are built before the first
#: client waits on them (the first similarity query of a process builds no index; the second does).
_WARM_UP = [{"text": "all_reduce hangs at init_process_group on two nodes, NCCL timeout in docker",
             "log": "NCCL WARN Bootstrap : no socket interface found\n", "questions": 3},
            {"text": "ncclInternalError: NCCL_SOCKET_IFNAME eth0 not found", "questions": 3}]


def frozen_after_start() -> None:
    """Move what the process holds after its start (the KB: ~90,000 objects) out of the garbage
    collector's sight: a full collection otherwise walks all of it, a pause of tens of
    milliseconds every few hundred requests; the KB is never garbage."""
    gc.collect()
    gc.freeze()


def _worker_main(conn: Connection, kb_dir: str | None, limits: Limits, parent: int) -> None:
    """A worker process: load the KB once, then run jobs until the pipe closes or the parent dies."""
    from .. import load_doctor

    doctor = load_doctor(kb_dir)
    doctor.prepare()
    for data in _WARM_UP:
        try:
            JOBS["turn"](doctor, None, data, limits)
        except Exception:  # a KB without these facts: nothing to warm, nothing wrong
            pass
    frozen_after_start()
    conn.send(("ready", None))
    while True:
        if not conn.poll(1.0):
            if os.getppid() != parent:
                return
            continue
        try:
            name, state, data = conn.recv()
        except (EOFError, OSError):
            return
        try:
            conn.send(("ok", JOBS[name](doctor, state, data, limits)))
        except ApiError as exc:
            conn.send(("refused", (exc.status, exc.message, exc.headers)))
        except Exception as exc:  # a bug: reported as such, the worker carries on
            conn.send(("crashed", f"{type(exc).__name__}: {str(exc)[:200]}"))


class _Worker:
    def __init__(self, context, kb_dir: str | None, limits: Limits):
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_worker_main, args=(child, kb_dir, limits, os.getpid()),
                                       name="nccl-doctor-engine", daemon=True)
        self.process.start()
        child.close()
        self.ready = False

    def wait_ready(self, timeout: float) -> None:
        if not self.ready:
            if not self.conn.poll(timeout):
                raise ApiError(503, "an engine worker did not start in time; retry")
            self.conn.recv()
            self.ready = True

    def kill(self) -> None:
        self.process.kill()
        self.process.join(5)
        self.conn.close()


class Engine:
    """Runs jobs from :mod:`.work` for the servers; see the module docstring."""

    def __init__(self, doctor: Doctor | None, limits: Limits, *, workers: int = 0,
                 kb_dir: str | Path | None = None):
        self.doctor = doctor
        self.limits = limits
        self.workers = workers
        self._kb_dir = str(kb_dir) if kb_dir is not None else None
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._all: list[_Worker] = []
        self._lanes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._closed = False
        if workers:
            self._context = multiprocessing.get_context("spawn")
            for _ in range(workers):
                self._add()
        elif doctor is None:
            raise ValueError("an inline engine needs a Doctor")

    def _add(self) -> None:
        worker = _Worker(self._context, self._kb_dir, self.limits)
        self._all.append(worker)
        self._idle.put(worker)

    def _limiters(self) -> tuple[anyio.CapacityLimiter, anyio.CapacityLimiter]:
        """The (light, heavy) lanes of the running event loop (limiters belong to one loop)."""
        loop = asyncio.get_running_loop()
        lanes = self._lanes.get(loop)
        if lanes is None:
            size = max(self.workers, 2)
            lanes = self._lanes[loop] = (anyio.CapacityLimiter(size), anyio.CapacityLimiter(max(size - 1, 1)))
        return lanes

    async def run(self, job: str, state: Any, data: dict[str, Any], *, heavy: bool = False) -> Any:
        """Run ``job`` on ``state`` off the event loop; an :class:`ApiError` when refused or stopped."""
        light, big = self._limiters()
        if self.workers and not heavy:
            async with light:
                worker = self._idle_worker()
                if worker is not None:
                    return _outcome(*await self._run_on_loop(worker, job, state, data))
        return await anyio.to_thread.run_sync(self._run_blocking, job, state, data, limiter=big if heavy else light)

    def _idle_worker(self) -> "_Worker | None":
        """An idle worker that has said it is ready, or None (then a thread waits for one)."""
        if self._closed:
            return None
        try:
            worker = self._idle.get_nowait()
        except queue.Empty:
            return None
        if not worker.ready and not worker.conn.poll(0):  # still starting: wait for it in a thread
            self._idle.put(worker)
            return None
        try:
            worker.wait_ready(0)
        except (ApiError, EOFError, OSError):
            self._idle.put(worker)  # the thread's path finds it broken and replaces it
            return None
        return worker

    async def _run_on_loop(self, worker: "_Worker", job: str, state: Any, data: dict[str, Any]) -> tuple[str, Any]:
        """Send a job to ``worker`` and read its answer on the event loop, within the budget; the
        worker goes back to the idle ones, or is replaced when it overran or broke."""
        loop = asyncio.get_running_loop()
        answer = _Answer(loop, worker.conn.fileno())
        replace = True
        try:
            payload = bytes(ForkingPickler.dumps((job, state, data)))
            started = time.monotonic()
            if len(payload) <= _LOOP_SEND_BYTES:
                worker.conn.send_bytes(payload)
            else:
                await anyio.to_thread.run_sync(worker.conn.send_bytes, payload)
            try:
                message = await asyncio.wait_for(answer.start(), self.limits.budget_s + 0.5)
            except asyncio.TimeoutError:
                raise _over_budget(self.limits.budget_s, time.monotonic() - started) from None
            replace = False
            return ForkingPickler.loads(message)
        except (EOFError, OSError):
            raise ApiError(503, "an engine worker stopped unexpectedly; retry") from None
        finally:
            answer.close()
            self._give_back(worker, replace)

    def _give_back(self, worker: "_Worker", replace: bool) -> None:
        if replace:
            worker.kill()
            if worker in self._all:
                self._all.remove(worker)
            if not self._closed:
                self._add()
        else:
            self._idle.put(worker)

    def _run_blocking(self, job: str, state: Any, data: dict[str, Any]) -> Any:
        if not self.workers:
            return JOBS[job](self.doctor, state, data, self.limits)
        if self._closed:
            raise ApiError(503, "the server is shutting down; retry")
        worker = self._idle.get()
        replace = False
        try:
            worker.wait_ready(60)
            started = time.monotonic()
            worker.conn.send((job, state, data))
            if not worker.conn.poll(self.limits.budget_s + 0.5):
                replace = True
                raise _over_budget(self.limits.budget_s, time.monotonic() - started)
            kind, result = worker.conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            replace = True
            raise ApiError(503, "an engine worker stopped unexpectedly; retry") from None
        finally:
            self._give_back(worker, replace)
        return _outcome(kind, result)

    @property
    def ready_workers(self) -> int:
        """The workers that have said they are ready (all of them once :meth:`wait_ready` is done)."""
        return sum(worker.ready for worker in self._all)

    def wait_ready(self, timeout: float) -> bool:
        """Wait until every worker has loaded the KB and warmed up (or ``timeout`` seconds in all);
        whether they all have. Called before a server says it is listening, so that its first
        clients do not wait for the start-up instead (seconds on a busy machine)."""
        deadline = time.monotonic() + timeout
        try:
            for worker in list(self._all):
                worker.wait_ready(max(0.0, deadline - time.monotonic()))
        except (ApiError, EOFError, OSError):
            return False
        return True

    def close(self) -> None:
        """Stop every worker process."""
        self._closed = True
        for worker in self._all:
            worker.kill()
        self._all.clear()


def _over_budget(budget_s: float, took_s: float) -> ApiError:
    return ApiError(413, f"this request needed more than the {budget_s:g} s of engine time a request may use and "
                    f"was stopped after {took_s:.1f} s; send less text or a shorter log (the part around the first error)")


def _outcome(kind: str, result: Any) -> Any:
    """A worker's answer as the job's result, or the error it stands for."""
    if kind == "ok":
        return result
    if kind == "refused":
        raise ApiError(*result)
    raise RuntimeError(f"engine worker: {result}")


class _Answer:
    """One message from a worker's pipe (``multiprocessing.Connection``'s framing: a 4-byte
    big-endian length, or -1 and an 8-byte one, then the bytes), read as it arrives while the
    event loop watches the pipe: nothing blocks, however large the view."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int):
        self._loop, self._fd = loop, fd
        self._buffer = bytearray()
        self._size: int | None = None
        self._done: asyncio.Future[bytes] = loop.create_future()
        self._watching = False

    def start(self) -> "asyncio.Future[bytes]":
        """Watch the pipe; the future is done with the message's bytes (or the pipe's error)."""
        self._loop.add_reader(self._fd, self._readable)
        self._watching = True
        return self._done

    def _readable(self) -> None:
        try:
            chunk = os.read(self._fd, max(1 << 16, (self._size or 0) - len(self._buffer) + 12))
        except BlockingIOError:
            return
        except OSError as exc:
            return self._finish(exc)
        if not chunk:
            return self._finish(EOFError("the worker closed its pipe"))
        self._buffer += chunk
        if self._size is None:
            if len(self._buffer) < 4:
                return
            size, = struct.unpack("!i", self._buffer[:4])
            header = 4
            if size == -1:
                if len(self._buffer) < 12:
                    return
                size, = struct.unpack("!Q", self._buffer[4:12])
                header = 12
            del self._buffer[:header]
            self._size = size
        if len(self._buffer) > self._size:
            return self._finish(OSError("the worker sent more than one answer"))
        if len(self._buffer) == self._size:
            self._finish(bytes(self._buffer))

    def _finish(self, outcome: "bytes | BaseException") -> None:
        self.close()
        if not self._done.done():
            if isinstance(outcome, BaseException):
                self._done.set_exception(outcome)
            else:
                self._done.set_result(outcome)

    def close(self) -> None:
        if self._watching:
            self._loop.remove_reader(self._fd)
            self._watching = False
            try:  # an event loop (uvloop) may have made the pipe non-blocking; the threads' path writes to it
                os.set_blocking(self._fd, True)
            except OSError:
                pass
