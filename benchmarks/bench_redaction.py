"""Benchmark: redacting a megabyte, against one plain regex pass over the same text.

For each input shape (ordinary prose and logs, and hostile shapes that made the old redaction
super-linear), time :func:`nccl_doctor.redaction.redact` on 256 KB, 512 KB and 1 MB, and the
baseline ``re.findall(r"\\S+", text)`` on 1 MB in the same run (CPU seconds, best of 3). Linear work doubles with the size;
the old code took 33 s for 16 KB of "a.a.a..." and four times as long for each doubling.

    python benchmarks/bench_redaction.py
"""
from __future__ import annotations

import re
import statistics
import time
from pathlib import Path

from nccl_doctor.redaction import redact

ROOT = Path(__file__).resolve().parents[1]
LOG_LINE = ("gpu-node-{n:02d}:1234:1234 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.{n}.3<0> "
            "[1]ib0:fe80::1c4e:2ff:fe3a:{n:x}%ib0<0> MASTER_ADDR=head-01 HF_TOKEN=hf_{n:032d}\n")


def shapes(size: int) -> dict[str, str]:
    prose = (ROOT / "README.md").read_text()
    log = "".join(LOG_LINE.format(n=n % 250) for n in range(size // 100 + 1))
    raw = {
        "prose (README)": prose * (size // len(prose) + 1),
        "NCCL log with hosts, IPs, tokens": log,
        "a.a.a...": "a." * size,
        "a:a:a...": "a:" * size,
        "password=x ...": "password=x " * size,
        "100k distinct host names": " ".join(f"node{i:05d}" for i in range(size // 10 + 1)),
    }
    return {name: text[:size] for name, text in raw.items()}


def best_of(fn, text: str, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        start = time.process_time()  # CPU time: the 2-core machine is shared
        fn(text)
        times.append(time.process_time() - start)
    return min(times)


def main() -> int:
    mb = 1 << 20
    small, mid, big = shapes(mb // 4), shapes(mb // 2), shapes(mb)
    print(f"{'input':34} {'256 KB':>8} {'512 KB':>8} {'1 MB':>8} {'baseline 1 MB':>14} {'ratio':>7}")
    ratios = []
    for name in big:
        t = [best_of(redact, s[name]) for s in (small, mid, big)]
        base = best_of(lambda text: re.findall(r"\S+", text), big[name])
        ratios.append(t[2] / base)
        print(f"{name:34} {t[0]:7.3f}s {t[1]:7.3f}s {t[2]:7.3f}s {base:13.4f}s {t[2] / base:6.0f}x")
    print(f"median ratio to one regex pass: {statistics.median(ratios):.0f}x; growth 512 KB -> 1 MB should be ~2x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
