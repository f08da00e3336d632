"""Benchmark: one-shot start-up against importing yaml and pydantic.

Median wall time of ``diagnose --symptom "hang at init" --json --no-probes`` over N runs,
against ``python -c "import yaml, pydantic"`` measured in the same run; also checks that torch
and textual are not imported on this path.

    python benchmarks/bench_startup.py [--runs 15]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

CLI = [sys.executable, "-m", "nccl_doctor.cli", "--symptom", "hang at init", "--json", "--no-probes"]
BASE = [sys.executable, "-c", "import yaml, pydantic"]
CHECK = ("import sys, runpy; sys.argv=['diagnose','--symptom','hang at init','--json','--no-probes'];"
         "import nccl_doctor.cli as c; c.main(sys.argv[1:]);"
         "bad=[m for m in sys.modules if m.split('.')[0] in ('torch','textual')];"
         "sys.stderr.write('heavy imports: %s\\n' % (bad or 'none'))")


def median_time(cmd: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    opts = parser.parse_args()
    subprocess.run(CLI, stdout=subprocess.DEVNULL, check=True)  # warm the compiled-KB cache
    base, ours = [], []
    for _ in range(3):  # interleave to share the machine's noise
        base.append(median_time(BASE, max(1, opts.runs // 3)))
        ours.append(median_time(CLI, max(1, opts.runs // 3)))
    b, o = statistics.median(base), statistics.median(ours)
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, check=True)
    print(f"import yaml, pydantic : {b * 1000:6.0f} ms")
    print(f"diagnose one-shot     : {o * 1000:6.0f} ms")
    print(f"ratio (ours / baseline): {o / b:.2f}  (target <= 2.0); {done.stderr.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
