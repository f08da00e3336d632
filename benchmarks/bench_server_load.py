"""Benchmark: ``diagnose serve`` under load and abuse, on loopback.

Starts the real server in a child process and runs, one after the other:

- ``concurrent``: N sessions at once, five turns each (create with text, log upload, two
  answers, state); with ``--view none`` the turns before the last GET ask for no view
  (``?view=none``); requests per second, p50/p99 latency, errors, and whether every session's
  final facts equal the same turns run in-process (isolation). Each session is a different
  incident of the library (its words, a log, two answers: :func:`session_inputs`); ``--fixed``
  repeats five descriptions and one log instead, as the first figures did;
- ``log``: one 4 MB upload of junk lines and one of a realistic NCCL_DEBUG=INFO log, timed;
- ``flood``: 45 clients each sending 32 KiB of junk text to ``/stateless/turn`` while one
  legitimate turn is timed;
- ``slow``: a few connections sending one byte a second while a legitimate turn is timed;
- ``idle``: 512 connections that send nothing, then a legitimate request;
- ``fill``: four client addresses each asking for one session more than the per-client cap,
  filling the table; the RSS it costs.

The baseline is one request alone on the idle server, measured in the same run. The server's
peak RSS (its process tree) is printed at the end.

    python benchmarks/bench_server_load.py [--sessions 200] [--only concurrent,log] [--fixed] [--view none] [-- serve args]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import socket
import statistics
import string
import subprocess
import sys
import threading
import time
from typing import Any, NamedTuple

import httpx

CASES = [
    "NCCL WARN Error while creating shared memory segment /dev/shm/nccl-abc (size 9637888) in docker",
    "all_reduce times out with DistBackendError, and after I set NCCL_SOCKET_IFNAME it fails at once "
    "with ncclInvalidUsage saying the interface cannot be found",
    "ncclInvalidUsage: Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000",
    "RuntimeError: Distributed package doesn't have NCCL built in",
    "multi-node job on 4 p4d nodes with EFA hangs at init_process_group",
]
LOG = ("node1:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n"
       "node1:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
       "node1:1:1 [0] NCCL WARN Bootstrap : no socket interface found\n"
       "[rank0]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1691, invalid usage\n")
ANSWERS = [("multi_node", True), ("container", "docker"), ("multi_node", False), ("container", "none")]


class Inputs(NamedTuple):
    """What one benchmark session sends: its words, its log and two answers."""

    text: str
    log: str
    answers: tuple[tuple[str, Any], ...]


def session_inputs(count: int, varied: bool = True, start: int = 0) -> list[Inputs]:
    """The sessions' inputs. ``varied``: each session is a different incident of the packaged
    library, told as its reporter did (a seeded shuffle): its words, its log (or, for the ~60 %
    without one, the log of the next incident that has one) and two facts its reporter knew that
    the engine can ask (else the fixed answers), so no cache shared by sessions can serve one
    session with another's work. Not varied: the five fixed descriptions, one log and two pairs
    of answers of the earlier figures (every session repeats one of ten). ``start``: the first
    incident's place in the shuffle."""
    if not varied:
        return [Inputs(CASES[i % len(CASES)], LOG, tuple(ANSWERS[i % 2::2])) for i in range(count)]
    from nccl_doctor import load_doctor
    from nccl_doctor.engine.values import ValueProblem, coerce

    kb = load_doctor().kb
    ids = sorted(kb.incidents)
    random.Random(15).shuffle(ids)
    with_log = [i for i in ids if kb.incidents[i].log]
    out = []
    for n in range(start, start + count):
        incident = kb.incidents[ids[n % len(ids)]]
        log = incident.log or kb.incidents[with_log[n % len(with_log)]].log
        answers = []
        for name, value in incident.knows.items():
            fact = kb.facts.get(name)
            if fact is None or fact.question is None or fact.get("evidence"):
                continue
            try:
                answers.append((name, coerce(value, fact.type, fact.choices)))
            except ValueProblem:
                continue
            if len(answers) == 2:
                break
        out.append(Inputs(incident.reporter, log, tuple(answers) if len(answers) == 2 else tuple(ANSWERS[n % 2::2])))
    return out


