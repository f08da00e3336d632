"""The session report: Markdown with plan, evidence and answers; JSON; the same blocks on a terminal."""
from __future__ import annotations

import io
import json

from nccl_doctor.document import Code, Heading, plain_text, to_markdown
from nccl_doctor.contract import report_data
from nccl_doctor.report import save_report, session_blocks, session_json, session_markdown
from nccl_doctor.terminal import print_blocks

LOG = """\
gpu-node-07:1234:1234 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.2.3<0> [1]ib0:fe80::1c4e:2ff:fe3a:1b2c%ib0<0>
[rank1]:gpu-node-08:5555:5555 [1] NCCL WARN Connect to 10.1.2.4<29500> failed : Connection refused
"""


def _session(doctor):
    s = doctor.session()
    s.tell("Two nodes hang at init_process_group; MASTER_ADDR=gpu-node-07 10.1.2.3")
    s.add_log(LOG.splitlines(), name="rank1.log")
    question = s.next_question()
    if question is not None and question.type == "bool":
        s.answer(question.id, True)
    return s


def test_markdown_report_has_plan_evidence_answers_and_sources(doctor):
    s = _session(doctor)
    text = session_markdown(s)
    assert text.startswith("# nccl-doctor report")
    for part in ("## Fix plan", "## Diagnoses", "## What was reported", "## Facts", "rank1.log"):
        assert part in text
    if s.diagnoses():
        assert "**Evidence:**" in text
        assert "```" in text or not any(step.commands for step in s.plan().steps)
    if s.answers():
        assert "## Answers" in text


def test_markdown_report_redacted(doctor):
    text = session_markdown(_session(doctor), redact=True)
    for private in ("gpu-node-07", "gpu-node-08", "10.1.2.3", "10.1.2.4"):
        assert private not in text
    assert "were redacted" in text


def test_json_report(doctor, tmp_path):
    s = _session(doctor)
    data = json.loads(session_json(s))
    assert set(data) >= {"diagnoses", "questions", "plan", "facts"}
    redacted = session_json(s, redact=True)
    assert "10.1.2.4" not in redacted and json.loads(redacted)["redacted"] is True
    md = save_report(s, tmp_path / "out" / "r.md", redact=True)
    js = save_report(s, tmp_path / "r.json")
    assert md.read_text().startswith("# nccl-doctor report")
    assert json.loads(js.read_text())["plan"] == s.plan().to_dict()


def test_home_paths_in_fact_sources_and_hosts_in_extra_data_are_redacted(doctor):
    s = doctor.session()
    s.add_log(["titan:11:11 [0] NCCL INFO NCCL version 2.19.3+cuda12.1",
               "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLGATHER, "
               "Timeout(ms)=600000) ran for 600316 milliseconds"], name="/home/alice/logs/rank0.log")
    assert "/home/alice/logs/rank0.log" in json.dumps(report_data(s))  # the sources name the file
    hang = {"hosts": {"titan": [0, 1], "atlas": [2, 3]}, "missing_hosts": ["atlas"]}
    probes = [{"name": "host.env", "status": "ok", "findings": ["relevant variables: MASTER_ADDR=zeus"],
               "data": {"env": {"MASTER_ADDR": "zeus"}}}]
    text = json.dumps(report_data(s, hang=hang, probes=probes, redact=True))
    for private in ("alice", "titan", "atlas", "zeus"):
        assert private not in text, private
    assert "/home/<user>/logs/rank0.log" in text
    markdown = session_markdown(s, redact=True, hang_lines=["every rank on atlas (2, 3) is missing"], probes=probes)
    assert "alice" not in markdown and "atlas" not in markdown and "zeus" not in markdown


def test_terminal_and_markdown_draw_the_same_blocks(doctor):
    s = _session(doctor)
    blocks = session_blocks(s, brief=True)
    markdown = to_markdown(blocks)
    out = io.StringIO()
    print_blocks(blocks, file=out)
    text = out.getvalue()
    assert "\x1b[" not in text  # not a terminal: no colour
    for block in blocks:
        if isinstance(block, Heading):
            assert plain_text(block.text) in text and plain_text(block.text) in markdown
        if isinstance(block, Code):
            for line in block.lines:  # commands are whole lines, never wrapped or cut
                assert any(row.strip() == line.strip() for row in text.splitlines()), line
                assert line in markdown
