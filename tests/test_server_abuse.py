"""The HTTP server under abuse: each finding of the attack on every input, reproduced exactly.

In-process (the app over httpx's ASGI transport) where the application answers; a real
``serve_main`` child on loopback where connections, time budgets and signals matter.
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from nccl_doctor.server import Limits, create_app  # noqa: E402
from nccl_doctor.server.connections import _no_delay  # noqa: E402

# one worker runs the module: its live server is started once
pytestmark = pytest.mark.xdist_group("server_abuse")

STATE = {"format": "nccl-doctor-session", "version": 1}


def _post(app, path: str, body: bytes, *, client=("10.0.0.1", 1234)):
    async def go():
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False, client=client)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            return await http.post(path, content=body, headers={"content-type": "application/json"})
    return asyncio.run(go())


def _calls(app, requests, client=("10.0.0.1", 1234)):
    async def go():
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False, client=client)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            return [await http.request(m, p, content=b, headers={"content-type": "application/json"})
                    for m, p, b in requests]
    return asyncio.run(go())


@pytest.fixture(scope="module")
def app(doctor):
    return create_app(doctor)


def _state(**parts) -> bytes:
    return json.dumps({"state": {**STATE, **parts}}).encode()


# Each: a body for /stateless/turn that answered 500 (or worse) before, and words the 4xx must name.
TAMPERED = [
    pytest.param(b'{"state": "' + b"[" * 100_000 + b"]" * 100_000 + b'"}', "nested too deeply", id="state-string-nested-deep"),
    pytest.param(b'{"state": {"format": "nccl-doctor-session", "version": 1, "texts": ' + b"[" * 1000 + b"]" * 1000 + b"}}",
                 "json", id="state-nested-1000"),
    pytest.param(_state(logs=[{"name": "x", "lines": 1e308 * 10, "hits": {}}]).replace(b"Infinity", b"1e999"),
                 "lines", id="lines-1e999"),
    pytest.param(_state(assertions=[{"name": "multi_node", "value": True, "source": {"kind": "answer"},
                                     "certainty": 1}]).replace(b'"certainty": 1', b'"certainty": 1e999'),
                 "certainty", id="certainty-1e999"),
    pytest.param(_state(assertions=[{"name": "multi_node", "value": True, "source": {"kind": "answer"},
                                     "certainty": 1}]).replace(b'"certainty": 1', b'"certainty": NaN'),
                 "certainty", id="certainty-nan"),
    pytest.param(_state(assertions=[{"name": "container", "value": "docker",
                                     "source": {"kind": "probe", "detail": "host.container"}}]),
                 "probe", id="forged-probe-source"),
    pytest.param(_state(matches="a" * 5_000_0), "matches", id="matches-as-a-string"),
    pytest.param(_state(texts=["x" * 200_001]), "texts[0]", id="text-over-the-limit-in-state"),
    pytest.param(b'{"text": "hang \\ud800"}', None, id="lone-surrogate-text"),
    pytest.param(b'{"answers": [{"fact": "num_nodes", "value": 1e999}]}', "finite", id="answer-1e999"),
]


@pytest.mark.parametrize("body,words", TAMPERED)
def test_tampered_stateless_input_gets_a_named_4xx_or_a_clean_200(app, body, words):
    reply = _post(app, "/stateless/turn", body)
    assert reply.status_code != 500, reply.text[:300]
    if words is None:
        assert reply.status_code == 200
        json.dumps(reply.json())  # the reply is valid JSON all through
        # The returned state is accepted back as it is.
        again = _post(app, "/stateless/turn", json.dumps({"state": reply.json()["state"]}).encode())
        assert again.status_code == 200, again.text[:300]
    else:
        assert 400 <= reply.status_code < 500, reply.text[:300]
        assert words.lower() in reply.json()["error"].lower(), reply.json()["error"]
        assert len(reply.content) < 2_000, "a refusal must not echo the input back"


def test_a_lone_surrogate_does_not_break_a_session(app):
    created = _post(app, "/sessions", b'{"text": "hang \\ud800 at init"}')
    assert created.status_code == 201
    sid = created.json()["id"]
    replies = _calls(app, [("GET", f"/sessions/{sid}", b""), ("GET", f"/sessions/{sid}/state", b""),
                           ("GET", f"/sessions/{sid}/report", b""),
                           ("POST", f"/sessions/{sid}/log", b'{"log": "NCCL WARN \\udfff x", "name": "r\\ud800"}')])
    assert [r.status_code for r in replies] == [200, 200, 200, 200], [r.text[:200] for r in replies]
    state = replies[1].json()["state"]
    assert "hang ? at init" in state["texts"]
    assert _post(app, "/stateless/turn", json.dumps({"state": state}).encode()).status_code == 200


def test_text_per_session_has_a_total(doctor):
    app = create_app(doctor, max_session_text_chars=300_000)
    sid = _post(app, "/sessions", json.dumps({"text": "x " * 100_000}).encode()).json()["id"]
    assert _post(app, f"/sessions/{sid}/text", json.dumps({"text": "y " * 50_000}).encode()).status_code == 200
    refused = _post(app, f"/sessions/{sid}/text", json.dumps({"text": "z " * 50_000}).encode())
    assert refused.status_code == 413 and "300000" in refused.json()["error"]
    # The refused turn left the session as it was.
    state = _calls(app, [("GET", f"/sessions/{sid}/state", b"")])[0].json()["state"]
    assert sum(len(t) for t in state["texts"]) == 300_000


def test_one_client_cannot_fill_the_session_table(doctor):
    app = create_app(doctor, max_sessions=10, max_sessions_per_client=4)
    mine = _calls(app, [("POST", "/sessions", b"")] * 5, client=("10.0.0.7", 1))
    assert [r.status_code for r in mine] == [201, 201, 201, 201, 429]
    assert "4 sessions" in mine[-1].json()["error"] and mine[-1].headers["retry-after"]
    others = _calls(app, [("POST", "/sessions", b"")] * 4, client=("10.0.0.8", 1))
    assert [r.status_code for r in others] == [201] * 4


def test_a_failed_turn_changes_nothing(app):
    sid = _post(app, "/sessions", b'{"text": "allreduce hangs"}').json()["id"]
    before = _calls(app, [("GET", f"/sessions/{sid}/state", b"")])[0].json()["state"]
    # A valid answer, then an unknown fact, in one request: refused whole.
    bad = _post(app, f"/sessions/{sid}/answers",
                b'[{"fact": "multi_node", "value": true}, {"fact": "container", "value": "a submarine"}]')
    assert bad.status_code == 422 and "container" in bad.json()["error"]
    after = _calls(app, [("GET", f"/sessions/{sid}/state", b"")])[0].json()["state"]
    assert after == before


def test_views_are_cached_until_the_session_changes(doctor):
    app = create_app(doctor)
    sid = _post(app, "/sessions", b'{"text": "allreduce hangs"}').json()["id"]
    entry = app.state.store.get(sid)
    first = _calls(app, [("GET", f"/sessions/{sid}", b"")])[0].json()
    assert 3 in entry.views  # the view made by the turn was kept
    entry.views[3] = json.dumps({**first, "marker": 1}).encode()
    assert _calls(app, [("GET", f"/sessions/{sid}", b"")])[0].json()["marker"] == 1  # served from the cache
    _post(app, f"/sessions/{sid}/answers", b'{"fact": "multi_node", "value": true}')
    fresh = _calls(app, [("GET", f"/sessions/{sid}", b"")])[0].json()
    assert "marker" not in fresh and fresh["answers"] == {"multi_node": True}


def test_report_is_redacted_by_default(app):
    text = "master on titan-07.corp.example.com, workers on 10.1.2.3 with NCCL_SOCKET_IFNAME=eth0; hang at init"
    sid = _post(app, "/sessions", json.dumps({"text": text}).encode()).json()["id"]
    redacted, plain = _calls(app, [("GET", f"/sessions/{sid}/report", b""), ("GET", f"/sessions/{sid}/report?redact=false", b"")])
    assert redacted.status_code == 200 and redacted.headers["content-type"].startswith("text/markdown")
    assert "10.1.2.3" not in redacted.text and "titan-07.corp.example.com" not in redacted.text
    assert "redacted" in redacted.text
    assert "10.1.2.3" in plain.text


def test_replies_are_sent_without_nagle_delay():
    """asyncio sets TCP_NODELAY only on sockets made with proto=IPPROTO_TCP; serve's listening socket
    (socket.create_server) has proto 0, so every reply on a kept-alive connection waited for a
    delayed ACK (~40 ms)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        accepted, _ = listener.accept()
        with client, accepted:
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0

            class Transport:
                def get_extra_info(self, name):
                    return accepted if name == "socket" else None
            _no_delay(Transport())
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1


