"""Benchmark: ``diagnose --log`` on the logs of a failed job, against grep on the same bytes.

Generates, in this run, the logs issue 13 describes and times the whole one-shot
(``diagnose --log ... --json --no-input``: KB load, signature scan, hang forensics, diagnosis)
against a grep baseline over the same files, measured in the same run, each in its own process
with its peak RSS (the largest of the process and its children, from ``RUSAGE_CHILDREN`` in a
fresh helper process):

realistic  one interleaved NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL log: 32 ranks in lockstep with
           ``[rankN]:`` prefixes, an ``AllReduce: opCount`` line per rank per collective, one rank
           one collective behind, watchdog timeouts at the end. Baseline: ``grep -cE`` with 30
           common failure patterns. The culprit rank must be named.
healthy    the same job without the hang (cut mid-collective, no error): no hang, no cause > 0.3.
garbled    opCounts that go backwards, eight jobs concatenated, communicator pointers that never
           repeat, no error at all: no hang, no cause > 0.3.
piped      the realistic log through a pipe (``cat LOG | diagnose --log -``) against the same
           file read directly.
per-rank   N per-rank logs of S MB (default 512 x 20 MB) in one directory. Baseline:
           ``grep -c -F`` with the failure needles, two-way parallel like the ingest.

    python benchmarks/bench_ingest.py                        # all cases, 1 GB logs, 512 x 20 MB
    python benchmarks/bench_ingest.py --size-mb 64 --files 16 --file-mb 4   # quick
    python benchmarks/bench_ingest.py --only realistic piped --repeat 3
    python benchmarks/bench_ingest.py --dir /tmp/logs --keep          # keep the logs; --reuse them later
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

DIAGNOSE = [sys.executable, "-m", "nccl_doctor.cli"]

# 30 failure patterns an engineer greps a failed job's logs for (POSIX ERE).
FAILURE_PATTERNS = [
    r"Watchdog caught collective operation timeout",
    r"NCCL WARN",
    r"NCCL error",
    r"ncclInternalError|ncclSystemError|ncclUnhandledCudaError|ncclInvalidUsage|ncclRemoteError",
    r"unhandled (system|cuda) error",
    r"CUDA out of memory|OutOfMemoryError",
    r"Connection (reset|closed) by (remote )?peer",
    r"Connection refused",
    r"No route to host",
    r"[Tt]imed out",
    r"Traceback \(most recent call last\)",
    r"RuntimeError: ",
    r"DistBackendError",
    r"DistNetworkError|DistStoreError",
    r"NVRM: Xid",
    r"[Ss]egmentation fault",
    r"SIGKILL|SIGSEGV|SIGABRT|SIGBUS",
    r"exitcode *: *-?[0-9]+",
    r"ChildFailedError",
    r"illegal memory access",
    r"uncorrectable ECC",
    r"failed to pass monitoredBarrier",
    r"Detected mismatch between collectives",
    r"Got completion .* with (error|status)",
    r"socketProgress",
    r"Bus error",
    r"Killed process|oom-kill",
    r"last enqueued (NCCL )?work",
    r"Exception raised from",
    r"terminate called after throwing",
]
# Literal needles for grep -F over per-rank logs (what the forensics reads).
FAILURE_NEEDLES = [
    "Watchdog caught", "nqueued", "monitoredBarrier", " COMPLETE", "xitcode", "Xid", "of memory",
    "Error: ", "NCCL WARN", " launched ", "managing GPU", "Detected mismatch", "opCount ",
]


# ------------------------------------------------------------------------------------- logs
def _host(rank: int) -> str:
    return f"gpu-node-{rank // 8:02d}"


def _coll(rank: int, comm: str, nranks: int, pid: int) -> tuple[bytes, bytes]:
    """The two halves of one rank's opCount line around the opCount itself."""
    head = f"[rank{rank}]:{_host(rank)}:{pid}:{pid + 91} [{rank % 8}] NCCL INFO AllReduce: opCount ".encode()
    tail = (f" sendbuff 0x7f3a2c{rank:02x}0000 recvbuff 0x7f3a2c{rank:02x}0000 count 262144 datatype 7 op 0 "
            f"root 0 comm {comm} [nranks={nranks}] stream 0x55d0c3a1f{rank:03x}\n").encode()
    return head, tail


