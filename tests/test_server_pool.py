"""The engine pool's worker processes: small jobs answered on the event loop, large ones and
budget overruns as before, and a worker read on the loop still usable from a thread."""
from __future__ import annotations

import asyncio
import os
import signal
import socket
import threading
from multiprocessing.connection import Connection

import pytest

pytest.importorskip("fastapi")
uvloop = pytest.importorskip("uvloop")

from nccl_doctor.server import pool as pool_module  # noqa: E402
from nccl_doctor.server.limits import ApiError, Limits  # noqa: E402
from nccl_doctor.server.pool import HEAVY_CHARS, Engine, _Answer  # noqa: E402
from nccl_doctor.server.work import JOBS  # noqa: E402

pytestmark = pytest.mark.xdist_group("server_pool")

TEXT = {"text": "all_reduce hangs at init_process_group on two nodes in docker", "questions": 3}


@pytest.fixture(scope="module")
def engine():
    engine = Engine(None, Limits(budget_s=0.5), workers=1)
    yield engine
    engine.close()


def _run(coroutine):
    """Run on uvloop, as ``diagnose serve`` does (it makes a watched pipe non-blocking)."""
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coroutine)


def test_a_small_job_is_answered_on_the_event_loop_without_a_thread(engine, doctor, monkeypatch):
    async def ready():  # the first job may wait in a thread while the worker starts
        return await engine.run("turn", None, dict(TEXT))

    _run(ready())

    def no_thread(*args, **kwargs):
        raise AssertionError("a small job was handed to a thread")

    monkeypatch.setattr(pool_module.anyio.to_thread, "run_sync", no_thread)
    state, view = _run(engine.run("turn", None, dict(TEXT)))
    assert (state, view) == JOBS["turn"](doctor, None, dict(TEXT), Limits())


def test_a_large_job_after_small_ones_is_sent_whole(engine):
    """uvloop makes a pipe it watches non-blocking; the pipe is also where the thread path writes
    a large job, which then failed half-written (BlockingIOError: a 503 'worker stopped')."""
    log = "node1 NCCL INFO Channel 00/0 : 0[0] -> 1[0] via P2P/IPC\n" * (4 * HEAVY_CHARS // 10)

    async def go():
        first = await engine.run("turn", None, dict(TEXT))
        assert len(log) > 256 * 1024  # more than a socket pair's buffer holds
        return first, await engine.run("turn", first[0], {"log": log, "questions": 3}, heavy=True)

    (state, _), (after, view) = _run(go())
    assert len(after["logs"]) == 1 and b'"diagnoses"' in view


def test_a_job_over_budget_on_the_loop_is_stopped_and_its_worker_replaced(engine):
    async def go():
        await engine.run("turn", None, dict(TEXT))
        (worker,) = engine._all
        os.kill(worker.process.pid, signal.SIGSTOP)  # a job that never answers
        try:
            with pytest.raises(ApiError) as stopped:
                await engine.run("turn", None, dict(TEXT))
        finally:
            try:
                os.kill(worker.process.pid, signal.SIGCONT)
            except ProcessLookupError:  # killed and reaped: as it should be
                pass
        assert not worker.process.is_alive() or worker not in engine._all
        return stopped.value, await engine.run("turn", None, dict(TEXT))

    stopped, (state, view) = _run(go())
    assert stopped.status == 413 and "0.5 s" in stopped.message
    assert b'"diagnoses"' in view and len(engine._all) == 1


def _answer_of(payload: object, chunk: int) -> bytes:
    """What ``_Answer`` reads of ``payload`` sent as a worker sends it, arriving ``chunk`` bytes at a time."""
    ours, theirs = socket.socketpair()
    sender = Connection(os.dup(theirs.fileno()))
    theirs.close()
    relay_read, relay_write = socket.socketpair()

    def send():
        sender.send(payload)
        sender.close()

    def trickle():  # forwards the message in small pieces, as a busy pipe delivers it
        with ours, relay_write:
            while data := ours.recv(chunk):
                relay_write.sendall(data)

    threads = [threading.Thread(target=send), threading.Thread(target=trickle)]
    for t in threads:
        t.start()

    async def read():
        answer = _Answer(asyncio.get_running_loop(), relay_read.fileno())
        try:
            return await asyncio.wait_for(answer.start(), 30)
        finally:
            answer.close()

    try:
        return _run(read())
    finally:
        for t in threads:
            t.join(10)
        relay_read.close()


@pytest.mark.parametrize("chunk", [1, 7, 65536])
def test_an_answer_is_read_whole_however_it_arrives(chunk):
    import pickle

    payload = ("ok", ({"state": list(range(50))}, b"x" * (300_000 if chunk > 1 else 3000)))
    assert pickle.loads(_answer_of(payload, chunk)) == payload


def test_a_pipe_closed_before_the_answer_is_an_error():
    ours, theirs = socket.socketpair()
    theirs.sendall(b"\x00\x00\x01\x00partial")
    theirs.close()

    async def read():
        answer = _Answer(asyncio.get_running_loop(), ours.fileno())
        try:
            return await asyncio.wait_for(answer.start(), 10)
        finally:
            answer.close()

    with ours, pytest.raises(EOFError):
        _run(read())
