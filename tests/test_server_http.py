"""The real HTTP server (``serve_main`` -> uvicorn in a child process) driven over loopback.

One server for the module: a seed case end to end, 200 concurrent sessions checked against the
embedded engine, the stateless mode, malformed and oversized requests, and health afterwards.
"""
from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

# one worker runs the module: one server process for all its tests
pytestmark = pytest.mark.xdist_group("server_http")

MAX_BODY = 1 << 20  # the server under test runs with a 1 MiB body limit
MAX_LOG = 512 << 10
SEED_002 = ("all_reduce times out with DistBackendError, and after I set NCCL_SOCKET_IFNAME it fails "
            "at once with ncclInvalidUsage saying the interface cannot be found")
# Distinguishable cases (each a different top cause today); the concurrent test compares every
# session with the same turn run in-process, so it stays right while the KB grows.
CASES = [
    "NCCL WARN Error while creating shared memory segment /dev/shm/nccl-abc (size 9637888) in docker",
    SEED_002,
    "ncclInvalidUsage: Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000",
    "The server socket has failed to listen on any local network address. port: 29500, useIpv6: false, "
    "code: -98, name: EADDRINUSE, message: address already in use",
    "RuntimeError: Distributed package doesn't have NCCL built in",
    "torch.OutOfMemoryError: CUDA out of memory during all_reduce, NCCL failed",
]
ANSWERS = [("multi_node", True), ("multi_node", False), ("container", "docker"), ("container", "none")]


@pytest.fixture(scope="module")
def server():
    code = ("import sys; from nccl_doctor.server import serve_main; "
            "sys.exit(serve_main(sys.argv[1:]))")
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "--port", "0", "--max-body-bytes", str(MAX_BODY),
         "--max-log-bytes", str(MAX_LOG), "--max-sessions", "2000"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    banner, deadline = "", time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        banner += line
        if "http://" in line:
            break
    found = re.search(r"http://(127\.0\.0\.1):(\d+)", banner)
    if found is None:
        proc.kill()
        pytest.fail(f"server did not start: {banner}{proc.stderr.read()}")
    url = f"http://{found.group(1)}:{found.group(2)}"
    for _ in range(100):
        try:
            if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.1)
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="module")
def client(server):
    with httpx.Client(base_url=server, timeout=30) as c:
        yield c


def _fix_text(step: dict) -> str:
    return " ".join([step["title"], *step["steps"], *step["commands"], *step["env"], *step["env"].values()])


def test_binds_loopback_and_is_healthy(client, server):
    assert server.startswith("http://127.0.0.1:")
    health = client.get("/healthz").json()
    assert health["status"] == "ok" and health["kb"]["causes"] > 0
    # the banner comes once the engine workers are up: the first clients do not wait for them
    assert health["workers"] >= 1 and health["workers_ready"] == health["workers"]


def test_openapi_describes_the_api(client):
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    for path in ("/sessions", "/sessions/{session_id}", "/sessions/{session_id}/text", "/sessions/{session_id}/log",
                 "/sessions/{session_id}/answers", "/sessions/{session_id}/how/{cause_id}",
                 "/sessions/{session_id}/why/{fact_id}", "/stateless/turn", "/healthz"):
        assert path in paths, path
    assert "post" in paths["/sessions"] and "delete" in paths["/sessions/{session_id}"]


