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
from .engine.matching import LAST_ERROR, SignatureHit, clean_line, last_error_line
from .logs import CHUNK_BYTES, MAX_LINE_BYTES, LogProblem, looks_binary

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
                entry = self.by_needle[needle.lower() if sig.caseless else needle]
                if sig not in entry:
                    entry.append(sig)
        self.needles = list(self.by_needle)
        caseless = {n for s in self.sigs if s.caseless for n in s.needles}
        self._hs = _hyperscan_db(self.needles, caseless) if use_hyperscan else None
        parts = []
        for needle in self.needles:
            caseless = any(s.caseless for s in self.by_needle[needle])
            parts.append(b"(?i:" + re.escape(needle) + b")" if caseless else re.escape(needle))
        self._regex = re.compile(b"|".join(parts)) if parts else None

    def candidate_spans(self, buf: bytes) -> list[tuple[int, int, tuple[int, ...] | None]]:
        """Sorted (start, end, needle ids) of whole lines in ``buf`` that contain a needle.

        The needle ids are known with hyperscan; None means "test every needle"."""
        if self.always:
            spans, start = [], 0
            while start < len(buf):
                end = buf.find(b"\n", start)
                end = len(buf) if end < 0 else end
                spans.append((start, end, None))
                start = end + 1
            return spans
        if self._hs is not None:
            found: list[tuple[int, int]] = []
            self._hs.scan(buf, match_event_handler=lambda nid, _f, to, _fl, _ctx: found.append((to, nid)))
            found.sort()
            return _lines_at(buf, found)
        spans = []
        regex = self._regex
        if regex is None:
            return spans
        pos = 0
        while True:
            hit = regex.search(buf, pos)
            if not hit:
                return spans
            start = buf.rfind(b"\n", 0, hit.start()) + 1
            end = buf.find(b"\n", hit.end())
            end = len(buf) if end < 0 else end
            spans.append((start, end, None))
            pos = end + 1

    def signatures_for(self, line: bytes, needle_ids: tuple[int, ...] | None = None) -> list[_Sig]:
        """The signatures worth trying on a candidate line."""
        if self.always:
            return self.sigs + self.always
        if needle_ids is not None:
            if len(needle_ids) == 1:
                return self.by_needle[self.needles[needle_ids[0]]]
            out: dict[str, _Sig] = {}
            for nid in needle_ids:
                for sig in self.by_needle[self.needles[nid]]:
                    out.setdefault(sig.id, sig)
            return list(out.values())
        lowered = None
        out_list: list[_Sig] = []
        seen: set[str] = set()
        for needle, sigs in self.by_needle.items():
            if needle in line or (any(s.caseless for s in sigs) and needle in (lowered := lowered or line.lower())):
                for sig in sigs:
                    if sig.id not in seen:
                        seen.add(sig.id)
                        out_list.append(sig)
        return out_list


def _lines_at(buf: bytes, found: list[tuple[int, int]]) -> list[tuple[int, int, tuple[int, ...]]]:
    """Group (match end, needle id) pairs into the lines that hold them."""
    spans: list[tuple[int, int, tuple[int, ...]]] = []
    start = end = -1
    ids: list[int] = []
    for pos, nid in found:
        if pos - 1 <= end and start >= 0:
            if nid not in ids:
                ids.append(nid)
            continue
        if start >= 0:
            spans.append((start, end, tuple(ids)))
        start = buf.rfind(b"\n", 0, max(pos - 1, 0)) + 1 if pos else 0
        end = buf.find(b"\n", pos - 1 if pos else 0)
        end = len(buf) if end < 0 else end
        ids = [nid]
    if start >= 0:
        spans.append((start, end, tuple(ids)))
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
        if looks_binary(head):
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


_LAST_ERROR = LAST_ERROR.encode()


def _continue_error(line_filter: "LineFilter", buf: bytes, end: int, line_no: int,
                    first: dict[str, SignatureHit], counts: dict[str, int]) -> None:
    """A bare "Last error:" line: read the next line (within this chunk) as its text."""
    start = end + 1
    if start >= len(buf):
        return
    stop = buf.find(b"\n", start)
    nxt = clean_line(buf[start:len(buf) if stop < 0 else stop][:MAX_LINE_BYTES].decode("utf-8", "replace"))
    if not nxt.strip():
        return
    joined = last_error_line(nxt)
    for sig in line_filter.by_needle.get(_LAST_ERROR, ()):
        found = sig.regex.search(joined)
        if found:
            counts[sig.id] = counts.get(sig.id, 0) + 1
            if sig.id not in first:
                first[sig.id] = SignatureHit(sig.id, line_no, joined, {k: v for k, v in found.groupdict().items() if v is not None})


def scan_file(ckb: CompiledKB, path: str, line_filter: LineFilter | None = None
              ) -> tuple[int, list[SignatureHit], dict[str, int]]:
    """Scan one file with every KB signature.

    Returns the number of lines, the first hit of each signature (in file order) and how many
    lines each signature matched. Only first hits become objects, so memory stays flat however
    many healthy INFO lines an informational signature matches.
    """
    line_filter = line_filter or LineFilter(ckb)
    first: dict[str, SignatureHit] = {}
    counts: dict[str, int] = {}
    total_lines = 0
    try:
        for buf, first_line in _chunks(path):
            line_no, last = first_line, 0
            for start, end, needle_ids in line_filter.candidate_spans(buf):
                line_no += buf.count(b"\n", last, start)
                last = start
                raw = buf[start:end][:MAX_LINE_BYTES]
                text = None
                for sig in line_filter.signatures_for(raw, needle_ids):
                    if text is None:
                        text = clean_line(raw.decode("utf-8", "replace"))
                    found = sig.regex.search(text)
                    if not found:
                        continue
                    counts[sig.id] = counts.get(sig.id, 0) + 1
                    if sig.id not in first:
                        caps = {k: v for k, v in found.groupdict().items() if v is not None}
                        first[sig.id] = SignatureHit(sig.id, line_no, text, caps)
                if raw.rstrip().endswith(_LAST_ERROR):
                    _continue_error(line_filter, buf, end, line_no + 1, first, counts)
            total_lines = first_line - 1 + buf.count(b"\n") + (1 if buf and not buf.endswith(b"\n") else 0)
    except OSError as exc:
        raise LogProblem(f"{path}: cannot read: {exc.strerror or exc}") from None
    hits = sorted(first.values(), key=lambda h: h.line_no)
    return total_lines, hits, counts
