"""The session report: Markdown with plan, evidence and answers; JSON; redaction."""
from __future__ import annotations

import json

import pytest

from nccl_doctor.report import Redactor, redact, save_report, session_json, session_markdown

LOG = """\
gpu-node-07:1234:1234 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.2.3<0> [1]ib0:fe80::1c4e:2ff:fe3a:1b2c%ib0<0>
[rank1]:gpu-node-08:5555:5555 [1] NCCL WARN Connect to 10.1.2.4<29500> failed : Connection refused
"""


@pytest.mark.parametrize("text, gone, kept", [
    (LOG, ["gpu-node-07", "gpu-node-08", "10.1.2.3", "10.1.2.4", "fe80::1c4e"], ["eth0", "ib0", "NCCL WARN", "<29500>"]),
    ("MASTER_ADDR=head-01 torchrun --master_addr head-01 --master_port 29500", ["head-01"], ["MASTER_ADDR=", "29500"]),
    ("HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyzABCDEFGH and WANDB_API_KEY=0123456789abcdef0123",
     ["hf_abc", "0123456789abcdef0123"], ["HF_TOKEN=<secret>", "WANDB_API_KEY=<secret>"]),
    ("Authorization: Bearer abcdefgh12345678; key AKIAABCDEFGHIJKLMNOP; https://bob:pw@git.example.com/x",
     ["abcdefgh12345678", "AKIAABCDEFGHIJKLMNOP", "bob:pw"], ["Authorization:", "https://"]),
    ("ip-172-31-5-10.ec2.internal and node01.example.com, 2001:db8::5 and 192.168.0.10/24",
     ["172-31-5-10", "node01.example", "2001:db8::5", "192.168.0.10"], ["/24"]),
    ("it hangs between gpu-node-07 and worker-3, and node01 is slow", ["gpu-node-07", "worker-3", "node01"], ["hangs"]),
])
def test_redact_removes_hosts_addresses_and_secrets(text, gone, kept):
    out = redact(text)
    for item in gone:
        assert item not in out, out
    for item in kept:
        assert item in out, out


@pytest.mark.parametrize("text", [
    "NCCL version 2.18.3+cuda12.1",
    "at 12:34:56.789 in c10d::ProcessGroupNCCL std::runtime_error",
    "see https://pytorch.org/docs and torch.distributed.elastic, train.py line 12",
    "TOKENIZERS_PARALLELISM=false NCCL_SOCKET_IFNAME=eth0 127.0.0.1 ::1",
    "00:1a:2b:3c:4d:5e",
    "rank1 on gpu0 with mlx5_0 and Llama-3 on A100 nodes",
])
def test_redact_keeps_what_is_not_private(text):
    assert redact(text) == text


def test_placeholders_are_stable_across_strings():
    r = Redactor()
    r.learn_hosts(LOG)
    first = r("10.1.2.3 gpu-node-07")
    assert first == "<ip-1> <host-1>"
    assert r("gpu-node-07 then 10.1.2.3") == "<host-1> then <ip-1>"
    assert r("10.1.2.3") != r("10.1.2.4")


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