def _init_lines(rank: int, nranks: int, pid: int, comm: str, comm_id: str) -> str:
    h, d = _host(rank), rank % 8
    p = f"[rank{rank}]:{h}:{pid}:{pid + 91} [{d}]"
    return (f"[rank{rank}]:[I1109 15:00:01.000000 ProcessGroupNCCL.cpp:918] [PG ID 0 PG GUID 0(default_pg) Rank "
            f"{rank}] ProcessGroupNCCL initialization options: size: {nranks}, global rank: {rank}\n"
            f"{p} NCCL INFO NCCL version 2.21.5+cuda12.4\n"
            f"{p} NCCL INFO Bootstrap : Using eth0:10.0.{rank // 8}.{10 + d}<0>\n"
            f"{p} NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.{rank // 8}.{10 + d}<0>\n"
            f"{p} NCCL INFO Channel 00/0 : {rank}[{d}] -> {(rank + 1) % nranks}[{(d + 1) % 8}] [send] via NET/IB/0/GDRDMA\n"
            f"{p} NCCL INFO Connected all rings\n"
            f"{p} NCCL INFO comm {comm} rank {rank} nranks {nranks} cudaDev {d} nvmlDev {d} busId {d}8000 "
            f"commId {comm_id} - Init COMPLETE\n")


