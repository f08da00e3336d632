"""Benchmark: one-shot start-up against importing yaml and pydantic.

Median wall time of ``diagnose --symptom "hang at init" --json --no-probes`` over N runs,
against ``python -c "import yaml, pydantic"`` measured in the same run (interleaved, so both see
the same load), with the median CPU time of each beside it (steadier on a shared machine); also
checks that torch, textual, yaml and pydantic are not imported on this path.

Both run as an installed package does: the compiled KB artifact is cached and so is the
bytecode (pip compiles it at install; ``PYTHONDONTWRITEBYTECODE`` is dropped for the runs, or
every run would recompile our modules while yaml and pydantic come precompiled).

The bare interpreter (``python -c pass``) is timed in the same runs, and the CPU time each command
spends above it is compared too: what ``site`` does (``.pth`` hooks of the environment, editable
installs' finders) is paid by both commands and can be a large part of each, which pulls the
plain ratio towards 1 on one machine and not on another.

    python benchmarks/bench_startup.py [--runs 15]
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

CLI = [sys.executable, "-m", "nccl_doctor.cli", "--symptom", "hang at init", "--json", "--no-probes"]
BASE = [sys.executable, "-c", "import yaml, pydantic"]
BARE = [sys.executable, "-c", "pass"]
CHECK = ("import sys, runpy; sys.argv=['diagnose','--symptom','hang at init','--json','--no-probes'];"
         "import nccl_doctor.cli as c; c.main(sys.argv[1:]);"
         "bad=[m for m in sys.modules if m.split('.')[0] in ('torch','textual','yaml','pydantic')];"
         "sys.stderr.write('heavy imports: %s\\n' % (bad or 'none'))")


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
TARGET = 1.0


def timed(cmd: list[str], runs: int) -> tuple[list[float], list[float]]:
    """Wall and CPU (user + system) seconds of each run."""
    wall, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True, env=ENV)
        wall.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    opts = parser.parse_args()
    for cmd in (CLI, BASE):  # warm the compiled-KB cache and the bytecode
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True, env=ENV)
    base: tuple[list[float], list[float]] = ([], [])
    ours: tuple[list[float], list[float]] = ([], [])
    bare: tuple[list[float], list[float]] = ([], [])
    for _ in range(3):  # interleave to share the machine's noise
        for into, cmd in ((base, BASE), (ours, CLI), (bare, BARE)):
            wall, cpu = timed(cmd, max(1, opts.runs // 3))
            into[0].extend(wall)
            into[1].extend(cpu)
    b, o = statistics.median(base[0]), statistics.median(ours[0])
    bc, oc, nc = statistics.median(base[1]), statistics.median(ours[1]), statistics.median(bare[1])
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, check=True, env=ENV)
    print(f"import yaml, pydantic : {b * 1000:6.0f} ms  (CPU {bc * 1000:.0f} ms)")
    print(f"diagnose one-shot     : {o * 1000:6.0f} ms  (CPU {oc * 1000:.0f} ms)")
    print(f"python -c pass        : {statistics.median(bare[0]) * 1000:6.0f} ms  (CPU {nc * 1000:.0f} ms)")
    print(f"ratio (ours / baseline): {o / b:.2f}  (CPU {oc / bc:.2f}; target <= {TARGET}); {done.stderr.strip()}")
    print(f"CPU above the bare interpreter: {(oc - nc) * 1000:.0f} ms vs {(bc - nc) * 1000:.0f} ms, "
          f"{(oc - nc) / max(bc - nc, 1e-9):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