# ------------------------------------------------------------------ a real server on loopback
def _start(*args: str) -> tuple[subprocess.Popen, str]:
    code = "import sys; from nccl_doctor.server import serve_main; sys.exit(serve_main(sys.argv[1:]))"
    proc = subprocess.Popen([sys.executable, "-c", code, "--port", "0", *args], stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    banner, deadline = "", time.monotonic() + 60
    while time.monotonic() < deadline and "http://" not in banner:
        line = proc.stderr.readline()
        if not line:
            break
        banner += line
    found = re.search(r"http://127\.0\.0\.1:(\d+)", banner)
    if found is None:
        proc.kill()
        pytest.fail(f"server did not start: {banner}")
    url = found.group(0)
    for _ in range(200):
        try:
            if httpx.get(url + "/healthz", timeout=5).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.1)
    return proc, url


@pytest.fixture(scope="module")
def live():
    proc, url = _start("--request-timeout-s", "2", "--max-connections-per-client", "64", "--workers", "1",
                       "--budget-s", "1")
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="module")
def live_h11():
    """The same server on h11, uvicorn's pure-Python parser (used where httptools is not installed)."""
    proc, url = _start("--request-timeout-s", "2", "--max-connections-per-client", "64", "--workers", "1",
                       "--budget-s", "1", "--http", "h11")
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


