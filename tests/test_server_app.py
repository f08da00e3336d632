"""The server's parts in-process: session cap and idle expiry, per-session locking, the
``serve_main`` front door (missing extra, busy port)."""
from __future__ import annotations

import asyncio
import socket
import sys
import threading

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from nccl_doctor.server import ApiError, Limits, SessionStore, create_app, serve_main  # noqa: E402


def _call(app, requests):
    """Run (method, path, json) requests against the app in-process; return the replies."""
    async def go():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            return [await http.request(m, p, json=j) for m, p, j in requests]
    return asyncio.run(go())


def test_session_cap_gives_503_with_retry_after(doctor):
    app = create_app(doctor, max_sessions=3)
    replies = _call(app, [("POST", "/sessions", None)] * 4)
    assert [r.status_code for r in replies] == [201, 201, 201, 503]
    assert "maximum of 3 sessions" in replies[3].json()["error"]
    assert replies[3].headers["retry-after"]
    # Deleting one makes room again; stateless turns never count.
    sid = replies[0].json()["id"]
    again = _call(app, [("DELETE", f"/sessions/{sid}", None), ("POST", "/sessions", None),
                        ("POST", "/stateless/turn", {"text": "hang"})])
    assert [r.status_code for r in again] == [204, 201, 200]



def test_every_endpoint_runs_on_the_event_loop(doctor):
    """A plain ``def`` endpoint is handed to a thread and waited for: under load the DELETE that
    ends each session cost the main process a thread hop; every endpoint is a coroutine."""
    import inspect

    from starlette.routing import Route

    app = create_app(doctor)
    ours = [r for r in app.routes if isinstance(r, Route) and r.path in {
        "/healthz", "/sessions", "/sessions/{session_id}", "/sessions/{session_id}/state", "/stateless/turn"}]
    assert len(ours) >= 6
    assert all(inspect.iscoroutinefunction(r.endpoint) for r in ours), [r.name for r in ours
                                                                        if not inspect.iscoroutinefunction(r.endpoint)]

def test_idle_sessions_expire(doctor):
    now = [1000.0]
    store = SessionStore(Limits(max_sessions=2, session_ttl=60), clock=lambda: now[0])
    a = store.create({})
    b = store.create({})
    now[0] += 30
    store.get(a)  # using a session keeps it alive
    now[0] += 45
    with pytest.raises(ApiError) as gone:
        store.get(b)
    assert gone.value.status == 404 and "expired" in gone.value.message
    assert store.get(a).state == {}
    store.create({})  # b's slot was freed
    now[0] += 61
    assert len(store) == 2
    store.create({})  # the full table purges expired entries first
    assert len(store) == 1


def test_concurrent_turns_on_one_session_serialize(doctor):
    app = create_app(doctor)
    sid = _call(app, [("POST", "/sessions", {"text": "allreduce hangs"})])[0].json()["id"]
    facts = ["multi_node", "container", "multi_node", "container"] * 5
    values = [True, "docker", False, "none"] * 5

    async def go():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            return await asyncio.gather(*(
                http.post(f"/sessions/{sid}/answers", json={"fact": f, "value": v})
                for f, v in zip(facts, values)))
    replies = asyncio.run(go())
    assert all(r.status_code == 200 for r in replies)
    final = _call(app, [("GET", f"/sessions/{sid}", None)])[0].json()
    assert set(final["answers"]) == {"multi_node", "container"}


def test_serve_main_without_the_extra_explains(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # as if `pip install` left it out
    assert serve_main(["--port", "0"]) == 2
    assert "pip install 'nccl-doctor[serve]'" in capsys.readouterr().err


def test_serve_main_without_httptools_explains_or_falls_back(monkeypatch, capsys):
    from nccl_doctor.server.connections import base_protocol

    monkeypatch.setitem(sys.modules, "uvicorn.protocols.http.httptools_impl", None)  # as if not installed
    assert serve_main(["--port", "0", "--http", "httptools"]) == 2
    err = capsys.readouterr().err
    assert "httptools is not installed" in err and "pip install" in err and len(err.strip().splitlines()) == 1
    assert base_protocol("auto").__name__ == "H11Protocol"  # the default falls back to h11


def test_serve_main_busy_port(capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert serve_main(["--port", str(port)]) == 1
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


def test_serve_main_defaults_to_loopback(monkeypatch):
    seen = {}

    def fake_create_server(address, **kwargs):
        seen["address"] = address
        raise OSError("stop here")

    monkeypatch.setattr(socket, "create_server", fake_create_server)
    assert serve_main([]) == 1
    assert seen["address"] == ("127.0.0.1", 8000)


def test_store_is_safe_under_threads(doctor):
    store = SessionStore(Limits(max_sessions=10_000, max_sessions_per_client=10_000))
    keys: list[str] = []
    lock = threading.Lock()

    def worker():
        for _ in range(50):
            key = store.create({})
            store.get(key)
            with lock:
                keys.append(key)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(keys)) == 400 == len(store)


def test_cached_views_per_session_are_bounded():
    from nccl_doctor.server.store import MAX_CACHED_VIEWS

    store = SessionStore(Limits())
    entry = store.get(store.create({}))
    for n in range(MAX_CACHED_VIEWS * 3):
        store.remember_view(entry, entry.version, ("why", n), b"{}")
    assert len(entry.views) == MAX_CACHED_VIEWS and ("why", MAX_CACHED_VIEWS * 3 - 1) in entry.views
    stale = entry.version
    store.update(entry, {"changed": True})
    store.remember_view(entry, stale, "old", b"{}")  # computed from the state before the change
    assert entry.views == {}


def test_requests_in_flight_are_capped():
    from nccl_doctor.server.middleware import InFlightLimit

    release = asyncio.Event()

    async def slow_app(scope, receive, send):
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    app = InFlightLimit(slow_app, limit=2)

    async def go():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            first = [asyncio.create_task(http.get("/")) for _ in range(2)]
            await asyncio.sleep(0.05)
            refused = await http.get("/")
            release.set()
            return refused, await asyncio.gather(*first)
    refused, served = asyncio.run(go())
    assert refused.status_code == 503 and "maximum of 2 requests" in refused.json()["error"]
    assert refused.headers["retry-after"] and [r.status_code for r in served] == [200, 200]


def test_only_large_inputs_take_the_heavy_lane(doctor):
    """A log of a few lines is served like a sentence; only a large log or text is held to the
    lane that always leaves a worker free for small turns (a few-line log used to be held there,
    halving the server's throughput while many clients uploaded small logs)."""
    from nccl_doctor.server.pool import HEAVY_CHARS

    app = create_app(doctor)
    lanes = []
    run = app.state.engine.run

    async def spy(job, state, data, *, heavy=False):
        lanes.append(heavy)
        return await run(job, state, data, heavy=heavy)

    app.state.engine.run = spy

    async def go():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            sid = (await http.post("/sessions", json={"text": "hang at init"})).json()["id"]
            small = "node1 NCCL WARN Bootstrap : no socket interface found\n" * 3
            large = "node1 NCCL INFO Channel 00/0 : 0[0] -> 1[0] via P2P/IPC\n" * (HEAVY_CHARS // 40)
            for body in (small, large):
                reply = await http.post(f"/sessions/{sid}/log", content=body, headers={"content-type": "text/plain"})
                assert reply.status_code == 200
            reply = await http.post(f"/sessions/{sid}/text", json={"text": "x " * HEAVY_CHARS})
            assert reply.status_code == 200

    asyncio.run(go())
    assert lanes == [False, False, True, True]