def test_seed_002_end_to_end(client):
    created = client.post("/sessions", json={"text": SEED_002})
    assert created.status_code == 201, created.text
    body = created.json()
    sid = body["id"]
    assert body["diagnoses"], "no diagnosis for seed 002"
    plan_text = " ".join(_fix_text(s) for s in body["plan"]["steps"])
    assert "NCCL_SOCKET_IFNAME" in plan_text
    top = body["diagnoses"][0]["id"]
    how = client.get(f"/sessions/{sid}/how/{top}")
    assert how.status_code == 200 and how.json()["cause"] == top and how.json()["rules"]
    # A log turn and an answer turn keep the same session going.
    log = "NCCL WARN Bootstrap : no socket interface found\nncclInvalidUsage: invalid usage\n"
    assert client.post(f"/sessions/{sid}/log?name=rank0.log", content=log,
                       headers={"content-type": "text/plain"}).status_code == 200
    question = client.get(f"/sessions/{sid}").json()["next_question"]
    if question is not None:
        why = client.get(f"/sessions/{sid}/why/{question['id']}")
        assert why.status_code == 200 and why.json()["question"] == question["id"]
        answered = client.post(f"/sessions/{sid}/answers", json={"fact": question["id"], "dont_know": True})
        assert answered.status_code == 200 and question["id"] in answered.json()["unknown"]
    answered = client.post(f"/sessions/{sid}/answers", json=[{"fact": "multi_node", "value": True}])
    assert answered.json()["answers"]["multi_node"] is True
    state = client.get(f"/sessions/{sid}/state").json()["state"]
    assert state["format"] == "nccl-doctor-session"
    assert client.delete(f"/sessions/{sid}").status_code == 204
    gone = client.get(f"/sessions/{sid}")
    assert gone.status_code == 404 and "no session" in gone.json()["error"]


def test_stateless_turns_match_a_server_session(client):
    turns = [{"text": CASES[1]}, {"answers": [{"fact": "multi_node", "value": True}]},
             {"log": "NCCL WARN Bootstrap : no socket interface found\n", "log_name": "r0.log"}]
    state = None
    sid = client.post("/sessions").json()["id"]
    for turn in turns:
        reply = client.post("/stateless/turn", json={**turn, **({"state": state} if state else {})})
        assert reply.status_code == 200, reply.text
        state = reply.json()["state"]
        if "text" in turn:
            kept = client.post(f"/sessions/{sid}/text", json={"text": turn["text"]})
        elif "answers" in turn:
            kept = client.post(f"/sessions/{sid}/answers", json={"answers": turn["answers"]})
        else:
            kept = client.post(f"/sessions/{sid}/log", json={"log": turn["log"], "name": turn["log_name"]})
        assert kept.status_code == 200, kept.text
    stateless, stateful = reply.json(), kept.json()
    assert [d["id"] for d in stateless["diagnoses"]] == [d["id"] for d in stateful["diagnoses"]]
    assert stateless["facts"] == stateful["facts"]



def test_turns_without_a_view_reply_with_the_id_and_get_shows_the_same_view(client):
    """``?view=none`` on a turn answers with the session's id alone (no view is built); the view
    read afterwards is, byte for byte, the one a session given the same turns with views shows."""
    log = "NCCL WARN Bootstrap : no socket interface found\nncclInvalidUsage: invalid usage\n"
    shown, quiet = [], []
    for view, replies in (("full", shown), ("none", quiet)):
        query = "" if view == "full" else "?view=none"
        created = client.post(f"/sessions{query}", json={"text": SEED_002})
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        replies.append(created.json())
        replies.append(client.post(f"/sessions/{sid}/log?name=rank0.log{query.replace('?', '&')}", content=log,
                                   headers={"content-type": "text/plain"}).json())
        replies.append(client.post(f"/sessions/{sid}/answers{query}", json={"fact": "multi_node", "value": True}).json())
        replies.append(client.post(f"/sessions/{sid}/text{query}", json={"text": "it runs in docker"}).json())
        final = client.get(f"/sessions/{sid}")
        assert final.status_code == 200
        replies.append(final.content.replace(sid.encode(), b"<id>"))
        assert client.delete(f"/sessions/{sid}").status_code == 204
    assert set(quiet[0]) == {"id", "expires_after_idle_s"} and all(set(r) == {"id"} for r in quiet[1:4])
    assert all("next_question" in r and "diagnoses" in r for r in shown[:4])
    assert quiet[4] == shown[4]  # GET builds the view the turns' replies would have shown
    bad = client.post("/sessions?view=brief", json={"text": SEED_002})
    assert bad.status_code == 422 and "view" in bad.json()["error"]

