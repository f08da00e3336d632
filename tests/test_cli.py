"""The one-shot CLI as users and scripts call it: exit codes, one-line errors, the JSON contract."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

DIAGNOSE = [sys.executable, "-m", "nccl_doctor.cli"]


def run(*args: str, stdin: str | bytes | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    data = stdin.encode() if isinstance(stdin, str) else stdin
    return subprocess.run([*DIAGNOSE, *args], input=data, capture_output=True, timeout=60,
                          env={**os.environ, **(env or {})})


def as_json(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


def test_json_contract_shape():
    out = as_json(run("--symptom", "training hangs at init on 2 nodes", "--json", "--no-probes"))
    assert set(out) >= {"diagnoses", "questions", "facts", "plan"}
    for diagnosis in out["diagnoses"]:
        assert set(diagnosis) >= {"id", "title", "confidence", "explanation", "evidence", "fixes", "references"}
        assert 0 <= diagnosis["confidence"] <= 1
        for fix in diagnosis["fixes"]:
            assert set(fix) >= {"id", "title", "steps", "commands"}
    # causes rules support first, each group best first; word matches alone come last
    ranked = [(not d["supported"], -d["confidence"]) for d in out["diagnoses"]]
    assert ranked == sorted(ranked)
    assert out["recognised"] is True and out["lang"] == "en"
    for question in out["questions"]:
        assert {"id", "text"} <= set(question)
    assert out["facts"]["multi_node"]["value"] is True
    assert out["facts"]["phase"]["value"] == "init"


def test_empty_diagnosis_still_exits_zero():
    out = as_json(run("--symptom", "hello", "--json"))
    assert out["diagnoses"] == []


@pytest.mark.parametrize(
    "args, message",
    [
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--log", "/nonexistent/x.log"], "/nonexistent/x.log: no such file"),
        (["--fact", "multi_node"], "expected NAME=VALUE"),
        (["--fact", "no_such_fact=1"], "unknown fact 'no_such_fact'"),
        (["--fact", "multi_node=perhaps"], "expected yes/no"),
        (["--probe", "--no-probes"], "contradict"),
        (["--probe", "nosuchprobe"], "unknown probe 'nosuchprobe'"),
        (["--probe-deadline", "nan", "--probe", "host.env"], "above 0 and at most 3600"),
        (["--probe-deadline", "inf", "--probe", "host.env"], "above 0 and at most 3600"),
        (["--probe-deadline", "-1", "--probe", "host.env"], "above 0 and at most 3600"),
        (["--probe-deadline", "0", "--probe", "host.env"], "above 0 and at most 3600"),
        (["--probe-deadline", "soon", "--probe", "host.env"], "above 0 and at most 3600"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(args, message):
    done = run(*args)
    assert done.returncode == 2
    err = done.stderr.decode().strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_fact_flag_reaches_the_session():
    out = as_json(run("--fact", "multi_node=yes", "--fact", "nccl_version=2.18.3", "--json"))
    assert out["facts"]["multi_node"] == {"value": True, "source": {"kind": "cli", "detail": ""}, "certainty": 1.0}
    assert out["facts"]["nccl_version"]["value"] == "2.18.3"


def test_log_from_stdin_with_crlf_ansi_prefixes_and_bad_bytes(tmp_path):
    log = (b"\x1b[31m[rank3]:[E123 12:00:00.000] [Rank 3] Watchdog caught collective operation timeout: "
           b"WorkNCCL(SeqNum=7, OpType=ALLGATHER, Timeout(ms)=600000) ran for 600316 milliseconds\x1b[0m\r\n"
           b"garbage \xff\xfe bytes\r\n"
           b"node1:12:12 [0] NCCL INFO NCCL version 2.19.3+cuda12.1\r\n")
    out = as_json(run("--log", "-", "--json", stdin=log))
    assert out["facts"]["collective_op"]["value"] == "ALLGATHER"
    assert out["facts"]["collective_op"]["source"]["detail"] == "stdin:1"
    assert out["facts"]["nccl_version"]["value"] == "2.19.3"
    assert out["facts"]["timeout_minutes"]["value"] == 10


def test_log_directory_and_glob(tmp_path):
    (tmp_path / "rank0.log").write_text("NCCL INFO NCCL version 2.21.5+cuda12.4\n")
    (tmp_path / "rank1.log").write_text("nothing here\n")
    for spec in (str(tmp_path), str(tmp_path / "rank*.log")):
        out = as_json(run("--log", spec, "--json"))
        assert out["facts"]["nccl_version"]["value"] == "2.21.5"
        assert len(out["logs"]) == 2


def test_binary_log_is_refused_clearly(tmp_path):
    binary = tmp_path / "core.dump"
    binary.write_bytes(bytes(range(256)) * 64)
    done = run("--log", str(binary), "--json")
    assert done.returncode == 2
    assert "looks like a binary file" in done.stderr.decode()


def test_huge_line_is_cut_not_loaded(tmp_path):
    big = tmp_path / "big.log"
    with open(big, "wb") as handle:
        handle.write(b"x" * (8 << 20))
        handle.write(b"\nnode1:1:1 [0] NCCL INFO NCCL version 2.20.5+cuda12.2\n")
    out = as_json(run("--log", str(big), "--json"))
    assert out["facts"]["nccl_version"]["value"] == "2.20.5"


def test_plain_output_is_readable():
    done = run("--symptom", "training hangs at init on 2 nodes", "--no-input")
    assert done.returncode == 0
    text = done.stdout.decode()
    assert "Fix plan" in text or "No cause raised" in text


def test_no_arguments_without_terminal_prints_usage():
    done = run()
    assert done.returncode == 2 and b"diagnose --symptom" in done.stderr


# A KB small enough that `kb lint` runs in a moment: the packaged KB's lint and its examples are
# tests/test_kb_lint.py's and tests/test_kb_examples.py's (in process, each example once).
CLEAN_KB = """
facts:
  - {id: seen, type: bool, question: Seen?, zh: {question: 看到了吗？}}