@pytest.mark.parametrize("server", ["live", "live_h11"])
def test_idle_connections_do_not_lock_others_out(server, request):
    live = request.getfixturevalue(server)
    held = [socket.create_connection(("127.0.0.1", _port(live))) for _ in range(200)]
    try:
        time.sleep(0.5)
        reply = httpx.get(live + "/healthz", timeout=30)
        assert reply.status_code == 200, reply.text
        time.sleep(3)  # past the 2 s request timeout: the silent ones are closed by the server
        closed = 0
        for s in held:
            s.settimeout(5)
            try:
                closed += s.recv(1) == b""
            except OSError:
                closed += 1
        assert closed == len(held)
    finally:
        for s in held:
            s.close()


@pytest.mark.parametrize("server", ["live", "live_h11"])
def test_slow_senders_are_cut_off_and_others_served(server, request):
    live = request.getfixturevalue(server)
    slow = []
    for _ in range(4):
        s = socket.create_connection(("127.0.0.1", _port(live)))
        s.sendall(b"POST /stateless/turn HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
        slow.append(s)
    try:
        reply = httpx.post(live + "/stateless/turn", json={"text": "hang at init"}, timeout=30)
        assert reply.status_code == 200
        time.sleep(3)
        for s in slow:
            s.settimeout(5)
            try:
                assert s.recv(1024) == b""
            except ConnectionResetError:
                pass
    finally:
        for s in slow:
            s.close()


def test_a_declared_huge_body_is_refused_on_the_header(live):
    with socket.create_connection(("127.0.0.1", _port(live))) as s:
        s.sendall(b"POST /stateless/turn HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 10000000000\r\n\r\n")
        s.settimeout(10)
        head = b""
        while b"}" not in head:  # answered before any of the body was sent
            chunk = s.recv(4096)
            if not chunk:
                break
            head += chunk
    assert head.startswith(b"HTTP/1.1 413") and b"10000000000 bytes" in head


def test_a_request_over_its_budget_is_stopped_and_others_served(live):
    heavy = "ncclInvalidUsage x\n" * 300_000  # 5.7 MB: more than the 1 s budget here allows
    reply = httpx.post(live + "/stateless/turn", json={"log": heavy[: (4 << 20) - 100]}, timeout=60)
    assert reply.status_code == 413 and "1 s" in reply.json()["error"], reply.text[:300]
    assert httpx.post(live + "/stateless/turn", json={"text": "hang at init"}, timeout=30).status_code == 200


def test_sigterm_drains_in_limited_time():
    proc, url = _start("--drain-s", "1", "--workers", "1")
    held = socket.create_connection(("127.0.0.1", _port(url)))
    held.sendall(b"POST /stateless/turn HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")  # never finished
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    finally:
        held.close()
        if proc.poll() is None:
            proc.kill()
    assert time.monotonic() - started < 15


@pytest.mark.parametrize("args,words", [(["--port", "99999"], "not a port"), (["--port", "-5"], "not a port"),
                                        (["--port", "http"], "not a port number"), (["--workers", "-1"], "workers"),
                                        (["--budget-s", "nan"], "positive")])
def test_bad_serve_arguments_are_one_line(args, words):
    done = subprocess.run([sys.executable, "-m", "nccl_doctor.cli", "serve", *args], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert words in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