def lockstep(path: str, size: int, *, ranks: int = 32, behind: int | None = 13, seed: int = 1) -> dict:
    """The realistic interleaved COLL log (``behind`` None: a healthy one, cut mid-collective)."""
    rng = random.Random(seed)
    pids = [40000 + 17 * r for r in range(ranks)]
    comms = [f"0x55d0c3a1b{r:03x}" for r in range(ranks)]
    halves = [_coll(r, comms[r], ranks, pids[r]) for r in range(ranks)]
    order = list(range(ranks))
    op = 0
    with open(path, "wb") as out:
        out.write("".join(_init_lines(r, ranks, pids[r], comms[r], "0x5f1d2a9b7c3e4d10") for r in order).encode())
        written = out.tell()
        reserve = 64 << 10
        while written < size - reserve:
            parts = []
            for _ in range(256):
                rng.shuffle(order)  # lockstep, but the ranks print in any order within a collective
                hexop = b"%x" % op
                for r in order:
                    head, tail = halves[r]
                    parts += (head, hexop, tail)
                if op % 50 == 0:
                    for r in order:
                        parts.append(f"[rank{r}]:2024-11-09 15:{op // 3000 % 60:02d}:{op // 50 % 60:02d},123 INFO "
                                     f"train.py:211 step {op // 50} loss 2.{op % 97:02d} lr 3.0e-04\n".encode())
                op += 1
            chunk = b"".join(parts)
            out.write(chunk)
            written += len(chunk)
        if behind is None:  # healthy: the log ends part-way through a collective, nothing wrong
            hexop = b"%x" % op
            for r in order[: ranks // 2]:
                out.write(halves[r][0] + hexop + halves[r][1])
            return {"ops": op + 1, "behind": None}
        hexop = b"%x" % op  # the last collective: every rank but one enters it
        for r in order:
            if r != behind:
                out.write(halves[r][0] + hexop + halves[r][1])
        seq = op + 1  # PyTorch counts from 1, NCCL's opCount from 0
        tail = []
        for r in range(ranks):
            pg = f"[rank{r}]:[E1109 16:13:20.{r:06d} ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank {r}]"
            if r == behind:
                tail.append(f"{pg} Received a dump signal due to a collective timeout from  rank 0 and we will try "
                            f"our best to dump the debug info. Last enqueued NCCL work: {seq - 1}, last completed "
                            f"NCCL work: {seq - 1}.\n")
                continue
            tail.append(f"[rank{r}]:[E1109 16:13:20.{r:06d} ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught "
                        f"collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=262144, "
                        f"NumelOut=262144, Timeout(ms)=600000) ran for 600038 milliseconds before timing out.\n"
                        f"{pg} Exception (either an error or timeout) detected by watchdog at work: {seq}, last "
                        f"enqueued NCCL work: {seq}, last completed NCCL work: {seq - 1}.\n")
        out.write("".join(tail).encode())
    return {"ops": op + 1, "behind": behind}


def garbled(path: str, size: int, *, seed: int = 2) -> dict:
    """Eight jobs concatenated, opCounts that jump back, one-off communicators, no error."""
    rng = random.Random(seed)
    with open(path, "wb") as out:
        written, job = 0, 0
        while written < size:
            job += 1
            ranks = rng.choice((16, 24, 32, 48))
            pids = [20000 + job * 1000 + r for r in range(ranks)]
            base = f"0x55{job:02x}c3a1b"
            out.write("".join(_init_lines(r, ranks, pids[r], f"{base}{r:03x}", f"0x{job:016x}")
                              for r in range(ranks)).encode())
            halves = [_coll(r, f"{base}{r:03x}", ranks, pids[r]) for r in range(ranks)]
            end = min(size, written + size // 8)
            while written < end:
                parts = []
                for _ in range(20000):
                    r = rng.randrange(ranks)
                    head, tail = halves[r]
                    roll = rng.random()
                    if roll < 0.05:  # a communicator pointer that is never seen again
                        tail = tail.replace(f"comm {base}{r:03x}".encode(), b"comm 0x%012x" % rng.getrandbits(48))
                    op = rng.getrandbits(32) if roll > 0.6 else rng.randrange(1 << 16)
                    parts += (head, b"%x" % op, tail)
                chunk = b"".join(parts)
                out.write(chunk)
                written += len(chunk)
    return {"jobs": job}


def per_rank(folder: str, files: int, mb: float, behind: int) -> int:
    """Per-rank logs like torchrun --log-dir writes them: the same COLL lines, one rank per file."""
    size = int(mb * (1 << 20))
    for r in range(files):
        pid, comm = 40000 + r, "0x55d0c3a1b2c0"
        head, tail = (x.replace(f"[rank{r}]:".encode(), b"") for x in _coll(r, comm, files, pid))
        parts = [_init_lines(r, files, pid, comm, "0x5f1d2a9b7c3e4d10").replace(f"[rank{r}]:", "").encode()]
        last = size // 180
        for op in range(last):
            if r == behind and op == last - 1:
                break
            parts += (head, b"%x" % op, tail)
            if op % 50 == 0:
                parts.append(f"2024-11-09 15:{op // 3000 % 60:02d}:{op // 50 % 60:02d},123 INFO train.py:211 step "
                             f"{op // 50} loss 2.{op % 97:02d}\n".encode())
        seq = last
        pg = f"[E1109 16:13:20.{r:06d} ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank {r}]"
        if r == behind:
            parts.append(f"{pg} Received a dump signal due to a collective timeout from  rank 0 and we will try our "
                         f"best to dump the debug info. Last enqueued NCCL work: {seq - 1}, last completed NCCL "
                         f"work: {seq - 1}.\n".encode())
        else:
            parts.append(f"[E1109 16:13:20.{r:06d} ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
                         f"operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=262144, "
                         f"NumelOut=262144, Timeout(ms)=600000) ran for 600038 milliseconds before timing out.\n"
                         f"{pg} Exception (either an error or timeout) detected by watchdog at work: {seq}, last "
                         f"enqueued NCCL work: {seq}, last completed NCCL work: {seq - 1}.\n".encode())
        with open(os.path.join(folder, f"{_host(r)}.rank{r}.log"), "wb") as out:
            out.write(b"".join(parts))
    return files


# ------------------------------------------------------------------------------ measuring
_HELPER = """
import json, os, resource, signal, subprocess, sys, time
spec, limit = json.loads(sys.argv[1]), float(sys.argv[2])
cmd, writer_cmd, stdin_path = spec["cmd"], spec.get("writer"), spec.get("stdin")
start = time.perf_counter()
writer = stdin = None
if writer_cmd:  # a real pipe: another process writes the log into the command's stdin
    writer = subprocess.Popen(writer_cmd, stdout=subprocess.PIPE, start_new_session=True)
    stdin = writer.stdout
elif stdin_path:
    stdin = open(stdin_path, "rb")
proc = subprocess.Popen(cmd, shell=isinstance(cmd, str), stdin=stdin, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, start_new_session=True)
if stdin is not None:
    stdin.close()
try:
    out, err = proc.communicate(timeout=limit)
    seconds = time.perf_counter() - start
except subprocess.TimeoutExpired:
    os.killpg(proc.pid, signal.SIGKILL)
    out, err = proc.communicate()
    seconds = float("inf")
writer_cpu = 0.0
if writer is not None:
    if proc.returncode != 0 or seconds == float("inf"):
        os.killpg(writer.pid, signal.SIGKILL)
    _, _, usage = os.wait4(writer.pid, 0)
    writer.returncode = 0
    writer_cpu = usage.ru_utime + usage.ru_stime
children = resource.getrusage(resource.RUSAGE_CHILDREN)
sys.stdout.write(json.dumps({"seconds": seconds, "peak_mb": children.ru_maxrss / 1024, "rc": proc.returncode,
                             "cpu": children.ru_utime + children.ru_stime - writer_cpu, "writer_cpu": writer_cpu,
                             "out": out.decode("utf-8", "replace"), "err": err.decode("utf-8", "replace")[-2000:]}))
"""


def peak_of(cmd: str | list[str], *, timeout: float, writer: list[str] | None = None,
            stdin: str | None = None) -> tuple[dict, float]:
    """Run a command (a shell pipeline when a string) in a fresh helper process, so that
    RUSAGE_CHILDREN holds only this command's peak RSS (the largest of it and its children) and
    CPU time. ``writer``: a command whose output is piped into the command's stdin (its CPU time
    is told apart); ``stdin``: a file given as the command's stdin."""
    spec = {"cmd": cmd, "writer": writer, "stdin": stdin}
    done = subprocess.run([sys.executable, "-c", _HELPER, json.dumps(spec), str(timeout)], capture_output=True,
                          check=False)
    result = json.loads(done.stdout)
    return result, result["peak_mb"]


def diagnose_json(result: dict) -> dict:
    try:
        return json.loads(result["out"])
    except (ValueError, KeyError):
        return {}


def verdict(report: dict, culprit: int | None) -> str:
    hang = report.get("hang") or {}
    named = (hang.get("culprit") or {}).get("ranks")
    top = max((d["confidence"] for d in report.get("diagnoses", [])), default=0.0)
    if culprit is None:
        ok = not hang and top <= 0.3
        return f"{'OK' if ok else 'WRONG'}: hang claimed: {bool(hang)} (culprit {named}), top cause {top:.2f}"
    ok = named == [culprit]
    return f"{'OK' if ok else 'WRONG'}: culprit named {named} (planted {culprit}), top cause {top:.2f}"


def median_run(cmd, repeat: int, timeout: float, **how) -> tuple[dict, float]:
    runs = [peak_of(cmd, timeout=timeout, **how) for _ in range(repeat)]
    runs.sort(key=lambda r: r[0]["seconds"])
    return runs[len(runs) // 2]


def line(name: str, seconds: float, peak: float, extra: str = "") -> None:
    print(f"  {name:<28} {seconds:8.2f} s   peak RSS {peak:6.0f} MB   {extra}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1024, help="size of the realistic, healthy and garbled logs")
    ap.add_argument("--files", type=int, default=512)
    ap.add_argument("--file-mb", type=float, default=20.0)
    ap.add_argument("--repeat", type=int, default=1, help="runs of each command; the median counts")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds before a run counts as failed")
    ap.add_argument("--only", nargs="*", default=None,
                    choices=["realistic", "healthy", "garbled", "piped", "per-rank"])
    ap.add_argument("--dir", default=None, help="where to write the logs (default: a temp dir, removed after)")
    ap.add_argument("--keep", action="store_true", help="keep the generated logs")
    ap.add_argument("--reuse", action="store_true", help="use logs kept in --dir by an earlier --keep run")
    opts = ap.parse_args()
    wanted = set(opts.only or ["realistic", "healthy", "garbled", "piped", "per-rank"])
    folder = opts.dir or tempfile.mkdtemp(prefix="nccl-doctor-ingest-")
    os.makedirs(folder, exist_ok=True)
    size = opts.size_mb << 20
    patterns = os.path.join(folder, "failure-patterns.ere")
    needles = os.path.join(folder, "failure-needles.txt")
    with open(patterns, "w") as out:
        out.write("\n".join(FAILURE_PATTERNS) + "\n")
    with open(needles, "w") as out:
        out.write("\n".join(FAILURE_NEEDLES) + "\n")
    print(f"load average at start: {os.getloadavg()[0]:.2f}  cores: {os.cpu_count()}")
    try:
        subprocess.run([*DIAGNOSE, "--symptom", "warm", "--json"], capture_output=True, check=False)  # KB cache
        realistic = os.path.join(folder, "realistic.log")
        if wanted & {"realistic", "piped"}:
            t = time.perf_counter()
            info = {"ops": "(kept)", "behind": 13} if opts.reuse and os.path.exists(realistic) else lockstep(realistic, size)
            print(f"realistic: {os.path.getsize(realistic) / 2**20:.0f} MB, {info['ops']} collectives x 32 ranks, "
                  f"rank {info['behind']} behind (generated in {time.perf_counter() - t:.0f} s)")
            subprocess.run(["cat", realistic], stdout=subprocess.DEVNULL, check=True)
            grep, grep_peak = median_run(["grep", "-cE", "-f", patterns, realistic], opts.repeat, opts.timeout)
            ours, peak = median_run([*DIAGNOSE, "--log", realistic, "--json", "--no-input"], opts.repeat, opts.timeout)
            line("grep -cE (30 patterns)", grep["seconds"], grep_peak)
            line("diagnose --log FILE", ours["seconds"], peak, verdict(diagnose_json(ours), info["behind"]))
            print(f"  ratio diagnose / grep: {ours['seconds'] / grep['seconds']:.2f}  (target <= 1.0, <= 200 MB)")
            if "piped" in wanted:
                # a real pipe, cat writing into it (cat's CPU time, spent on the same cores, is shown
                # apart); ``< FILE`` would hand diagnose the file itself and measure no pipe at all.
                # File and pipe runs alternate, so that a change in the machine's load falls on both.
                stdin_cmd = [*DIAGNOSE, "--log", "-", "--json", "--no-input"]
                pairs = []
                for _ in range(opts.repeat):
                    by_file = peak_of([*DIAGNOSE, "--log", realistic, "--json", "--no-input"], timeout=opts.timeout)
                    pairs.append((by_file, peak_of(stdin_cmd, timeout=opts.timeout, writer=["cat", realistic])))
                ratios = sorted(p[0]["seconds"] / f[0]["seconds"] for f, p in pairs)
                pairs.sort(key=lambda pair: pair[1][0]["seconds"])
                (by_file, _), (piped, ppeak) = pairs[len(pairs) // 2]
                line("cat FILE | diagnose --log -", piped["seconds"], ppeak, verdict(diagnose_json(piped), info["behind"]))
                print(f"  ratio piped / file: {piped['seconds'] / ours['seconds']:.2f}, median of {len(ratios)} "
                      f"alternating pairs {ratios[len(ratios) // 2]:.2f} (range {ratios[0]:.2f}-{ratios[-1]:.2f})  "
                      f"(target <= 1.2)")
                print(f"  CPU seconds (median pipe run and its file run): diagnose FILE {by_file['cpu']:.2f}; "
                      f"diagnose - {piped['cpu']:.2f}, cat {piped['writer_cpu']:.2f}")
        for name, make in (("healthy", lambda p: lockstep(p, size, behind=None, seed=3)), ("garbled", lambda p: garbled(p, size))):
            if name not in wanted:
                continue
            path = os.path.join(folder, f"{name}.log")
            t = time.perf_counter()
            if not (opts.reuse and os.path.exists(path)):
                make(path)
            print(f"{name}: {os.path.getsize(path) / 2**20:.0f} MB (generated in {time.perf_counter() - t:.0f} s)")
            subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)
            grep, grep_peak = median_run(["grep", "-cE", "-f", patterns, path], opts.repeat, opts.timeout)
            ours, peak = median_run([*DIAGNOSE, "--log", path, "--json", "--no-input"], opts.repeat, opts.timeout)
            line("grep -cE (30 patterns)", grep["seconds"], grep_peak)
            line("diagnose --log FILE", ours["seconds"], peak, verdict(diagnose_json(ours), None))
            target = "1.0" if name == "healthy" else "2.0"
            print(f"  ratio diagnose / grep: {ours['seconds'] / grep['seconds']:.2f}  (target <= {target}, <= 200 MB)")
            if not opts.keep:
                os.remove(path)
        if os.path.exists(realistic) and not opts.keep:
            os.remove(realistic)
        if "per-rank" in wanted:
            ranks_dir = os.path.join(folder, "ranks")
            os.makedirs(ranks_dir, exist_ok=True)
            behind = opts.files // 3
            t = time.perf_counter()
            if not (opts.reuse and len(os.listdir(ranks_dir)) == opts.files):
                per_rank(ranks_dir, opts.files, opts.file_mb, behind)
            total = sum(e.stat().st_size for e in os.scandir(ranks_dir))
            print(f"per-rank: {opts.files} files, {total / 2**30:.2f} GB, rank {behind} behind "
                  f"(generated in {time.perf_counter() - t:.0f} s)")
            subprocess.run(f"cat {ranks_dir}/* > /dev/null", shell=True, check=True)
            # output to a pipe, not /dev/null: GNU grep stops at the first match when it sees /dev/null
            grep, grep_peak = median_run(f"ls {ranks_dir}/* | xargs -P 2 -n 16 grep -c -F -f {needles}",
                                         opts.repeat, opts.timeout)
            ours, peak = median_run([*DIAGNOSE, "--log", ranks_dir, "--json", "--no-input"], opts.repeat, opts.timeout)
            line("grep -c -F (2-way parallel)", grep["seconds"], grep_peak)
            line("diagnose --log DIR", ours["seconds"], peak, verdict(diagnose_json(ours), behind))
            print(f"  ratio diagnose / grep: {ours['seconds'] / grep['seconds']:.2f}  (target <= 1.0)")
        print(f"load average at end: {os.getloadavg()[0]:.2f}")
        return 0
    finally:
        if not opts.dir and not opts.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