def test_200_concurrent_sessions_are_isolated(client, server, doctor):
    def expected(i: int) -> tuple[list[str], dict]:
        session = doctor.session()
        fact, value = ANSWERS[i % len(ANSWERS)]
        session.tell(CASES[i % len(CASES)])
        session.answer(fact, value)
        return [d.id for d in session.diagnoses()], {k: r.value for k, r in session.facts().items()}

    wanted = {i: expected(i) for i in range(len(CASES) * len(ANSWERS))}
    assert len({tuple(w[0][:1]) for w in wanted.values()}) >= 3, "cases no longer distinguishable"

    async def one(http: httpx.AsyncClient, i: int):
        created = await http.post("/sessions", json={"text": CASES[i % len(CASES)]})
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        fact, value = ANSWERS[i % len(ANSWERS)]
        answered = await http.post(f"/sessions/{sid}/answers", json={"fact": fact, "value": value})
        assert answered.status_code == 200, answered.text
        final = (await http.get(f"/sessions/{sid}")).json()
        await http.delete(f"/sessions/{sid}")
        return i, final

    async def run_all():
        limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
        async with httpx.AsyncClient(base_url=server, timeout=60, limits=limits) as http:
            return await asyncio.gather(*(one(http, i) for i in range(200)))

    results = asyncio.run(run_all())
    assert len(results) == 200
    for i, final in results:
        ids, facts = wanted[i % len(wanted)]
        assert [d["id"] for d in final["diagnoses"]] == ids, f"session {i} got another session's diagnoses"
        assert {k: v["value"] for k, v in final["facts"].items()} == facts, f"session {i} facts differ"
    assert client.get("/healthz").json()["status"] == "ok"


def test_an_idle_kept_alive_connection_outlives_the_clients_own_expiry(server):
    """A client (httpx: 5 s) must close an idle connection before the server does; a server
    that closes first races the client's next request on it and the client sees ReadError."""
    host, port = server.removeprefix("http://").split(":")
    request = f"GET /healthz HTTP/1.1\r\nhost: {host}\r\n\r\n".encode()

    def status_line(sock: socket.socket) -> bytes:
        reply = b""
        while b"\r\n\r\n" not in reply and (chunk := sock.recv(65536)):
            reply += chunk
        head, _, body = reply.partition(b"\r\n\r\n")
        length = int(re.search(rb"content-length: (\d+)", head, re.I).group(1)) if head else 0
        while len(body) < length and (chunk := sock.recv(65536)):
            body += chunk
        return head.split(b"\r\n")[0]

    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        assert status_line(sock) == b"HTTP/1.1 200 OK"
        time.sleep(6)  # past httpx's keepalive_expiry, so the server must still hold it
        sock.sendall(request)
        assert status_line(sock) == b"HTTP/1.1 200 OK", "the server closed an idle connection first"


BAD_REQUESTS = [
    # (method, path, kwargs, status, words the message must contain)
    ("POST", "/sessions", {"content": b"{not json", "headers": {"content-type": "application/json"}}, 422, "not valid JSON"),
    ("POST", "/sessions", {"json": {"text": 12}}, 422, "text"),
    ("POST", "/sessions", {"json": {"txet": "typo"}}, 422, "txet"),
    ("POST", "/sessions", {"json": {"text": "x" * 200_001}}, 413, "limit is 200000"),
    ("POST", "/sessions", {"json": {"log": "a\n" * (300 << 10)}}, 413, "limit is"),
    ("POST", "/sessions", {"content": b"a" * (MAX_BODY + 1), "headers": {"content-type": "application/json"}}, 413, "limit is"),
    ("POST", "/sessions", {"json": {"answers": [{"fact": "no_such_fact", "value": True}]}}, 422, "no_such_fact"),
    ("POST", "/sessions", {"json": {"answers": [{"fact": "multi_node", "value": "perhaps"}]}}, 422, "multi_node"),
    ("POST", "/sessions", {"json": {"answers": [{"fact": "multi_node"}]}}, 422, "exactly one"),
    ("POST", "/sessions", {"json": {"questions": 1000}}, 422, "questions"),
    ("POST", "/stateless/turn", {"json": {"state": {"format": "nccl-doctor-session", "version": 0}}}, 422, "version"),
    ("POST", "/stateless/turn", {"json": {"state": "{broken"}}, 422, "not JSON"),
    ("POST", "/stateless/turn", {"json": {"state": {"hello": 1}}}, 422, "format"),
    ("GET", "/sessions/not-a-session", {}, 404, "no session"),
    ("GET", "/no/such/path", {}, 404, "no such endpoint"),
    ("PUT", "/sessions", {}, 405, "not allowed"),
]


