"""Benchmark: hang forensics over many large per-rank logs (issue 4: 512 x 20 MB in under a minute).

Writes N per-rank logs of S MB each into a temp dir: NCCL INFO lines with host:pid prefixes
(init, channels and one opCount line per collective, as NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL
prints), training progress lines, and at the end each rank's watchdog / dump-signal lines, with one
rank behind. Then times ``analyze_paths`` on all files, and in the same run the baselines
``wc -l`` and ``grep -c -F`` (the forensics' needles) over the same files, both run two-way
parallel like the forensics. Prints seconds, GB/s, peak memory and the ratios. Checks that the
culprit is found.

    python benchmarks/bench_hang_logs.py                 # 512 files x 20 MB (needs ~10 GB of disk)
    python benchmarks/bench_hang_logs.py --files 8 --mb 1   # CI-sized
    NCCL_DOCTOR_NO_HYPERSCAN=1 python benchmarks/bench_hang_logs.py   # the pure-Python prefilter
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

from nccl_doctor.forensics import analyze_paths
from nccl_doctor.forensics.handlers import HANDLERS, PROGRESS
from nccl_doctor.ingest import ReadingPlan

NEEDLES = tuple(dict.fromkeys(h.needle.encode() for h in HANDLERS)) + PROGRESS


def prefilter_backend() -> str:
    return ReadingPlan([]).prefilter.backend


def _block(rank: int, world: int, host: str, pid: int, size: int) -> bytes:
    """About `size` bytes of ordinary log for one rank (repeated to fill the file)."""
    out, n, op = [], 0, 0
    while n < size:
        op += 1
        for line in (
            f"[rank{rank}]:2024-11-09 15:{op % 60:02d}:{op % 60:02d},123 INFO train.py:211 step {op} loss 2.{op % 97:02d} "
            f"lr 3.0e-04 grad_norm 1.{op % 89:02d} tokens/s 181234\n",
            f"{host}:{pid}:{pid + 7} [{rank % 8}] NCCL INFO AllReduce: opCount {op:x} sendbuff 0x7f3a2c000000 recvbuff "
            f"0x7f3a2c000000 count 16777216 datatype 7 op 0 root 0 comm 0x55d0c3a1b2c0 [nranks={world}] stream 0x55d0c3a1f000\n",
            f"{host}:{pid}:{pid + 7} [{rank % 8}] NCCL INFO Channel {op % 32:02d}/0 : {rank}[{rank % 8}] -> "
            f"{(rank + 1) % world}[{(rank + 1) % 8}] [send] via NET/IB/0/GDRDMA\n",
            f"[rank{rank}]:2024-11-09 15:{op % 60:02d}:{op % 60:02d},456 INFO dataloader.py:88 fetched batch {op} in 0.031s\n",
        ):
            out.append(line)
            n += len(line)
    return "".join(out).encode()


def _tail(rank: int, world: int, host: str, pid: int, behind: int) -> bytes:
    head = (f"{host}:{pid}:{pid + 7} [{rank % 8}] NCCL INFO comm 0x55d0c3a1b2c0 rank {rank} nranks {world} cudaDev "
            f"{rank % 8} nvmlDev {rank % 8} busId {rank % 8}8000 commId 0x5f1d2a9b7c3e4d10 - Init COMPLETE\n")
    if rank == behind:
        body = (f"[rank{rank}]:[E1109 16:13:21.1 ProcessGroupNCCL.cpp:1987] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] "
                f"Received a dump signal due to a collective timeout from  rank 0 and we will try our best to dump the "
                f"debug info. Last enqueued NCCL work: 7152, last completed NCCL work: 7152.\n")
    else:
        body = (f"[rank{rank}]:[E1109 16:13:20.2 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective "
                f"operation timeout: WorkNCCL(SeqNum=7153, OpType=ALLGATHER, NumelIn=65536, NumelOut={65536 * world}, "
                f"Timeout(ms)=600000) ran for 600316 milliseconds before timing out.\n"
                f"[rank{rank}]:[E1109 16:13:20.3 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] "
                f"Exception (either an error or timeout) detected by watchdog at work: 7153, last enqueued NCCL work: "
                f"7153, last completed NCCL work: 7152.\n")
    return head.encode() + body.encode()


def generate(d: str, files: int, mb: float, behind: int) -> list[str]:
    size = int(mb * (1 << 20))
    blk = max(4096, min(size // 2, 1 << 20))
    paths = []
    for r in range(files):
        host, pid = f"gpu-node-{r // 8:03d}", 40000 + r
        block = _block(r, files, host, pid, blk)
        tail = _tail(r, files, host, pid, behind)
        p = os.path.join(d, f"{host}.rank{r}.log")
        with open(p, "wb") as f:
            written = 0
            while written + len(block) + len(tail) <= size:
                f.write(block)
                written += len(block)
            f.write(tail)
        paths.append(p)
    return paths


def _timed(cmd: str) -> float:
    # output goes to a pipe, not /dev/null: GNU grep stops at the first match when it sees /dev/null
    t = time.perf_counter()
    subprocess.run(cmd, shell=True, check=False, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=512)
    ap.add_argument("--mb", type=float, default=20.0, help="size of each per-rank log in MB")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--dir", default=None, help="where to write the logs (default: a temp dir, removed after)")
    args = ap.parse_args()
    d = args.dir or tempfile.mkdtemp(prefix="bench_hang_")
    os.makedirs(d, exist_ok=True)
    behind = args.files // 3
    try:
        t = time.perf_counter()
        paths = generate(d, args.files, args.mb, behind)
        total = sum(os.path.getsize(p) for p in paths)
        print(f"generated {len(paths)} logs, {total / 1e9:.2f} GB in {time.perf_counter() - t:.1f} s")
        # warm the page cache the same way for everyone
        _timed(f"cat {d}/*.log > /dev/null")
        needles = os.path.join(d, "needles.txt")
        with open(needles, "wb") as f:
            f.write(b"\n".join(NEEDLES) + b"\n")
        t_wc = _timed(f"ls {d}/*.log | xargs -P 2 -n 16 wc -l")
        t_grep = _timed(f"ls {d}/*.log | xargs -P 2 -n 16 grep -c -F -f {needles}")
        t = time.perf_counter()
        rep = analyze_paths(paths, jobs=args.jobs)
        t_fx = time.perf_counter() - t
        hang = rep.to_dict() or {}
        ok = (hang.get("culprit") or {}).get("ranks") == [behind]
        peak_self = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        peak_kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"forensics ({prefilter_backend()}, jobs={args.jobs or os.cpu_count()}): {len(paths)} files")
        print(f"forensics : {t_fx:6.2f} s  {total / t_fx / 1e9:.2f} GB/s  culprit rank {behind} found: {ok}")
        print(f"wc -l     : {t_wc:6.2f} s  (ratio forensics / wc -l = {t_fx / t_wc:.2f})")
        print(f"grep -c -F: {t_grep:6.2f} s  (ratio forensics / grep = {t_fx / t_grep:.2f})")
        print(f"peak RSS  : main {peak_self:.0f} MB, largest worker/child {peak_kids:.0f} MB")
        return 0 if ok else 1
    finally:
        if not args.dir:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