def start(serve_args: list[str], module: str = "nccl_doctor.server") -> tuple[subprocess.Popen, str]:
    code = f"import sys; from {module} import serve_main; sys.exit(serve_main(sys.argv[1:]))"
    proc = subprocess.Popen([sys.executable, "-c", code, "--port", "0", *serve_args],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    banner = ""
    while "http://" not in banner:
        line = proc.stderr.readline()
        if not line:
            raise SystemExit(f"server did not start: {banner}")
        banner += line
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    url = re.search(r"http://[\d.]+:\d+", banner).group(0)
    for _ in range(200):
        try:
            if httpx.get(url + "/healthz", timeout=5).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.1)
    return proc, url


def tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and its children (Linux /proc), in MB."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except (OSError, StopIteration):
            pass
    return total / 1024


def tree_cpu_s(pid: int) -> dict[int, float]:
    """CPU seconds (user + system) of a process and each of its children, by pid."""
    out, todo = {}, [pid]
    tick = os.sysconf("SC_CLK_TCK")
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[p] = (int(fields[11]) + int(fields[12])) / tick
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def expected_facts(i: int, inputs: Inputs) -> dict:
    """The facts session ``i`` ends with when its turns run in this process (the way the server
    runs them: the log through the one ingest path)."""
    from nccl_doctor import load_doctor
    from nccl_doctor.ingest import ingest_text

    session = load_doctor().session()
    session.tell(inputs.text)
    ingest_text(session, inputs.log, name=f"rank{i}.log")
    for fact, value in inputs.answers:
        session.answer(fact, value)
    return {k: r.value for k, r in session.facts().items()}


class Conn:
    """A minimal keep-alive HTTP/1.1 client on asyncio streams: the load generator should cost
    far less CPU than the server it measures (httpx costs ~6 ms a request here). It shares the
    server's cores, so its CPU is printed apart (``this client``); the reply's head is read in
    one call and parsed at once (a read per header line cost ~0.1 ms a request)."""

    def __init__(self, url: str, source: str | None = None):
        self.host, port = url.removeprefix("http://").split(":")
        self.port = int(port)
        self.source = (source, 0) if source else None
        self.reader = self.writer = None

    async def request(self, method: str, path: str, body: bytes = b"", kind: str = "application/json"):
        for attempt in (0, 1):
            if self.writer is None:
                self.reader, self.writer = await asyncio.open_connection(self.host, self.port, local_addr=self.source,
                                                                         limit=1 << 20)
            head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n\r\n"
            try:
                self.writer.write(head.encode() + body)
                try:
                    reply = await self.reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError as exc:
                    if exc.partial:
                        raise
                    raise ConnectionResetError("closed") from None
                status_line, *lines = reply[:-4].decode("latin-1").split("\r\n")
                headers = {}
                for line in lines:
                    key, _, value = line.partition(":")
                    headers[key.strip().lower()] = value.strip()
                data = await self.reader.readexactly(int(headers.get("content-length", 0)))
                if headers.get("connection") == "close":
                    self.writer.close()
                    self.writer = None
                return int(status_line.split()[1]), data
            except (ConnectionError, asyncio.IncompleteReadError):
                self.writer = None
                if attempt:  # a kept-alive connection the server closed: retry once on a new one
                    raise
        raise AssertionError("unreachable")


_FIRST_ID = re.compile(rb'\{"id":"([A-Za-z0-9_-]+)"')


