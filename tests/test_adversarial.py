"""Hostile text must not stall the engine. Every KB regex runs on RE2, whose matching time is
linear in the text by construction, so there is nothing to search for: these tests feed megabyte
inputs (runs of one character, repeated log prefixes, phrase soup) to every KB regex and to the
session, and only catch a regression to super-linear time (bounds are generous: a linear search
of a megabyte takes milliseconds, a quadratic one minutes). A guard timer turns a runaway into
a failure instead of a hung suite.
"""
from __future__ import annotations

import random
import re
import signal
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from nccl_doctor import load_doctor
from nccl_doctor.engine.session import MAX_TEXT_CHARS
from nccl_doctor.kb.load import DATA_DIR
from nccl_doctor.kb.patterns import compile_pattern

BOUND_S = 8.0
MEGABYTE = 1 << 20


class _Overrun(Exception):
    pass


@contextmanager
def _guard(seconds: float = 3 * BOUND_S):
    def fire(signum, frame):
        raise _Overrun()
    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _elapsed(call, *args) -> float:
    start = time.perf_counter()
    try:
        with _guard():
            call(*args)
    except _Overrun:
        return float("inf")
    return time.perf_counter() - start


@pytest.fixture(scope="module")
def doctor():
    return load_doctor()


def _kb_patterns(kb) -> list[tuple[str, bool]]:
    out = [(s.pattern, s.ignore_case) for s in kb.signatures.values()]
    out += [(p, True) for s in kb.symptoms.values() for p in [*s.patterns, *s.unless]]
    return out


def test_no_look_around_or_back_reference_is_left_in_the_kb():
    offenders = []
    for path in sorted(Path(DATA_DIR).rglob("*.yaml")):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if re.search(r"\(\?<?[=!]|\(\?P=", line):
                offenders.append(f"{path.relative_to(DATA_DIR)}:{number}")
    assert not offenders, offenders


def _megabyte_inputs() -> dict[str, str]:
    rng = random.Random(5)
    return {
        "NCCL INFO a": ("NCCL INFO a " * MEGABYTE)[:MEGABYTE],
        "digits, dots and spaces": ("1.2 " * MEGABYTE)[:MEGABYTE],
        "random words": " ".join("".join(rng.choice("abcdefgh") for _ in range(6)) for _ in range(MEGABYTE // 7)),
    }


def test_every_kb_regex_searches_a_megabyte_in_linear_time(doctor):
    slow = []
    inputs = _megabyte_inputs()
    for pattern, ignore_case in _kb_patterns(doctor.kb):
        regex = compile_pattern(pattern, ignore_case=ignore_case)
        total = sum(_elapsed(regex.search, text) for text in inputs.values())
        if total > BOUND_S:
            slow.append((round(total, 2), pattern))
    assert not slow, f"super-linear on a megabyte: {slow[:5]}"


def _phrase_soup(kb, rng: random.Random, size: int) -> str:
    words = [w for s in kb.symptoms.values() for p in s.phrases for w in p.split()]
    out, length = [], 0
    while length < size:
        word = rng.choice(words)
        out.append(word)
        length += len(word) + 1
    return " ".join(out)[:size]


def _hostile_texts(kb) -> list[tuple[str, str]]:
    rng = random.Random(11)
    n = MAX_TEXT_CHARS
    return [
        ("spaces", " " * n),
        ("letters", "a" * n),
        ("digits", "1" * n),
        ("digits and spaces", "1 " * (n // 2)),
        ("cjk", "中" * n),
        ("newlines", "\n" * n),
        ("dots", "." * n),
        ("NCCL prefix repeated", ("NCCL WARN NET/IB : Using [0]mlx5_0:1/RoCE " * n)[:n]),
        ("env assignments", ("NCCL_SOCKET_IFNAME= " * n)[:n]),
        ("phrase soup", _phrase_soup(kb, rng, n)),
        ("negations", ("not never cannot hang timeout 没有 不 " * n)[:n]),
        ("a huge version", "NCCL version " + "1" * 5000 + ".1.1+cuda12.1"),
        ("a huge number", "timeout after " + "9" * 5000 + " minutes on " + "7" * 5000 + " nodes"),
    ]


def test_full_size_hostile_text_is_answered_fast(doctor):
    for name, text in _hostile_texts(doctor.kb):
        session = doctor.session()
        elapsed = _elapsed(session.tell, text[:MAX_TEXT_CHARS])
        assert elapsed < BOUND_S, f"tell took {elapsed:.2f} s on {name!r}"
        elapsed = _elapsed(session.report)
        assert elapsed < BOUND_S, f"report took {elapsed:.2f} s on {name!r}"


def test_megabyte_log_lines_are_answered_fast(doctor):
    needles = sorted({n for s in doctor.kb.signatures.values() for n in s.needles})
    rng = random.Random(7)
    lines = [needle + " " + filler for needle in rng.sample(needles, 8) for filler in _megabyte_inputs().values()]
    session = doctor.session()
    elapsed = _elapsed(session.add_log, lines)
    assert elapsed < 3 * BOUND_S, f"add_log took {elapsed:.2f} s on {len(lines)} long lines"