@pytest.mark.parametrize("method,path,kwargs,status,words", BAD_REQUESTS,
                         ids=[f"{m} {p} {s} {w}" for m, p, _, s, w in BAD_REQUESTS])
def test_bad_requests_get_clear_4xx(client, method, path, kwargs, status, words):
    reply = client.request(method, path, **kwargs)
    assert reply.status_code == status, reply.text[:300]
    assert words.lower() in reply.json()["error"].lower()


def test_bad_requests_on_a_live_session(client):
    sid = client.post("/sessions", json={"text": CASES[0]}).json()["id"]
    before = client.get(f"/sessions/{sid}").json()
    for kwargs, status, words in [
        ({"json": {"fact": "no_such_fact", "value": 1}}, 422, "no_such_fact"),
        ({"json": [{"fact": "multi_node", "value": True}, {"fact": "nope", "value": True}]}, 422, "nope"),
        ({"json": []}, 422, "1 to"),
        ({"json": "a string"}, 422, "answers"),
        ({"content": b"[", "headers": {"content-type": "application/json"}}, 422, "JSON"),
    ]:
        reply = client.post(f"/sessions/{sid}/answers", **kwargs)
        assert reply.status_code == status and words in reply.json()["error"], reply.text[:300]
    big_log = "NCCL WARN x\n" * (MAX_LOG // 12 + 10)
    reply = client.post(f"/sessions/{sid}/log", content=big_log, headers={"content-type": "text/plain"})
    assert reply.status_code == 413 and "limit" in reply.json()["error"]
    reply = client.post(f"/sessions/{sid}/log", content=b"\x00\x01", headers={"content-type": "image/png"})
    assert reply.status_code == 415
    assert client.get(f"/sessions/{sid}/how/no_such_cause").status_code == 404
    assert "no_such_fact" in client.get(f"/sessions/{sid}/why/no_such_fact").json()["error"]
    after = client.get(f"/sessions/{sid}").json()
    assert after["facts"] == before["facts"], "a refused request changed the session"
    assert client.get("/healthz").json()["status"] == "ok"


def test_input_never_reaches_a_shell(client, tmp_path: Path):
    marker = tmp_path / "pwned"
    payloads = [f"$(touch {marker})", f"`touch {marker}`", f"; touch {marker}", f"| touch {marker}"]
    for payload in payloads:
        sid = client.post("/sessions", json={"text": payload, "log": payload, "log_name": payload}).json()["id"]
        client.post(f"/sessions/{sid}/log?name={payload}", content=payload, headers={"content-type": "text/plain"})
        client.post(f"/sessions/{sid}/answers", json={"fact": "nccl_socket_ifname", "value": payload})
        client.post(f"/sessions/{sid}/answers", json={"fact": payload, "value": payload})
    time.sleep(0.2)
    assert not marker.exists()
    folder = Path(__file__).parents[1] / "src" / "nccl_doctor" / "server"
    source = "\n".join(p.read_text() for p in folder.glob("*.py"))
    assert not re.search(r"\bsubprocess\b|os\.system|os\.popen|\bpty\b|shell\s*=", source)