def run_loop(work):
    """``asyncio.run(work)``, on uvloop when it is installed (the server's own loop): the client's
    share of the two cores is smaller."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(work)
    return uvloop.run(work)


async def one_session(url: str, i: int, inputs: Inputs, times: list[float], errors: list[str],
                      by_turn: dict[str, list[float]] | None = None, view: str = "full") -> bytes | None:
    conn = Conn(url)
    query = "" if view == "full" else f"view={view}"  # ``none``: the turns' replies hold the id alone

    async def call(method: str, path: str, body: Any = None, raw: bytes | None = None, kind: str = "application/json"):
        turn = ("create" if path.split("?")[0] == "/sessions" else "state" if method == "GET" else path.rsplit("/", 1)[-1].split("?")[0])
        started = time.perf_counter()
        try:
            status, data = await conn.request(method, path, raw if raw is not None else
                                              (json.dumps(body).encode() if body is not None else b""), kind)
        except OSError as exc:
            errors.append(f"{method} {path}: {type(exc).__name__}")
            return None
        times.append(time.perf_counter() - started)
        if by_turn is not None:
            by_turn.setdefault(turn, []).append(times[-1])
        if status >= 400:
            errors.append(f"{method} {path}: {status} {data[:120]!r}")
            return None
        return data

    # the client shares the server's cores: it parses no view while the clock runs (a view is
    # ~90 KB; json.loads of the create's and the final one cost ~0.4 ms a request): the create's
    # id is the reply's first key, and the final views are parsed after the run
    created = await call("POST", "/sessions" + (f"?{query}" if query else ""), {"text": inputs.text})
    if created is None:
        return None
    found = _FIRST_ID.match(created)
    sid = found.group(1).decode() if found else json.loads(created)["id"]
    await call("POST", f"/sessions/{sid}/log?name=rank{i}.log" + (f"&{query}" if query else ""),
               raw=inputs.log.encode(), kind="text/plain")
    for fact, value in inputs.answers:
        await call("POST", f"/sessions/{sid}/answers" + (f"?{query}" if query else ""), {"fact": fact, "value": value})
    final = await call("GET", f"/sessions/{sid}")
    await conn.request("DELETE", f"/sessions/{sid}")
    if conn.writer is not None:
        conn.writer.close()
    return final


def concurrent(url: str, sessions: int, pid: int, varied: bool = True, view: str = "full") -> None:
    plan = session_inputs(sessions, varied)
    # a session's facts do not depend on its number (only its log's name does, in sources)
    wanted = {inputs: expected_facts(0, inputs) for inputs in dict.fromkeys(plan)}
    times: list[float] = []
    errors: list[str] = []
    by_turn: dict[str, list[float]] = {}

    async def go():
        return await asyncio.gather(*(one_session(url, i, plan[i], times, errors, by_turn, view) for i in range(sessions)))

    cpu_before, own_before = tree_cpu_s(pid), time.process_time()
    started = time.perf_counter()
    finals = run_loop(go())
    wall = time.perf_counter() - started
    cpu_after, own = tree_cpu_s(pid), time.process_time() - own_before
    main_cpu = cpu_after.get(pid, 0) - cpu_before.get(pid, 0)
    workers_cpu = sum(v - cpu_before.get(p, 0) for p, v in cpu_after.items() if p != pid)
    finals = [json.loads(f) if f is not None else None for f in finals]
    mixed = sum(1 for i, f in enumerate(finals) if f is not None and
                {k: v["value"] for k, v in f["facts"].items()} != wanted[plan[i]])
    print(f"concurrent ({len(wanted)} different sessions{'' if view == 'full' else ', turns with ?view=' + view}): {sessions} sessions x 5 turns: {len(times)} answered in {wall:.1f} s = "
          f"{len(times) / wall:.0f} req/s; p50 {pct(times, .5) * 1000:.0f} ms, p99 {pct(times, .99) * 1000:.0f} ms, "
          f"max {max(times, default=0) * 1000:.0f} ms; {len(errors)} errors; {mixed} sessions with other facts")
    print(f"    CPU per request: server main process {main_cpu / len(times) * 1000:.1f} ms, engine workers "
          f"{workers_cpu / len(times) * 1000:.1f} ms, this client {own / len(times) * 1000:.1f} ms")
    print("    by turn (p50 / p99 ms): " + ", ".join(
        f"{turn} {pct(t, .5) * 1000:.0f} / {pct(t, .99) * 1000:.0f}" for turn, t in by_turn.items()))
    for line in errors[:5]:
        print("   ", line)


def fill(url: str, pid: int, per_client: int, clients: int) -> None:
    """Fill the session table from several loopback addresses (127.0.0.2, ...); RSS per session."""
    before = tree_rss_mb(pid)
    codes: list[int] = []

    async def one_client(n: int):
        conn = Conn(url, source=f"127.0.0.{n + 2}")
        for i in range(per_client + 1):  # one more than the cap: refused
            status, _ = await conn.request("POST", "/sessions", json.dumps({"text": CASES[i % len(CASES)]}).encode())
            codes.append(status)

    async def go():
        await asyncio.gather(*(one_client(n) for n in range(clients)))

    started = time.perf_counter()
    run_loop(go())
    held = codes.count(201)
    after = tree_rss_mb(pid)
    print(f"fill: {clients} addresses x {per_client + 1} sessions in {time.perf_counter() - started:.1f} s: {held} held, "
          f"{codes.count(429)} refused (per-client cap), {codes.count(503)} refused (table full); RSS "
          f"{before:.0f} -> {after:.0f} MB ({(after - before) * 1024 / max(held, 1):.0f} KB per session)")


def junk_lines(size: int, seed: int = 1) -> str:
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits + " .:/[]()-_=,"
    out, total = [], 0
    while total < size:
        line = "".join(rng.choice(alphabet) for _ in range(rng.randrange(20, 160)))
        out.append(line)
        total += len(line) + 1
    return "\n".join(out) + "\n"


def nccl_info_log(size: int, seed: int = 2) -> str:
    rng = random.Random(seed)
    out, total, n = [], 0, 0
    while total < size:
        r = rng.randrange(16)
        line = rng.choice([
            f"node{r // 8}:{100 + r}:{200 + r} [{r % 8}] NCCL INFO Channel {n % 32:02d}/0 : {r}[{r % 8}] -> {(r + 1) % 16}[0] via P2P/IPC/read",
            f"node{r // 8}:{100 + r}:{200 + r} [{r % 8}] NCCL INFO AllReduce: opCount {n:x} sendbuff 0x7f12a4000000 count 262144 datatype 7 op 0 root 0 comm 0x55d2c0 [nranks=16] stream 0x55d2e0",
            f"node{r // 8}:{100 + r}:{200 + r} [{r % 8}] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.1.0.{r}<0>",
            f"{{'loss': {rng.random():.4f}, 'learning_rate': 2e-05, 'epoch': 0.{n % 100:02d}}}",
        ])
        out.append(line)
        total += len(line) + 1
        n += 1
    out.insert(len(out) // 2, "node0:100:200 [0] NCCL WARN Bootstrap : no socket interface found")
    return "\n".join(out) + "\n"


def logs(url: str, limit: float) -> None:
    with httpx.Client(base_url=url, timeout=limit) as http:
        for label, body in [("junk", junk_lines((4 << 20) - 4096)), ("NCCL INFO", nccl_info_log((4 << 20) - 4096))]:
            sid = http.post("/sessions").json()["id"]
            started = time.perf_counter()
            try:
                reply = http.post(f"/sessions/{sid}/log", content=body, headers={"content-type": "text/plain"})
                outcome = f"{reply.status_code} {reply.text[:100] if reply.status_code >= 400 else ''}"
            except httpx.TimeoutException:
                outcome = f"no answer within {limit:.0f} s"
            took = time.perf_counter() - started
            print(f"log: 4 MB of {label}: {took:.2f} s ({len(body) / took / 2**20:.1f} MiB/s) -> {outcome}")
            http.delete(f"/sessions/{sid}")


def timed_turn(url: str, timeout: float) -> str:
    started = time.perf_counter()
    try:
        reply = httpx.post(url + "/stateless/turn", json={"text": "hang at init on 2 nodes"}, timeout=timeout)
        return f"{time.perf_counter() - started:.2f} s ({reply.status_code})"
    except httpx.HTTPError as exc:
        return f"failed after {time.perf_counter() - started:.1f} s ({type(exc).__name__})"


def flood(url: str, clients: int, limit: float) -> None:
    junk = junk_lines(32 << 10, seed=3)
    stop = threading.Event()
    answered = []

    async def attacker(http: httpx.AsyncClient):
        while not stop.is_set():
            try:
                reply = await http.post("/stateless/turn", json={"text": junk})
                answered.append(reply.status_code)
            except httpx.HTTPError:
                answered.append(0)

    async def go():
        limits = httpx.Limits(max_connections=clients)
        async with httpx.AsyncClient(base_url=url, timeout=limit, limits=limits) as http:
            tasks = [asyncio.create_task(attacker(http)) for _ in range(clients)]
            await asyncio.sleep(2)
            result = await asyncio.to_thread(timed_turn, url, limit)
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            return result

    result = asyncio.run(go())
    codes = {c: answered.count(c) for c in set(answered)}
    print(f"flood: {clients} clients sending 32 KiB of junk text: a legitimate turn took {result}; junk replies {codes}")


def slow(url: str, conns: int, seconds: float) -> None:
    host, port = url.removeprefix("http://").split(":")
    stop = threading.Event()

    def dribble():
        try:
            s = socket.create_connection((host, int(port)))
            s.sendall(b"POST /stateless/turn HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
            while not stop.is_set():
                s.sendall(b"a")
                time.sleep(1)
        except OSError:
            return

    threads = [threading.Thread(target=dribble, daemon=True) for _ in range(conns)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    print(f"slow: {conns} connections sending a byte a second for {seconds:.0f} s: a legitimate turn took {timed_turn(url, 30)}")
    stop.set()


def idle(url: str, conns: int) -> None:
    host, port = url.removeprefix("http://").split(":")
    held = []
    for _ in range(conns):
        try:
            held.append(socket.create_connection((host, int(port))))
        except OSError:
            break
    time.sleep(2)
    try:
        reply = httpx.get(url + "/healthz", timeout=30)
        outcome = str(reply.status_code)
    except httpx.HTTPError as exc:
        outcome = type(exc).__name__
    closed = 0
    for s in held:
        s.settimeout(0.01)
        try:
            closed += s.recv(1) == b""
        except OSError:
            pass
    print(f"idle: {len(held)} silent connections: healthz -> {outcome}; {closed} closed by the server after 2 s")
    for s in held:
        s.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--only", default="concurrent,log,flood,slow,idle,fill")
    parser.add_argument("--limit", type=float, default=120, help="give up on one request after this many seconds")
    parser.add_argument("--module", default="nccl_doctor.server",
                        help="the module whose serve_main to run (to compare an older copy of the server)")
    parser.add_argument("--fixed", action="store_true",
                        help="the five fixed descriptions and one log of the earlier figures, not one incident per session")
    parser.add_argument("--view", choices=["full", "none"], default="full",
                        help="concurrent: what the turns before the last GET ask for (none: ?view=none, the id alone)")
    parser.add_argument("serve_args", nargs="*", help="passed to diagnose serve (after --)")
    args = parser.parse_args()
    proc, url = start(args.serve_args, args.module)
    try:
        base = []
        with httpx.Client(base_url=url) as http:
            for _ in range(20):
                started = time.perf_counter()
                sid = http.post("/sessions", json={"text": CASES[1]}).json()["id"]
                http.post(f"/sessions/{sid}/answers", json={"fact": "multi_node", "value": True})
                base.append((time.perf_counter() - started) / 2)
                http.delete(f"/sessions/{sid}")
        print(f"baseline: one request alone {statistics.median(base) * 1000:.0f} ms (median of 20); "
              f"server RSS {tree_rss_mb(proc.pid):.0f} MB; serve args {args.serve_args or 'default'}")
        peak = 0.0
        for part in args.only.split(","):
            {"concurrent": lambda: concurrent(url, args.sessions, proc.pid, not args.fixed, args.view), "log": lambda: logs(url, args.limit),
             "flood": lambda: flood(url, 45, args.limit), "slow": lambda: slow(url, 8, 10),
             "idle": lambda: idle(url, 512), "fill": lambda: fill(url, proc.pid, 250, 4)}[part]()
            peak = max(peak, tree_rss_mb(proc.pid))
        print(f"server RSS after the runs: {peak:.0f} MB")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
