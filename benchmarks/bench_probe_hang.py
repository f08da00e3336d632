"""Benchmark: how fast the collective probe reports a hung collective (issue 8, item 5).

Starts local ranks of the cluster probe over gloo on CPU with rank 1 made to hang just before
all_reduce (the NCCL_DOCTOR_PROBE_INJECT test hook), so the other ranks sit in a collective
that never completes. Detection time = REPORT.json written by rank 0 minus the moment rank 0
entered the hung all_reduce. Printed for several deadlines as ratios to the deadline set and to
PyTorch's default NCCL timeout of 600 s (what a user waits for without the probe). Also times
all host probes together (the 5 s target of `diagnose --probe`), against `python -c pass`
measured in the same run. Checks that the culprit named is rank 1.

    python benchmarks/bench_probe_hang.py                   # deadlines 2, 5, 10 s; 2 ranks
    python benchmarks/bench_probe_hang.py --deadlines 3 --ranks 3 --repeat 3
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nccl_doctor.probes import run_probes
from nccl_doctor.probes.collective import launch_local

TORCH_DEFAULT_NCCL_TIMEOUT_S = 600.0


def detect_once(deadline: float, ranks: int) -> tuple[float, float]:
    """(detection seconds, whole run seconds) for one injected hang."""
    with tempfile.TemporaryDirectory(prefix="bench-hang-") as out:
        start = time.time()
        procs = launch_local(ranks, out, deadline=deadline, backend="gloo",
                             extra_env={1: {"NCCL_DOCTOR_PROBE_INJECT": "hang:all_reduce:1"}})
        report = Path(out) / "REPORT.json"
        try:
            stop = time.monotonic() + deadline * 3 + 60
            while not report.exists() and time.monotonic() < stop:
                time.sleep(0.01)
            data = json.loads(report.read_text())
        finally:
            for p in procs:
                p.kill()
                p.wait()
    hung = next(o for o in data["collectives"]["0"] if o["op"] == "all_reduce")
    assert hung["status"] == "timeout", hung
    assert data["culprits"][0]["rank"] == 1, data["culprits"]
    return data["written"] - hung["started_at"], data["written"] - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--deadlines", default="2,5,10", help="per-operation deadlines to try, seconds")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()

    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    py = time.perf_counter() - t
    t = time.perf_counter()
    results = run_probes()
    host = time.perf_counter() - t
    slowest = max(results, key=lambda r: r.seconds)
    print(f"host probes: {len(results)} in {host:.2f} s wall (target < 5 s; {host / 5:.2f} of it); "
          f"python -c pass {py:.2f} s (ratio {host / py:.1f}x); slowest {slowest.name} {slowest.seconds:.2f} s")
    print()
    print(f"{'deadline s':>10} {'detect s':>9} {'detect/deadline':>16} {'detect/600s':>12} {'run s':>7}")
    for deadline in (float(d) for d in args.deadlines.split(",")):
        runs = [detect_once(deadline, args.ranks) for _ in range(args.repeat)]
        detect = statistics.median(r[0] for r in runs)
        whole = statistics.median(r[1] for r in runs)
        print(f"{deadline:>10g} {detect:>9.2f} {detect / deadline:>16.2f} "
              f"{detect / TORCH_DEFAULT_NCCL_TIMEOUT_S:>12.4f} {whole:>7.2f}")
    print("\ndetect = REPORT.json written - rank 0 entered the hung all_reduce; culprit named: rank 1 "
          f"({args.ranks} ranks, gloo, CPU)")


if __name__ == "__main__":
    main()