rules:
  - id: r
    description: Seen means c.
    when: {fact: seen}
    then: {evidence: [{cause: c, strength: 0.5}]}
    examples: {fires: [{facts: {seen: true}}], silent: [{facts: {seen: false}}]}
causes:
  - {id: c, title: C, zh: {title: 丙}, area: network, explanation: x, fixes: [f], references: ['https://example.org']}
fixes:
  - {id: f, title: F, steps: [s]}
"""


def test_kb_subcommands(tmp_path):
    (tmp_path / "kb.yaml").write_text(CLEAN_KB)
    clean = run("kb", "lint", "--kb", str(tmp_path))
    assert clean.returncode == 0, clean.stderr.decode() + clean.stdout.decode()
    (tmp_path / "kb.yaml").write_text(CLEAN_KB.replace("silent: [{facts: {seen: false}}]", "silent: [{facts: {seen: true}}]"))
    failing = run("kb", "lint", "--kb", str(tmp_path))  # the CLI's lint runs the examples too
    assert failing.returncode == 1
    assert "kb.yaml:5 [r]: example: rule r fired on silent example 0" in failing.stdout.decode() + failing.stderr.decode()
    stats = json.loads(run("kb", "stats", "--json").stdout)
    assert stats["causes"] >= 1 and stats["signatures"] >= 1
    assert run("kb", "schema", "--check").returncode == 0
    assert run("kb", "frobnicate").returncode == 2


def test_per_rank_logs_name_the_rank_everyone_waits_for(tmp_path):
    for rank in (0, 1, 3):
        (tmp_path / f"rank{rank}.log").write_text(
            f"[rank{rank}]:[E1121 10:00:00.000000 ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) "
            "ran for 600012 milliseconds before timing out.\n")
    (tmp_path / "rank2.log").write_text(
        "node1:100:100 [2] NCCL INFO comm 0x55 rank 2 nranks 4 cudaDev 2 busId 3000 commId 0xabc - Init COMPLETE\n"
        "[rank2]: epoch 3 step 100 loss 0.5\n")
    out = as_json(run("--log", str(tmp_path), "--json"))
    hang = out["hang"]
    assert {"group", "op", "seq", "waiting_ranks", "missing_ranks", "first_failure"} <= set(hang)
    assert hang["op"] == "ALLREDUCE" and hang["seq"] == 7
    assert hang["waiting_ranks"] == [0, 1, 3] and hang["missing_ranks"] == [2]
    assert out["facts"]["hang_one_rank_behind"]["value"] is True


def test_readme_first_command_gives_ranked_causes_and_a_plan():
    out = as_json(run("--symptom", "hang at init", "--json", "--no-probes"))
    assert len(out["diagnoses"]) >= 3
    assert out["plan"]["steps"] and out["plan"]["steps"][0]["steps"]
    assert out["questions"], "with so little known the engine should have questions to ask"


@pytest.mark.parametrize("content, message", [
    ('{"facts": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
    ('{"facts": {"a": ' + '{"value": ' * 5_000 + "1" + "}" * 5_000 + "}}", "nested too deeply"),
    ('{"facts": {"multi_node": true}, "findings": 5}', "findings must be a list of sentences"),
    ('{"results": [{"name": "host.shm", "findings": 5}]}', "results[0].findings must be a list"),
    ('{"results": [{"name": "host.shm", "seconds": [1]}]}', "results[0].seconds must be a number"),
    ('{"results": [{"name": "host.shm", "detail": {}}]}', "results[0].detail must be a string"),
    ('{"results": [{"name": 7}]}', 'must be an object with a "name"'),
    ('{"facts": {"probe_shm_size_mb": 1e999}}', "must be a finite number"),
    ('{"facts": {}, "status": []}', '"status" must be a string'),
    ("\xff\xfe not text", "not UTF-8"),
], ids=["deep-list", "deep-object", "findings-5", "result-findings-5", "seconds-list", "detail-object",
        "name-number", "infinite", "status-list", "not-utf8"])
def test_bad_probe_report_is_one_line_and_exit_2(tmp_path, content, message):
    report = tmp_path / "report.json"
    report.write_bytes(content.encode("latin-1") if content.startswith("\xff") else content.encode())
    done = run("--facts", str(report), "--json")
    err = done.stderr.decode().strip().splitlines()
    assert done.returncode == 2 and len(err) == 1 and message in err[0], err


def test_probe_report_that_is_a_fifo_or_a_folder_is_refused_at_once(tmp_path):
    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)  # nobody writes: reading it would wait forever
    for path, message in ((fifo, "not a regular file"), (tmp_path, "not a regular file")):
        done = run("--facts", str(path), "--json")
        err = done.stderr.decode().strip().splitlines()
        assert done.returncode == 2 and len(err) == 1 and message in err[0], err


def test_broken_kb_hint_names_the_folder_to_lint(tmp_path):
    (tmp_path / "broken.yaml").write_text("causes: [unclosed\n")
    done = run("--kb", str(tmp_path), "--symptom", "hang")
    err = done.stderr.decode().strip().splitlines()
    assert done.returncode == 2 and len(err) == 1, err
    assert f"diagnose kb lint --kb {tmp_path}" in err[0]
    lint = run("kb", "lint", "--kb", str(tmp_path))
    assert lint.returncode != 0  # the command the hint names does find the problem


def test_markdown_report_is_redacted_by_default():
    said = "training hangs at init; master on gpu-node-07 (10.1.2.3)"
    done = run("--symptom", said, "--markdown")
    assert done.returncode == 0, done.stderr.decode()
    text = done.stdout.decode()
    assert text.startswith("# nccl-doctor report") and "## Fix plan" in text
    assert "gpu-node-07" not in text and "10.1.2.3" not in text and "were redacted" in text
    plain = run("--symptom", said, "--markdown", "--no-redact").stdout.decode()
    assert "gpu-node-07" in plain and "10.1.2.3" in plain


def _two_host_logs(tmp_path):
    for rank, host in ((0, "titan"), (1, "titan"), (3, "atlas")):
        (tmp_path / f"rank{rank}.log").write_text(
            f"{host}:10{rank}:10{rank} [{rank}] NCCL INFO comm 0x55 rank {rank} nranks 4 cudaDev {rank} busId 3000 "
            "commId 0xabc - Init COMPLETE\n"
            f"[rank{rank}]:[E1121 10:00:00.000000 ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) "
            "ran for 600012 milliseconds before timing out.\n")
    (tmp_path / "rank2.log").write_text(
        "atlas:102:102 [2] NCCL INFO comm 0x55 rank 2 nranks 4 cudaDev 2 busId 3000 commId 0xabc - Init COMPLETE\n"
        "[rank2]: epoch 3 step 100 loss 0.5\n")


def test_json_redact_hides_the_hang_host_list(tmp_path):
    _two_host_logs(tmp_path)
    plain = as_json(run("--log", str(tmp_path), "--json"))
    assert set(plain["hang"]["hosts"]) == {"titan", "atlas"} and "redacted" not in plain
    done = run("--log", str(tmp_path), "--json", "--redact")
    text = done.stdout.decode()
    assert "titan" not in text and "atlas" not in text, text
    hidden = json.loads(text)
    assert hidden["redacted"] is True and len(hidden["hang"]["hosts"]) == 2
    assert hidden["hang"]["waiting_ranks"] == [0, 1, 3]  # only names are hidden


def test_text_output_and_markdown_share_what_they_show(tmp_path):
    _two_host_logs(tmp_path)
    args = ("--log", str(tmp_path), "--symptom", "all_reduce times out on 2 nodes")
    text = run(*args, "--no-input").stdout.decode()
    markdown = run(*args, "--markdown", "--no-redact").stdout.decode()
    assert "\x1b[" not in text
    for section in ("Hang analysis", "Diagnoses", "Fix plan"):
        assert section in text and f"## {section}" in markdown
    first_step = next(line for line in markdown.splitlines() if line.startswith("### 1. "))
    assert first_step[4:] in text  # the same first cause, drawn from the same blocks
    redacted = run(*args, "--no-input", "--redact").stdout.decode()
    assert "atlas" in text and "atlas" not in redacted
