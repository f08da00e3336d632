"""Benchmark: scanning a big multi-rank NCCL_DEBUG=INFO log with every KB signature.

Generates a synthetic log (default 1 GB) of realistic INFO noise from 64 ranks with real
failure lines (the KB's own signature examples) planted through it, then times
``grep -cE`` with the same patterns (converted to ERE) as the baseline and nccl-doctor's
scanner, each in its own process, and prints the ratio and the scanner's peak memory.

    python benchmarks/bench_log_scan.py [--size-mb 1024] [--keep PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time

NOISE = [
    "{h}:{p}:{t} [{d}] NCCL INFO Channel {c:02d}/0 : {r}[{d}] -> {n}[{nd}] via P2P/IPC/read",
    "{h}:{p}:{t} [{d}] NCCL INFO Connected all rings",
    "{h}:{p}:{t} [{d}] NCCL INFO AllReduce: opCount {op:x} sendbuff 0x7f12a4000000 recvbuff 0x7f12a4000000 count 262144 datatype 7 op 0 root 0 comm 0x55d2c0 [nranks=64] stream 0x55d2e0",
    "{h}:{p}:{t} [{d}] NCCL INFO comm 0x55d2c0 rank {r} nRanks 64 nNodes 8 localRanks 8 localRank {d} MNNVL 0",
    "{h}:{p}:{t} [{d}] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.1.0.{d}<0>",
    "[rank{r}]:[I1121 12:00:{s:02d}.{ms:06d} ProcessGroupNCCL.cpp:2048] [PG ID 0 PG GUID 0 Rank {r}] ProcessGroupNCCL initialization options: size: 64, global rank: {r}",
    "{{'loss': {loss:.4f}, 'learning_rate': 2e-05, 'epoch': 0.{s:02d}}}",
]


def kb_lines() -> tuple[list[str], list[str]]:
    """The KB's signature patterns and the lines its examples say must match."""
    from nccl_doctor.kb.load import kb_files, load_files, DATA_DIR

    kb = load_files(kb_files(DATA_DIR), DATA_DIR)
    patterns = [s.pattern for s in kb.signatures.values()]
    planted = [line for s in kb.signatures.values() for e in s.examples.fires for line in e.log.splitlines() if line]
    return patterns, planted


def to_ere(pattern: str) -> str | None:
    """Python regex -> POSIX ERE for grep, or None when it has no ERE equivalent."""
    if re.search(r"\(\?[=!<]", pattern.replace("(?P<", "")):
        return None
    out = re.sub(r"\(\?P<\w+>", "(", pattern)
    out = out.replace("(?:", "(").replace("\\d", "[0-9]").replace("\\s", "[[:space:]]").replace("\\S", "[^[:space:]]")
    out = out.replace("*?", "*").replace("+?", "+").replace("??", "?")
    out = re.sub(r"\(\?i\)", "", out)
    return out


def generate(path: str, size: int, planted: list[str], seed: int = 1) -> int:
    rng = random.Random(seed)
    block_lines = []
    for i in range(20000):
        r = rng.randrange(64)
        block_lines.append(rng.choice(NOISE).format(
            h=f"node{r // 8:03d}", p=1000 + r, t=2000 + r, d=r % 8, c=i % 32, r=r, n=(r + 1) % 64,
            nd=(r + 1) % 8, op=i, s=i % 60, ms=i * 7 % 1000000, loss=rng.random()))
    block = ("\n".join(block_lines) + "\n").encode()
    written = planted_count = 0
    with open(path, "wb") as handle:
        while written < size:
            handle.write(block)
            written += len(block)
            line = planted[planted_count % len(planted)] if planted else ""
            if line:
                handle.write(f"[rank{planted_count % 64}]: {line}\n".encode())
                planted_count += 1
    return planted_count


def timed(cmd: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"{cmd[0]} failed: {done.stderr.strip()[:300]}")
    return seconds, done.stdout.strip()


SCAN = """
import json, resource, sys, time
from nccl_doctor import load_doctor
from nccl_doctor.ingest import plan_for, read_file
doctor = load_doctor()
start = time.perf_counter()
got = read_file(sys.argv[1], doctor=doctor)
print(json.dumps({"seconds": time.perf_counter() - start, "lines": got.lines, "hits": sum(got.counts.values()),
                  "backend": plan_for(doctor).prefilter.backend,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--keep", help="write the log here and keep it")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each; the median counts")
    opts = parser.parse_args()
    patterns, planted = kb_lines()
    ere = [p for p in (to_ere(x) for x in patterns) if p]
    workdir = tempfile.mkdtemp(prefix="nccl-doctor-bench-")
    log = opts.keep or os.path.join(workdir, "multi-rank.log")
    pattern_file = os.path.join(workdir, "patterns.ere")
    with open(pattern_file, "w") as handle:
        handle.write("\n".join(ere) + "\n")
    t0 = time.perf_counter()
    count = generate(log, opts.size_mb << 20, planted)
    print(f"generated {os.path.getsize(log) / 2**20:.0f} MB with {count} planted failure lines in {time.perf_counter() - t0:.1f} s")
    subprocess.run(["cat", log], stdout=subprocess.DEVNULL, check=True)  # warm the page cache for both
    grep_times, ours = [], []
    for _ in range(opts.repeat):
        grep_times.append(timed(["grep", "-cE", "-f", pattern_file, log])[0])
        seconds, out = timed([sys.executable, "-c", SCAN, log])
        ours.append(json.loads(out.splitlines()[-1]))
    grep_s = sorted(grep_times)[len(grep_times) // 2]
    ours_s = sorted(r["seconds"] for r in ours)[len(ours) // 2]
    last = ours[-1]
    print(f"patterns: {len(patterns)} KB signatures ({len(ere)} expressible in ERE for grep)")
    print(f"grep -cE        : {grep_s:6.2f} s")
    print(f"nccl-doctor scan: {ours_s:6.2f} s  ({last['backend']} prefilter, {last['hits']} hits, {last['lines']} lines)")
    print(f"ratio (ours / grep): {ours_s / grep_s:.2f}   peak memory: {last['peak_mb']:.0f} MB (target < 200)")
    if not opts.keep:
        os.remove(log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
