"""``diagnose mcp`` driven by the official SDK's own client, over stdio and streamable HTTP.

Seed case 000 (EFA on AWS p4d, hang at init; the fix is the security group's self rules) runs
from the user's description to the fix plan through tool calls only, as an agent would.
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp.server.mcpserver")
from mcp import Client, StdioServerParameters  # noqa: E402

SEED_000 = "MMDetection training on 4 AWS p4d nodes (8 A100 each, EFA networking) hangs during initialization"
SEED_000_LOG = "node0021:21858:22794 [5] graph/search.cc:765 NCCL WARN Could not find a path for pattern 4, falling back to simple order\n"
# What the reporter of seed 000 would answer; every other question gets "don't know".
TRUTH = {"efa_sg_self_rules_ok": False, "multi_node": True, "fails_after_long_run": False, "single_node_works": True}
TOOLS = {"start_consultation", "add_log", "add_description", "answer_question", "get_state", "explain_cause",
         "explain_question", "export_report", "end_consultation"}
STDIO = StdioServerParameters(command=sys.executable, args=["-m", "nccl_doctor.cli", "mcp"],
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _plan_text(view: dict) -> str:
    return json.dumps(view["plan"]["steps"])


async def consult(client: Client, *, stateless: bool = False) -> dict:
    """Seed 000 through tool calls: describe with the log, answer until no question is left."""
    first = await client.call_tool("start_consultation", {"description": SEED_000, "log_text": SEED_000_LOG,
                                                          "stateless": stateless})
    assert not first.is_error, first.content
    view = first.structured_content
    where = {"state": view["state"]} if stateless else {"session_id": view["session_id"]}
    for _ in range(15):
        question = view["next_question"]
        if question is None:
            break
        answer = ({"answer": TRUTH[question["id"]]} if question["id"] in TRUTH else {"dont_know": True})
        reply = await client.call_tool("answer_question", {"fact": question["id"], **answer, **where})
        assert not reply.is_error, reply.content
        view = reply.structured_content
        if stateless:
            where = {"state": view["state"]}
    view["where"] = where
    return view


def _check_seed_000(view: dict) -> None:
    assert view["diagnoses"][0]["id"] == "efa_security_group", [d["id"] for d in view["diagnoses"][:3]]
    assert re.search(r"security[- ]group", _plan_text(view), re.I), _plan_text(view)[:500]
    assert view["diagnoses"][0]["references"], "a diagnosis an agent quotes must carry references"


def test_stdio_seed_000_to_the_fix_plan():
    async def go():
        async with Client(STDIO, read_timeout_seconds=60) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert TOOLS <= names
            described = {t.name: t.description or "" for t in (await client.list_tools()).tools}
            assert "knowledge base" in described["start_consultation"] and "state" in described["answer_question"]
            view = await consult(client)
            _check_seed_000(view)
            where = view["where"]
            state = (await client.call_tool("get_state", where)).structured_content
            assert state["diagnoses"][0]["id"] == "efa_security_group" and state["facts"]
            how = await client.call_tool("explain_cause", {"cause_id": "efa_security_group", **where})
            assert not how.is_error and how.structured_content["rules"]
            why = await client.call_tool("explain_question", {"fact": "efa_sg_self_rules_ok", **where})
            assert not why.is_error and why.structured_content["question"] == "efa_sg_self_rules_ok"
            report = await client.call_tool("export_report", where)
            text = report.content[0].text
            assert "# nccl-doctor report" in text and "redacted" in text
            causes = json.loads((await client.read_resource("nccl-doctor://causes")).contents[0].text)
            efa = next(c for c in causes if c["id"] == "efa_security_group")
            assert efa["title"] and efa["references"]
            one = json.loads((await client.read_resource("nccl-doctor://causes/efa_security_group")).contents[0].text)
            assert one["fixes"] and one["references"] == efa["references"]
            probes = json.loads((await client.read_resource("nccl-doctor://probes")).contents[0].text)
            assert probes and all(p["name"] and "facts" in p for p in probes)
            ended = await client.call_tool("end_consultation", where)
            assert ended.structured_content["deleted"] is True
            gone = await client.call_tool("get_state", where)
            assert gone.is_error and "no session" in gone.content[0].text
    asyncio.run(go())


def test_stdio_bad_and_oversized_arguments_are_tool_errors():
    async def go():
        async with Client(STDIO, read_timeout_seconds=60) as client:
            sid = (await client.call_tool("start_consultation", {"description": "hang at init"})).structured_content["session_id"]
            cases = [
                ("answer_question", {"session_id": sid, "answer": True}, "fact"),                 # missing argument
                ("answer_question", {"session_id": sid, "fact": "no_such_fact", "answer": True}, "no_such_fact"),
                ("answer_question", {"session_id": sid, "fact": "multi_node", "answer": "perhaps"}, "multi_node"),
                ("answer_question", {"session_id": sid, "fact": "multi_node"}, "dont_know"),
                ("get_state", {"session_id": sid, "questions": "many"}, "questions"),
                ("get_state", {"session_id": "nope"}, "no session"),
                ("get_state", {}, "session_id"),
                ("explain_cause", {"session_id": sid, "cause_id": "no_such_cause"}, "no_such_cause"),
                ("start_consultation", {"description": "x" * 200_001}, "limit is 200000"),
                ("add_log", {"session_id": sid, "log_text": "NCCL WARN x\n" * 400_000}, "limit is"),
                ("get_state", {"state": {"format": "nccl-doctor-session", "version": 1, "assertions": [
                    {"name": "multi_node", "value": True, "source": {"kind": "probe", "detail": "forged"}}]}}, "probe"),
                ("get_state", {"state": {"format": "nccl-doctor-session", "version": 1, "matches": "a" * 100}}, "matches"),
            ]
            for tool, arguments, words in cases:
                reply = await client.call_tool(tool, arguments)
                assert reply.is_error, (tool, arguments)
                assert words.lower() in reply.content[0].text.lower(), (tool, reply.content[0].text)
            # The server is still there and the session unchanged by the refusals.
            state = await client.call_tool("get_state", {"session_id": sid})
            assert not state.is_error and "multi_node" not in state.structured_content["answers"]
    asyncio.run(go())


def test_stateless_consultation_keeps_nothing_and_matches():
    async def go():
        async with Client(STDIO, read_timeout_seconds=60) as client:
            view = await consult(client, stateless=True)
            _check_seed_000(view)
            assert "session_id" not in view and view["state"]["format"] == "nccl-doctor-session"
            report = await client.call_tool("export_report", {"state": view["state"]})
            assert not report.is_error and "Most likely" in report.content[0].text
    asyncio.run(go())


def test_streamable_http_on_loopback():
    proc = subprocess.Popen([sys.executable, "-m", "nccl_doctor.cli", "mcp", "--http", "0"], stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        banner, deadline = "", time.monotonic() + 60
        while time.monotonic() < deadline and "http://" not in banner:
            banner += proc.stderr.readline() or ""
            if proc.poll() is not None:
                break
        found = re.search(r"http://127\.0\.0\.1:\d+/mcp", banner)
        assert found, banner + (proc.stderr.read() if proc.poll() is not None else "")

        async def go():
            async with Client(found.group(0), read_timeout_seconds=60) as client:
                assert TOOLS <= {t.name for t in (await client.list_tools()).tools}
                _check_seed_000(await consult(client))
        asyncio.run(go())
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.mark.parametrize("args,words", [(["--http", "99999"], "not a port"), (["--http", "-5"], "not a port"),
                                        (["--nope"], "unrecognized")])
def test_bad_arguments_are_one_line(args, words):
    done = subprocess.run([sys.executable, "-m", "nccl_doctor.cli", "mcp", *args], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and words in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_the_readme_example_runs_seed_000_to_its_plan():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "start_consultation" in b)
    code = block.replace('StdioServerParameters(command="diagnose", args=["mcp"])',
                         f'StdioServerParameters(command={sys.executable!r}, args=["-m", "nccl_doctor.cli", "mcp"])')
    assert code != block, "the README example no longer launches `diagnose mcp`"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("efa_security_group") and "security-group rules" in done.stdout
