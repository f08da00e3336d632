"""Benchmark: what one consultation turn costs the engine.

Replays the start of a conversation for every incident with a ``knows:`` map (falling back to the
dev set's descriptions when the KB has no incidents): the reporter's description, then six
turns of "don't know" to the question asked. Times ``next_question()`` on each new state (nothing
cached), and a whole turn as a server sees it (the answer, the next question, the diagnoses and
the plan). Prints the
median and 99th percentile in milliseconds; compare two versions of the code by running the
script against each, back to back (the figures in BENCHMARKS.md were taken that way).

    python benchmarks/bench_turn.py [--turns 6]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from nccl_doctor import load_doctor

DEV = Path("/work/shared/eval/dev.yaml")


def descriptions(doctor) -> list[str]:
    incidents = [i.reporter for i in (getattr(doctor.kb, "incidents", None) or {}).values() if i.get("knows")]
    if incidents:
        return incidents
    import yaml

    return [case["symptom"] for case in yaml.safe_load(DEV.read_text())]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=6)
    opts = parser.parse_args()
    doctor = load_doctor()
    texts = descriptions(doctor)
    warm = doctor.session()
    warm.tell(texts[0])
    warm.next_question()  # build what is built on first use
    asks, turns = [], []
    for text in texts:
        session = doctor.session()
        session.tell(text)
        session.diagnoses()
        start = time.perf_counter()
        question = session.next_question()
        asks.append(time.perf_counter() - start)
        for _ in range(opts.turns):
            if question is None:
                break
            start = time.perf_counter()
            session.dont_know(question.id)  # the answer changes the state: nothing cached helps
            begin = time.perf_counter()
            question = session.next_question()
            asks.append(time.perf_counter() - begin)
            session.diagnoses()
            session.plan()
            turns.append(time.perf_counter() - start)
    ms = lambda values, share: 1000 * percentile(values, share)  # noqa: E731
    print(f"{len(texts)} conversations, {len(asks)} questions chosen")
    print(f"next_question(): median {1000 * statistics.median(asks):.2f} ms, p99 {ms(asks, 0.99):.2f} ms")
    print(f"whole turn     : median {1000 * statistics.median(turns):.2f} ms, p99 {ms(turns, 0.99):.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
