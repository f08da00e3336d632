"""Fast signature scanning of log files: big binary chunks, a multi-literal prefilter, and
Python regexes only on the few lines that contain a signature's needle.

The prefilter uses hyperscan when it is installed (``pip install 'nccl-doctor[fast]'``) and one
compiled alternation of the needles with Python's ``re`` otherwise. Memory stays bounded by the
chunk size whatever the file size.
"""
from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

from .engine.compiled import CompiledKB
from .engine.matching import SignatureHit, clean_line
from .logs import CHUNK_BYTES, MAX_LINE_BYTES, LogProblem, _looks_binary

__all__ = ["LineFilter", "scan_file", "backend_name"]


@dataclass(frozen=True)
class _Sig:
    id: str
    regexes: dict  # the KB's lazily compiled signature regexes
    needles: tuple[bytes, ...]
    caseless: bool

    @property
    def regex(self) -> re.Pattern[str]:
        return self.regexes[self.id]


class LineFilter:
    """Finds the lines of a byte buffer that contain any signature needle."""

    def __init__(self, ckb: CompiledKB, *, use_hyperscan: bool = True):
        self.sigs: list[_Sig] = []
        self.always: list[_Sig] = []  # signatures without needles run on every line
        for sig in ckb.kb.signatures.values():
            entry = _Sig(sig.id, ckb.signature_regexes, tuple(n.encode() for n in sig.needles), sig.ignore_case)
            (self.sigs if sig.needles else self.always).append(entry)
        self.by_needle: dict[bytes, list[_Sig]] = defaultdict(list)
        for sig in self.sigs:
            for needle in sig.needles:
                self.by_needle[needle.lower() if sig.caseless else needle].append(sig)
        self.needles = list(self.by_needle)
        caseless = {n for s in self.sigs if s.caseless for n in s.needles}
        self._hs = _hyperscan_db(self.needles, caseless) if use_hyperscan else None
        parts = []
        for needle in self.needles:
            caseless = any(s.caseless for s in self.by_needle[needle])
            parts.append(b"(?i:" + re.escape(needle) + b")" if caseless else re.escape(needle))
        self._regex = re.compile(b"|".join(parts)) if parts else None

    def candidate_spans(self, buf: bytes) -> list[tuple[int, int]]:
        """Sorted (start, end) of whole lines in ``buf`` that contain a needle."""
        if self.always:
            spans, start = [], 0
            while start < len(buf):
                end = buf.find(b"\n", start)
                end = len(buf) if end < 0 else end
                spans.append((start, end))
                start = end + 1
            return spans
        if self._hs is not None:
            ends: list[int] = []
            self._hs.scan(buf, match_event_handler=lambda _id, _f, to, _fl, _ctx: ends.append(to))
            return _lines_at(buf, sorted(ends))
        spans = []
        regex = self._regex
        if regex is None:
            return spans
        pos = 0
        while True:
            found = regex.search(buf, pos)
            if not found:
                return spans
            start = buf.rfind(b"\n", 0, found.start()) + 1
            end = buf.find(b"\n", found.end())
            end = len(buf) if end < 0 else end
            spans.append((start, end))
            pos = end + 1

    def signatures_for(self, line: bytes) -> list[_Sig]:
        if self.always:
            return self.sigs + self.always
        lowered = None
        out: list[_Sig] = []
        seen: set[str] = set()
        for needle, sigs in self.by_needle.items():
            if needle in line or (any(s.caseless for s in sigs) and needle in (lowered := lowered or line.lower())):
                for sig in sigs:
                    if sig.id not in seen:
                        seen.add(sig.id)
                        out.append(sig)
        return out


def _lines_at(buf: bytes, positions: list[int]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    last_end = -1
    for pos in positions:
        if pos <= last_end:
            continue
        start = buf.rfind(b"\n", 0, max(pos - 1, 0)) + 1 if pos else 0
        end = buf.find(b"\n", pos - 1 if pos else 0)
        end = len(buf) if end < 0 else end
        spans.append((start, end))
        last_end = end
    return spans


def _hyperscan_db(needles: list[bytes], caseless: set[bytes]):
    if not needles:
        return None
    try:
        import hyperscan
    except ImportError:
        return None
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    flags = [hyperscan.HS_FLAG_CASELESS if n in caseless else 0 for n in needles]
    db.compile(expressions=[re.escape(n) for n in needles], ids=list(range(len(needles))),
               elements=len(needles), flags=flags)
    return db


def backend_name(ckb: CompiledKB) -> str:
    """Which prefilter a scan of this KB uses."""
    return "hyperscan" if LineFilter(ckb)._hs is not None else "python-re"


def _chunks(path: str) -> Iterator[tuple[bytes, int]]:
    """Whole-line chunks of the file with the number of the chunk's first line."""
    with open(path, "rb") as handle:
        head = handle.read(CHUNK_BYTES)
        if _looks_binary(head):
            raise LogProblem(f"{path}: looks like a binary file, not a text log")
        pending, line_no = head, 1
        while True:
            more = handle.read(CHUNK_BYTES)
            data = pending + more
            if not more:
                if data:
                    yield data, line_no
                return
            cut = data.rfind(b"\n")
            if cut < 0:
                # one enormous line: keep its head only
                if len(data) > MAX_LINE_BYTES:
                    pending = data[:MAX_LINE_BYTES]
                else:
                    pending = data
                continue
            yield data[:cut], line_no
            line_no += data.count(b"\n", 0, cut + 1)
            pending = data[cut + 1:]


def scan_file(ckb: CompiledKB, path: str, line_filter: LineFilter | None = None) -> tuple[int, list[SignatureHit]]:
    """Scan one file with every KB signature: (lines in the file, hits in file order)."""
    line_filter = line_filter or LineFilter(ckb)
    hits: list[SignatureHit] = []
    total_lines = 0
    try:
        for buf, first_line in _chunks(path):
            line_no, last = first_line, 0
            for start, end in line_filter.candidate_spans(buf):
                line_no += buf.count(b"\n", last, start)
                last = start
                raw = buf[start:end][:MAX_LINE_BYTES]
                text = clean_line(raw.decode("utf-8", "replace"))
                for sig in line_filter.signatures_for(raw):
                    found = sig.regex.search(text)
                    if found:
                        caps = {k: v for k, v in found.groupdict().items() if v is not None}
                        hits.append(SignatureHit(sig.id, line_no, text, caps))
            total_lines = first_line - 1 + buf.count(b"\n") + (1 if buf and not buf.endswith(b"\n") else 0)
    except OSError as exc:
        raise LogProblem(f"{path}: cannot read: {exc.strerror or exc}") from None
    return total_lines, hits
