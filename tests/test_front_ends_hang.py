"""The four front ends read the same logs the same way: ``diagnose --json``, the TUI (Pilot), the
HTTP session view and embedding code (ingest, then a session carried as JSON) report the same
``hang`` object and the same leading causes.

Before, only the one-shot CLI ran hang forensics: on these four per-rank logs its top cause was
the rank that never joined, while the TUI and the server raised nothing."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from nccl_doctor import Session
from nccl_doctor.ingest import ingest_paths, ingest_text

HOSTS = {0: "gpu-a-1", 1: "gpu-a-1", 2: "gpu-b-7", 3: "gpu-b-7"}


def rank_log(rank: int) -> str:
    host, pid = HOSTS[rank], 4100 + rank
    lines = [f"{host}:{pid}:{pid + 9} [{rank % 2}] NCCL INFO NCCL version 2.21.5+cuda12.4",
             f"{host}:{pid}:{pid + 9} [{rank % 2}] NCCL INFO comm 0x55d{rank} rank {rank} nranks 4 cudaDev {rank % 2} "
             f"nvmlDev {rank % 2} busId {rank}000 commId 0xabc123 - Init COMPLETE"]
    lines += [f"[rank{rank}]:2024-11-09 15:00:{i:02d},000 INFO step {i} loss 2.31" for i in range(30)]
    pg = f"[rank{rank}]:[E1109 16:13:20.{rank}00 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank {rank}]"
    if rank == 2:
        lines.append(f"{pg} Received a dump signal due to a collective timeout from  rank 0 and we will try our best "
                     "to dump the debug info. Last enqueued NCCL work: 41, last completed NCCL work: 41.")
    else:
        lines += [f"[rank{rank}]:[E1109 16:13:20.{rank}00 ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught "
                  "collective operation timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=4096, NumelOut=4096, "
                  "Timeout(ms)=600000) ran for 600038 milliseconds before timing out.",
                  f"{pg} Exception (either an error or timeout) detected by watchdog at work: 42, last enqueued NCCL "
                  "work: 42, last completed NCCL work: 41."]
    return "\n".join(lines) + "\n"


@pytest.fixture
def logs(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    for rank in HOSTS:
        (folder / f"rank{rank}.log").write_text(rank_log(rank))
    return folder


def leading(report: dict) -> list[tuple[str, float]]:
    return [(d["id"], round(d["confidence"], 4)) for d in report["diagnoses"][:3]]


def from_cli(folder) -> dict:
    done = subprocess.run([sys.executable, "-m", "nccl_doctor.cli", "--log", str(folder), "--json", "--no-input"],
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


def from_tui(doctor, folder) -> dict:
    from nccl_doctor.tui.app import DoctorApp

    async def drive() -> dict:
        app = DoctorApp(doctor, logs=[str(folder)])
        async with app.run_test(size=(100, 30)) as pilot:
            for _ in range(20):
                await pilot.app.workers.wait_for_complete()
                await pilot.pause(0.05)
                if app.conversation.session.logs:
                    break
            await pilot.app.workers.wait_for_complete()
            return app.conversation.run(lambda s: s.report())

    return asyncio.run(drive())


def from_http(doctor, folder) -> dict:
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("fastapi")
    from nccl_doctor.server import create_app

    async def drive() -> dict:
        transport = httpx.ASGITransport(app=create_app(doctor))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            sid = (await http.post("/sessions")).json()["id"]
            for path in sorted(folder.iterdir()):  # one upload per rank log, as a bot sends them
                reply = await http.post(f"/sessions/{sid}/log", json={"log": path.read_text(), "name": path.name})
                assert reply.status_code == 200, reply.text
            return (await http.get(f"/sessions/{sid}")).json()

    return asyncio.run(drive())


def from_embedding(doctor, folder) -> dict:
    session = doctor.session()
    for path in sorted(folder.iterdir()):
        ingest_text(session, path.read_text(), name=path.name)
    carried = Session.from_json(doctor, session.to_json())  # a stateless bot carries the state
    report = carried.report()
    by_paths = doctor.session()
    ingest_paths(by_paths, [str(folder)])
    assert by_paths.report()["hang"] == report["hang"]
    return report


def test_cli_tui_http_and_embedding_report_the_same_hang(doctor, logs):
    cli = from_cli(logs)
    hang = cli["hang"]
    assert hang["culprit"]["ranks"] == [2] and hang["culprit"]["hosts"] == ["gpu-b-7"]
    assert hang["waiting_ranks"] == [0, 1, 3] and hang["seq"] == 42
    for name, report in (("tui", from_tui(doctor, logs)), ("http", from_http(doctor, logs)),
                         ("embedding", from_embedding(doctor, logs))):
        assert report["hang"] == hang, name
        assert leading(report) == leading(cli), name
        assert report["facts"]["hang_culprit_rank"]["value"] == 2, name


def test_uploads_one_by_one_build_up_the_analysis(doctor, logs):
    """Each upload is analysed with the ones before it; the culprit appears once its absence shows."""
    session = doctor.session()
    paths = sorted(logs.iterdir())
    ingest_text(session, paths[0].read_text(), name=paths[0].name)
    first = session.report()["hang"]
    assert first["waiting_ranks"] == [0] and first["culprit"] is None  # one rank's log cannot tell who is missing
    for path in paths[1:]:
        ingest_text(session, path.read_text(), name=path.name)
    assert session.report()["hang"]["culprit"]["ranks"] == [2]
    facts = session.facts()
    assert facts["hang_culprit_rank"].value == 2


def test_damaged_evidence_in_a_carried_state_is_dropped_not_fatal(doctor, logs):
    session = doctor.session()
    ingest_text(session, (logs / "rank0.log").read_text(), name="rank0.log")
    state = json.loads(session.to_json())
    state["hang"]["evidence"][0]["streams"][0]["rank"] = "not a rank"  # a client's forged state
    state["hang"]["evidence"].append({"path": "x", "streams": [{"key": 1}]})
    carried = Session.from_json(doctor, json.dumps(state))
    result = ingest_text(carried, (logs / "rank2.log").read_text(), name="rank2.log")
    assert any("damaged" in p for p in result.problems)
    assert carried.report()["hang"] is not None
