"""Pilot and snapshot tests of the TUI on a small fixed knowledge base.

The KB below is written for these tests (it is not the packaged one), so the screens and the
questions stay the same while the real KB grows. Seed conversations on the packaged KB are in
test_tui_seeds.py.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from nccl_doctor import load_doctor
from nccl_doctor.tui.app import DoctorApp
from nccl_doctor.tui.conversation_screen import ConversationScreen
from nccl_doctor.tui.dialogs import AnswersScreen, ExplainScreen, ExportScreen, HelpScreen, ProbeScreen
from nccl_doctor.tui.plan_screen import PlanScreen
from nccl_doctor.tui.start_screen import StartScreen

MINI_KB = r"""
facts:
  - id: multi_node
    type: bool
    question: Does the job span more than one machine (node)?
  - id: symptom_hang
    type: bool
    question: Does the job hang rather than fail with an error?
  - id: ping_works
    type: bool
    question: Can the machines ping each other on the addresses the job uses?
    help: Run ping from one node to the other's address.
  - id: container
    type: choice
    choices: [none, docker, podman, apptainer, enroot, other]
    question: Do the ranks run inside containers? Which runtime?
  - id: log_bootstrap_fail
    type: bool
    description: NCCL could not connect during bootstrap.
  - id: ifname_ok
    type: bool
    question: Does NCCL_SOCKET_IFNAME name an interface that exists on every node?
    probes: [host.interfaces]
symptoms:
  - id: says_hang
    phrases: [hang, stuck]
    sets: {symptom_hang: true}
  - id: says_nodes
    patterns: ['\b\d+ (nodes|machines)\b']
    sets: {multi_node: true}
signatures:
  - id: bootstrap_fail
    pattern: 'Connect to (?P<ip>\S+) failed'
    needles: ["Connect to"]
    sets: {log_bootstrap_fail: true}
rules:
  - id: hang_multi_firewall
    description: A hang across nodes often means blocked ports.
    when: {all: [{fact: multi_node}, {fact: symptom_hang}]}
    then: {evidence: [{cause: firewall, strength: 0.3}, {cause: wrong_iface, strength: 0.2}]}
  - id: ping_ok_firewall
    description: Nodes ping each other, so the route exists; the ports are what fails.
    when: {all: [{fact: multi_node}, {fact: ping_works}]}
    then: {evidence: [{cause: firewall, strength: 0.5}]}
  - id: ping_fails_iface
    description: Nodes cannot reach each other on the chosen addresses.
    when: {all: [{fact: multi_node}, {fact: ping_works, eq: false}]}
    then: {evidence: [{cause: wrong_iface, strength: 0.5}, {cause: firewall, strength: -0.3}]}
  - id: docker_netns
    description: Containers on their own network namespace hide the host interfaces.
    when: {fact: container, eq: docker}
    then: {evidence: [{cause: container_net, strength: 0.5}]}
  - id: bootstrap_log
    description: The log shows a failed bootstrap connection.
    when: {fact: log_bootstrap_fail}
    then: {evidence: [{cause: firewall, strength: 0.4}, {cause: wrong_iface, strength: 0.3}]}
  - id: ifname_bad
    description: The interface NCCL was told to use does not exist everywhere.
    when: {fact: ifname_ok, eq: false}
    then: {evidence: [{cause: wrong_iface, strength: 0.7}]}
  - id: single_node
    description: One machine has no inter-node network to block.
    when: {fact: multi_node, eq: false}
    then: {evidence: [{cause: firewall, strength: -0.6}, {cause: wrong_iface, strength: -0.5}]}
