"""Forensics on NCCL-backend log formats (no GPU here): lines written with the exact format
strings of ProcessGroupNCCL (watchdog, PG status, dump signal), NCCL (Init COMPLETE, opCount, RAS)
and the kernel (Xid), one file per rank or one interleaved file."""
from __future__ import annotations

from nccl_doctor.forensics import analyze_paths
from nccl_doctor.ingest import read_file

WD = ("[rank{r}]:[E1109 16:{m}:20.222288244 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation "
      "timeout: WorkNCCL(SeqNum={s}, OpType={op}, NumelIn={n}, NumelOut={n}, Timeout(ms)=600000) ran for 600038 "
      "milliseconds before timing out.\n"
      "[rank{r}]:[E1109 16:{m}:20.222705810 ProcessGroupNCCL.cpp:1785] [PG ID 1 PG GUID 1 Rank {r}] Exception (either an "
      "error or timeout) detected by watchdog at work: {s}, last enqueued NCCL work: {e}, last completed NCCL work: {c}.\n")
DUMP = ("[rank{r}]:[E1109 16:{m}:21.1 ProcessGroupNCCL.cpp:1987] [PG ID 1 PG GUID 1 Rank {r}] Received a dump signal due "
        "to a collective timeout from  rank 0 and we will try our best to dump the debug info. Last enqueued NCCL work: "
        "{e}, last completed NCCL work: {c}.This is most likely caused by incorrect usages of collectives\n")
NOISE = "[rank{r}]:2024-11-09 15:00:00,000 INFO step {i} loss 2.31 lr 3e-4\n"


def _write(path, text):
    path.write_text(text)
    return str(path)


def _job(tmp_path, behind_rank, world=4, m="13"):
    files = []
    for r in range(world):
        body = "".join(NOISE.format(r=r, i=i) for i in range(50))
        if r == behind_rank:
            body += DUMP.format(r=r, m=m, e=500044, c=500044)
        else:
            body += WD.format(r=r, m=m, s=500045, op="_REDUCE_SCATTER_BASE", n=67108864, e=500047, c=500044)
        files.append(_write(tmp_path / f"rank{r}.log", body))
    return files


def test_watchdog_lines_name_the_rank_behind(tmp_path):
    rep = analyze_paths(_job(tmp_path, behind_rank=2))
    d = rep.to_dict()
    assert d["seq"] == 500045 and d["op"] == "_REDUCE_SCATTER_BASE" and d["group"] == "1"
    assert d["waiting_ranks"] == [0, 1, 3] and d["missing_ranks"] == [2]
    facts = rep.facts()
    assert facts["hang_one_rank_behind"][0] is True and facts["hang_rank0_behind"][0] is False
    assert facts["hang_culprit_rank"] == (2, "rank0.log:51") or facts["hang_culprit_rank"][0] == 2


def test_rank0_behind(tmp_path):
    facts = analyze_paths(_job(tmp_path, behind_rank=0)).facts()
    assert facts["hang_rank0_behind"][0] is True and facts["hang_culprit_rank"][0] == 0


def test_all_ranks_stuck_together(tmp_path):
    files = []
    for r in range(4):
        files.append(_write(tmp_path / f"rank{r}.log",
                            WD.format(r=r, m="13", s=31, op="ALLREDUCE", n=117440512, e=31, c=30)))
    rep = analyze_paths(files)
    facts = rep.facts()
    assert facts["hang_all_ranks_same_seq"][0] is True
    assert "hang_one_rank_behind" not in facts and rep.to_dict()["missing_ranks"] == []


# a watchdog line as a worker of a serving framework prints it: no [rankN] prefix and no PG name
BARE_WD = ("(Worker pid={pid}) [E ProcessGroupNCCL.cpp:475] [Rank {r}] Watchdog caught collective operation timeout: "
           "WorkNCCL(SeqNum={s}, OpType={op}, NumelIn={n}, NumelOut={n}, Timeout(ms)=1800000) ran for 1800250 "
           "milliseconds before timing out.\n")


def test_watchdog_lines_of_two_runs_name_no_rank_behind(tmp_path):
    # one line from each of two runs pasted together (other versions, other ops): 300,000 collectives
    # apart, they cannot be one group's sequence - rank 4 is not "behind", nobody "never joined"
    log = _write(tmp_path / "pasted.log", BARE_WD.format(pid=5085, r=4, s=20518, op="ALLREDUCE", n=106496)
                 + BARE_WD.format(pid=4775, r=1, s=329526, op="GATHER", n=4000))
    rep = analyze_paths([log])
    d, facts = rep.to_dict(), rep.facts()
    assert facts["hang_evidence_found"][0] is True
    assert d["culprit"] is None and d["missing_ranks"] == []
    assert not {"hang_one_rank_behind", "hang_culprit_reason", "hang_culprit_rank"} & set(facts)
    assert any("too far apart" in n for n in d["notes"])


