"""The chunk scanner finds exactly what the engine's line-by-line scanner finds, on both prefilters."""
from __future__ import annotations

import random

import pytest

from _packaged import packaged_kb
from nccl_doctor.engine.matching import scan_lines
from nccl_doctor.ingest import read_file
from nccl_doctor.logs import LogProblem

BACKENDS = pytest.mark.parametrize("use_hyperscan", [True, False], ids=["hyperscan", "python-re"])


def example_lines() -> list[str]:
    lines = []
    for sig in packaged_kb().signatures.values():
        for example in sig.examples.fires + sig.examples.silent:
            lines.extend(example.log.splitlines())
    return lines


@BACKENDS
@pytest.mark.parametrize("chunk_bytes", [8 << 20, 4096], ids=["one-chunk", "many-chunks"])
def test_chunk_scan_matches_line_scan(doctor, tmp_path, use_hyperscan, chunk_bytes):
    rng = random.Random(7)
    noise = [f"node{r}:{r}:{r} [{r % 8}] NCCL INFO Channel {r:02d}/0 : {r}[{r}] -> {r + 1}[{r + 1}] via P2P/IPC" for r in range(50)]
    lines = example_lines() * 3 + noise * 20
    rng.shuffle(lines)
    path = tmp_path / "mixed.log"
    path.write_text("\n".join(lines) + "\n")
    expected = list(scan_lines(doctor.compiled, lines))
    got = read_file(str(path), doctor=doctor, use_hyperscan=use_hyperscan, chunk_bytes=chunk_bytes)
    assert got.lines == len(lines)
    first = {}
    for hit in expected:
        first.setdefault(hit.signature, hit)
    assert sorted((h.signature, h.line_no, h.captures) for h in got.hits) == sorted(
        (h.signature, h.line_no, h.captures) for h in first.values())
    assert got.counts == {sig: sum(1 for h in expected if h.signature == sig) for sig in first}


def test_chunk_boundaries_keep_line_numbers(doctor, tmp_path):
    line = "node1:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4"
    path = tmp_path / "small.log"
    path.write_text("\n".join(["filler line number %d" % i for i in range(40)] + [line] + ["tail"] * 5))
    got = read_file(str(path), doctor=doctor, chunk_bytes=64)
    assert got.lines == 46
    assert [(h.signature, h.line_no) for h in got.hits if h.signature == "nccl_version_line"] == [("nccl_version_line", 41)]


def test_binary_file_refused(doctor, tmp_path):
    path = tmp_path / "x.bin"
    path.write_bytes(b"\x00\x01\x02" * 1000)
    with pytest.raises(LogProblem, match="binary"):
        read_file(str(path), doctor=doctor)


@BACKENDS
def test_last_error_on_the_next_line_is_read_by_both_scanners(doctor, tmp_path, use_hyperscan):
    lines = [
        "[rank1]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
        "remote process exited or there was a network error, NCCL version 2.21.5",
        "[rank1]: ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
        "[rank1]: Last error:",
        "[rank1]: socketProgressOpt: Call to recv from 10.0.0.2<33759> failed : Connection reset by peer",
        "NCCL INFO comm 0x55 rank 1 nranks 16 cudaDev 1 busId 2000 - Init COMPLETE",
    ]
    path = tmp_path / "rank1.log"
    path.write_text("\n".join(lines) + "\n")
    in_memory = [h for h in scan_lines(doctor.compiled, lines) if h.signature == "nccl_last_error"]
    got = read_file(str(path), doctor=doctor, use_hyperscan=use_hyperscan)
    from_file = [h for h in got.hits if h.signature == "nccl_last_error"]
    for found in (in_memory, from_file):
        assert [(h.line_no, h.captures["text"]) for h in found] == [
            (4, "socketProgressOpt: Call to recv from 10.0.0.2<33759> failed : Connection reset by peer")]
    assert got.counts["nccl_last_error"] == 1
    session = doctor.session()
    session.add_log(lines)
    assert session.facts()["log_nccl_last_error"].value.startswith("socketProgressOpt")


@BACKENDS
def test_last_error_across_chunk_boundaries(doctor, tmp_path, use_hyperscan):
    """The line after a bare "Last error:" is read from the lines after a chunk, wherever it ends."""
    head = ["filler %d" % i for i in range(20)]
    lines = head + ["[rank1]: Last error:", "[rank1]: socketProgressOpt: Call to recv from 10.0.0.2<33759> failed"]
    path = tmp_path / "rank1.log"
    path.write_text("\n".join(lines) + "\n")
    for chunk_bytes in range(16, 400, 7):
        got = read_file(str(path), doctor=doctor, use_hyperscan=use_hyperscan, chunk_bytes=chunk_bytes)
        assert got.lines == 22
        assert [(h.signature, h.line_no) for h in got.hits if h.signature == "nccl_last_error"] == [
            ("nccl_last_error", 22)], chunk_bytes