causes:
  - id: firewall
    title: A firewall blocks NCCL's ports between nodes
    area: network
    explanation: The nodes reach each other but the TCP ports NCCL opens are filtered.
    fixes: [check_ports, open_ports]
    references: [https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html]
    prior: 0.1
  - id: wrong_iface
    title: NCCL uses the wrong network interface
    area: network
    explanation: NCCL picked an interface the other nodes cannot reach.
    fixes: [set_ifname]
    references: [https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html]
    prior: 0.1
  - id: container_net
    title: The container's network is isolated
    area: container
    explanation: Each container sees only its own virtual interface.
    fixes: [host_network]
    references: [https://docs.docker.com/network/]
    prior: 0.05
fixes:
  - id: check_ports
    title: Test a port between the nodes
    kind: check
    cost: 1
    steps: [Listen on one node and connect from the other.]
    commands: ["nc -l 29500", "nc -vz 10.0.0.1 29500"]
  - id: open_ports
    title: Open the ports NCCL uses
    steps: [Allow TCP between the nodes in the firewall or security group.]
    commands: ["sudo ufw allow from 10.0.0.0/24"]
    verify: [The job passes init.]
    caveats: [Raising the timeout only hides this.]
  - id: set_ifname
    title: Set NCCL_SOCKET_IFNAME to the interface that connects the nodes
    steps: [Find the interface with the node's routable address, then set it for every rank.]
    commands: ["ip -brief addr"]
    env: {NCCL_SOCKET_IFNAME: eth0}
  - id: host_network
    title: Run the containers with the host network
    steps: [Start each container with host networking.]
    commands: ["docker run --network=host ..."]
"""

STORY = "training on 2 nodes is stuck"


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def mini_doctor(tmp_path_factory):
    folder = tmp_path_factory.mktemp("minikb")
    (folder / "mini.yaml").write_text(MINI_KB)
    return load_doctor(folder)


async def settle(pilot) -> None:
    """Let workers finish and the screen redraw."""
    for _ in range(4):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause(0)  # drain the message queues without waiting for an idle CPU


async def start(pilot, text: str = STORY) -> None:
    await pilot.pause()
    assert isinstance(pilot.app.screen, StartScreen)
    pilot.app.screen.query_one("#what").insert(text)
    await pilot.press("enter")
    await settle(pilot)


def question_id(app) -> str | None:
    screen = app.screen
    assert isinstance(screen, ConversationScreen)
    return screen.view.question.id if screen.view and screen.view.question else None


def transcript(app) -> str:
    log = app.screen.query_one("#transcript")
    return "\n".join(strip.text for strip in log.lines)


def markdown_source(screen) -> str:
    from textual.widgets import Markdown

    return screen.query_one(Markdown).source


@pytest.mark.anyio
async def test_conversation_to_plan_with_why_how_and_back(mini_doctor):
    app = DoctorApp(mini_doctor)
    async with app.run_test(size=(80, 24)) as pilot:
        await start(pilot)
        session = app.conversation.session
        assert session.facts()["multi_node"].value is True
        assert question_id(app) == "ping_works"
        assert "I noted:" in transcript(app)

        await pilot.press("w")
        await settle(pilot)
        assert isinstance(app.screen, ExplainScreen)
        why = markdown_source(app.screen)
        assert "Why I am asking" in why and "A firewall blocks" in why
        await pilot.press("escape")

        await pilot.press("h")
        await settle(pilot)
        assert isinstance(app.screen, ExplainScreen)
        how = markdown_source(app.screen)
        assert "hang_multi_firewall" in how and "text:says_hang" in how
        await pilot.press("escape")

        await pilot.press("n")  # ping fails: points at the interface
        await settle(pilot)
        assert session.answers() == {"ping_works": False}
        top = session.diagnoses()[0].id
        assert top == "wrong_iface"

        await pilot.press("b")
        await settle(pilot)
        assert isinstance(app.screen, AnswersScreen)
        await pilot.press("enter")  # the first row: ping_works
        await settle(pilot)
        assert question_id(app) == "ping_works"
        assert "Changing an answer" in str(app.screen.query_one("#question").border_title)
        await pilot.press("y")
        await settle(pilot)
        assert session.answers() == {"ping_works": True}
        for _ in range(5):  # "don't know" to the rest; when nothing is left the plan opens by itself
            if isinstance(app.screen, PlanScreen):
                break
            await pilot.press("d")
            await settle(pilot)
        assert isinstance(app.screen, PlanScreen)
        plan = markdown_source(app.screen)
        assert "A firewall blocks" in plan and "nc -vz 10.0.0.1 29500" in plan
        assert "```" in plan

        await pilot.press("escape")
        assert isinstance(app.screen, ConversationScreen)
        await pilot.press("b")
        await settle(pilot)
        await pilot.press("x")  # take the answer back
        await settle(pilot)
        assert session.answers() == {}
        assert question_id(app) == "ping_works"
        assert "took back" in transcript(app)


@pytest.mark.anyio
async def test_own_words_are_matched_or_told(mini_doctor):
    app = DoctorApp(mini_doctor)
    async with app.run_test(size=(80, 24)) as pilot:
        await start(pilot)
        session = app.conversation.session
        await pilot.press("t")
        await pilot.press("n", "o", "p", "e")
        app.screen.query_one("#own-words").value += ", ping times out"
        await pilot.press("enter")
        await settle(pilot)
        assert session.answers() == {"ping_works": False}
        assert "(→ no)" in transcript(app)
        # Free text that answers nothing is told to the engine and the question stays.
        question = question_id(app)
        app.screen.query_one("#own-words").value = "we run in docker containers"
        await pilot.press("enter")
        await settle(pilot)
        assert any("docker" in t for t in session.texts)
        assert question_id(app) == question


@pytest.mark.anyio
async def test_choice_keys_and_dont_know(mini_doctor):
    app = DoctorApp(mini_doctor)
    async with app.run_test(size=(80, 24)) as pilot:
        await start(pilot, "it hangs")
        session = app.conversation.session
        seen = []
        for _ in range(8):
            if not isinstance(app.screen, ConversationScreen) or question_id(app) is None:
                break
            qid = question_id(app)
            seen.append(qid)
            if qid == "container":
                await pilot.press("2")  # docker
            else:
                await pilot.press("d")
            await settle(pilot)
        assert "container" in seen
        assert session.answers().get("container") == "docker"
        assert set(session.unknown) >= set(seen) - {"container"}


@pytest.mark.anyio
async def test_log_file_path_opens_the_log(mini_doctor, tmp_path):
    log = tmp_path / "rank0.log"
    log.write_text("node1:1:1 [0] NCCL INFO start\nnode1:1:1 [0] NCCL WARN Connect to 10.0.0.2<29500> failed\n")
    app = DoctorApp(mini_doctor)
    async with app.run_test(size=(80, 24)) as pilot:
        await start(pilot, str(log))
        session = app.conversation.session
        assert session.logs[0].name == "rank0.log"
        assert session.facts()["log_bootstrap_fail"].source.detail == "rank0.log:2"
        assert "Read rank0.log: 2 lines" in transcript(app)


@pytest.mark.anyio
async def test_start_from_symptom_and_logs_skips_the_first_screen(mini_doctor, tmp_path):
    log = tmp_path / "a.log"
    log.write_text("Connect to 10.0.0.2<29500> failed\n")
    app = DoctorApp(mini_doctor, symptom="2 nodes hang", logs=[str(log)])
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, ConversationScreen)
        assert app.conversation.session.logs[0].lines == 1


@pytest.mark.anyio
async def test_missing_log_file_is_reported(mini_doctor):
    app = DoctorApp(mini_doctor)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.screen.query_one("#log-paths").value = "/nonexistent/rank0.log"
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, StartScreen)
        assert "no such file" in str(app.screen.query_one("#start-status").render())


@pytest.mark.anyio
async def test_export_markdown_and_json(mini_doctor, tmp_path):
    app = DoctorApp(mini_doctor, export_dir=tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await start(pilot, "2 nodes stuck; MASTER_ADDR=gpu-node-01 node1:1:1 [0] NCCL WARN Connect to 10.0.0.2<29500> failed")
        await pilot.press("f")
        await settle(pilot)
        assert isinstance(app.screen, PlanScreen)
        app.screen.directory = tmp_path
        await pilot.press("e")
        await settle(pilot)
        assert isinstance(app.screen, ExportScreen)
        await pilot.press("enter")
        await settle(pilot)
        report = (tmp_path / "nccl-doctor-report.md").read_text()
        assert "## Fix plan" in report and "## Diagnoses" in report
        assert "10.0.0.2" not in report and "gpu-node-01" not in report and "<ip-" in report
        await pilot.press("j")
        await settle(pilot)
        await pilot.click("#redact")  # the mouse works too: turn redaction off
        await pilot.click("#save")
        await settle(pilot)
        data = json.loads((tmp_path / "nccl-doctor-report.json").read_text())
        assert data["diagnoses"] and "redacted" not in data


@pytest.mark.anyio
async def test_probes_run_in_the_background(mini_doctor, monkeypatch):
    import sys
    import threading
    import types
    from dataclasses import dataclass, field

    @dataclass
    class Result:
        name: str
        status: str = "ok"
        facts: dict = field(default_factory=dict)
        findings: list = field(default_factory=list)

    gate = threading.Event()

    def run_probes(names, *, deadline, on_result=None):
        gate.wait(5)
        out = [Result(n, facts={"ifname_ok": False}, findings=["eth9 does not exist"]) for n in names]
        for r in out:
            on_result(r)
        return out

    def apply_results(session, results):
        for r in results:
            for k, v in r.facts.items():
                session.set_fact(k, v, source="probe", detail=r.name)

    fake = types.ModuleType("nccl_doctor.probes.api")
    fake.run_probes, fake.apply_results = run_probes, apply_results
    monkeypatch.setitem(sys.modules, "nccl_doctor.probes.api", fake)

    app = DoctorApp(mini_doctor)
    async with app.run_test(size=(80, 24)) as pilot:
        await start(pilot)
        assert app.screen.view.probes
        await pilot.press("p")
        await pilot.pause()
        assert isinstance(app.screen, ProbeScreen)
        await pilot.press("r")
        await pilot.pause()
        assert app.screen.running  # the UI answers while the probe runs
        await pilot.press("escape")
        assert isinstance(app.screen, ProbeScreen)
        gate.set()
        await settle(pilot)
        assert not app.screen.running
        await pilot.press("escape")
        await settle(pilot)
        assert app.conversation.session.facts()["ifname_ok"].source.kind == "probe"
        assert "eth9 does not exist" in transcript(app)


@pytest.mark.anyio
async def test_probes_unavailable(mini_doctor, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "nccl_doctor.probes.api", None)  # import fails
    app = DoctorApp(mini_doctor)
    async with app.run_test(size=(80, 24)) as pilot:
        await start(pilot)
        await pilot.press("p")
        await pilot.pause()
        await pilot.press("r")
        await pilot.pause()
        await pilot.press("escape")
        await settle(pilot)
        assert "Probes unavailable" in transcript(app)


@pytest.mark.anyio
async def test_help_and_quit(mini_doctor):
    app = DoctorApp(mini_doctor)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.press("ctrl+q")
    assert app.return_code == 0


# ------------------------------------------------------------------------------ snapshots

def _app(doctor):
    return DoctorApp(doctor)


async def _at_start(pilot) -> None:
    """The start screen once its workers are done (a loaded machine drew it half-ready)."""
    await pilot.pause()
    await settle(pilot)


async def _to_question(pilot) -> None:
    await start(pilot)


async def _to_why(pilot) -> None:
    await start(pilot)
    await pilot.press("w")
    await settle(pilot)


async def _to_plan(pilot) -> None:
    await start(pilot)
    await pilot.press("y")
    await settle(pilot)
    if not isinstance(pilot.app.screen, PlanScreen):
        await pilot.press("f")  # the plan now, whatever is left to ask
        await settle(pilot)


@pytest.mark.parametrize("size", [(80, 24), (120, 36)], ids=["80x24", "120x36"])
def test_snapshot_start(snap_compare, mini_doctor, size):
    assert snap_compare(_app(mini_doctor), terminal_size=size, run_before=_at_start)


@pytest.mark.parametrize("size", [(80, 24), (120, 36)], ids=["80x24", "120x36"])
def test_snapshot_question(snap_compare, mini_doctor, size):
    assert snap_compare(_app(mini_doctor), terminal_size=size, run_before=_to_question)


def test_snapshot_why(snap_compare, mini_doctor):
    assert snap_compare(_app(mini_doctor), terminal_size=(80, 24), run_before=_to_why)


@pytest.mark.parametrize("size", [(80, 24), (120, 36)], ids=["80x24", "120x36"])
def test_snapshot_plan(snap_compare, mini_doctor, size):
    assert snap_compare(_app(mini_doctor), terminal_size=size, run_before=_to_plan)


# ------------------------------------------------------------------ similar reported incidents

LIBRARY = """
incidents:
  - id: two-nodes-ports-blocked
    source: https://example.org/threads/17
    summary: Training on two nodes was stuck at start because the cloud firewall dropped NCCL's ports.
    reporter: Training on 2 nodes is stuck at the first all_reduce, each node alone works.
    cause: firewall
    fix: open_ports
  - id: container-bridge-only
    source: https://example.org/threads/18
    summary: The containers only saw their bridge interface; host networking fixed it.
    reporter: Inside docker containers the ranks never connect across machines.
    cause: container_net
    fix: host_network
"""


@pytest.fixture(scope="module")
def library_doctor(tmp_path_factory):
    folder = tmp_path_factory.mktemp("minikb_library")
    (folder / "mini.yaml").write_text(MINI_KB)
    (folder / "incidents.yaml").write_text(LIBRARY)
    return load_doctor(folder)


@pytest.mark.anyio
async def test_similar_incidents_show_with_their_link_and_open_on_enter(library_doctor):
    app = DoctorApp(library_doctor)
    async with app.run_test(size=(80, 24)) as pilot:
        await start(pilot, "training on 2 nodes is stuck, each node alone works")
        panel = app.screen.query_one("#similar")
        assert panel.display
        options = app.screen.query_one("#similar-list")
        assert options.option_count >= 1
        first = options.get_option_at_index(0)
        assert first.id == "two-nodes-ports-blocked"
        assert str(first.prompt).startswith("Training on two nodes") and "alike" in str(first.prompt)
        assert first.prompt.style == "link https://example.org/threads/17"

        await pilot.press("s")
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, ExplainScreen)
        shown = markdown_source(app.screen)
        assert "https://example.org/threads/17" in shown and "A firewall blocks NCCL's ports" in shown
        await pilot.press("escape")


@pytest.mark.anyio
async def test_the_panel_stays_hidden_without_similar_incidents(library_doctor):
    app = DoctorApp(library_doctor)
    async with app.run_test(size=(80, 24)) as pilot:
        await start(pilot, "hello")
        assert not app.screen.query_one("#similar").display
        await pilot.press("s")  # nothing to focus: no error
        await settle(pilot)


def test_snapshot_similar(snap_compare, library_doctor):
    async def to_question(pilot) -> None:
        await start(pilot, "training on 2 nodes is stuck, each node alone works")

    assert snap_compare(DoctorApp(library_doctor), terminal_size=(80, 24), run_before=to_question)