def test_a_restarted_rank_is_not_called_behind(tmp_path):
    # ranks 0-2 time out at #9001; rank 3's only watchdog line is from a restarted run (#12)
    files = [_write(tmp_path / f"rank{r}.log", WD.format(r=r, m="13", s=9001, op="ALLREDUCE", n=64, e=9001, c=9000))
             for r in range(3)]
    files.append(_write(tmp_path / "rank3.log", WD.format(r=3, m="14", s=12, op="ALLREDUCE", n=64, e=12, c=11)))
    rep = analyze_paths(files)
    d = rep.to_dict()
    assert d["seq"] == 9001 and d["waiting_ranks"] == [0, 1, 2]
    assert d["missing_ranks"] == [] and d["culprit"] is None
    assert "hang_one_rank_behind" not in rep.facts()
    assert any("rank(s) 3 stand more than" in n for n in d["notes"])


def test_a_rank_whose_last_work_is_far_below_is_not_behind(tmp_path):
    # rank 2's status line says its latest work is #40 while the others wait in #500045: its peers could
    # not have finished the collectives in between without it, so the two are not one run
    files = _job(tmp_path, behind_rank=None)
    files[2] = _write(tmp_path / "rank2.log", DUMP.format(r=2, m="13", e=40, c=40))
    d = analyze_paths(files).to_dict()
    assert d["seq"] == 500045 and 2 not in d["missing_ranks"] and d["culprit"] is None


def test_oom_before_everyone_times_out(tmp_path):
    files = _job(tmp_path, behind_rank=None, m="13")
    with open(files[3], "a") as f:  # rank 3 died ten minutes before the others' watchdogs fired
        f.write("[rank3]:2024-11-09 16:03:01,600 ERROR torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                "2.00 GiB. GPU 3 has a total capacity of 79.10 GiB of which 1.2 GiB is free.\n")
    rep = analyze_paths(files)
    d = rep.to_dict()
    assert d["first_failure"]["rank"] == 3 and d["first_failure"]["kind"] == "oom"
    assert d["first_failure"]["before_timeouts"] is True
    assert rep.facts()["hang_first_failure_kind"][0] == "oom"


def test_interleaved_nccl_file_with_hosts_and_opcount(tmp_path):
    lines = []
    hosts = {0: ("gpu-a-1", 1100), 1: ("gpu-a-1", 1101), 2: ("gpu-b-7", 2200), 3: ("gpu-b-7", 2201)}
    for r, (h, pid) in hosts.items():
        lines.append(f"{h}:{pid}:{pid + 5} [{r % 2}] NCCL INFO comm 0x55d{r} rank {r} nranks 4 cudaDev {r % 2} "
                     f"nvmlDev {r % 2} busId {r}000 commId 0xabc123 - Init COMPLETE")
    for op in range(40):
        for r, (h, pid) in hosts.items():
            if r == 3 and op >= 37:
                continue  # rank 3 stops issuing collectives
            lines.append(f"{h}:{pid}:{pid + 5} [{r % 2}] NCCL INFO AllReduce: opCount {op:x} sendbuff 0x7f00 "
                         f"recvbuff 0x7f00 count 1024 datatype 7 op 0 root 0 comm 0x55d{r} [nranks=4] stream 0x1")
    quiet = _write(tmp_path / "quiet.log", "\n".join(lines) + "\n")
    # positions alone are no hang: a log cut at any moment has ranks a collective apart
    assert analyze_paths([quiet]).to_dict() is None and analyze_paths([quiet]).facts() == {}
    for r in range(3):  # the three ranks that went on time out in the collective rank 3 never joined
        lines.append(WD.format(r=r, m="13", s=38, op="ALLREDUCE", n=1024, e=40, c=37).split("\n")[0])
    d = analyze_paths([_write(tmp_path / "job.log", "\n".join(lines) + "\n")]).to_dict()
    assert d["missing_ranks"] == [3] and d["culprit"]["hosts"] == ["gpu-b-7"]
    assert d["seq"] == 39 and d["op"] == "AllReduce"


def test_ras_report_and_xid(tmp_path):
    ras = ("Communicators\n#0-0 (7f2a3e0c1d5b4a69) MISMATCH\n"
           "  7 ranks have launched up to operation 6650\n"
           "  Rank 5 has launched up to operation 6649 -- GPU 5 managed by process 4521 on node gpu-c-3\n")
    xid = "[Sat Nov  9 16:01:02 2024] NVRM: Xid (PCI:0000:b7:00): 79, pid=4521, name=python, GPU has fallen off the bus.\n"
    d = analyze_paths([_write(tmp_path / "ras.txt", ras), _write(tmp_path / "rank5.log", xid)]).to_dict()
    assert 5 in d["missing_ranks"] and d["first_failure"]["kind"] == "xid" and d["culprit"]["ranks"] == [5]


def test_chunk_boundaries_do_not_change_results(tmp_path):
    files = _job(tmp_path, behind_rank=1)
    big = tmp_path / "big.log"
    with open(big, "w") as f:
        for p in files:
            f.write(open(p).read())
    a = read_file(str(big)).scan
    b = read_file(str(big), chunk_bytes=97).scan
    key = lambda sc: sorted((s.rank, s.pgs["1"].enqueued, s.pgs["1"].stuck_seq, s.pgs["1"].loc) for s in sc.streams)
    assert key(a) == key(b) and a.lines == b.lines


def test_no_hang_evidence_gives_none(tmp_path):
    rep = analyze_paths([_write(tmp_path / "train.log", "epoch 1 loss 0.3\nepoch 2 loss 0.2\n")])
    assert rep.to_dict() is None and rep.facts() == {} and rep.summary_lines() == []
