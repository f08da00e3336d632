"""One pass over each chunk for every literal needle: the KB signatures' and the hang forensics'.

Every line that matters contains one of a few hundred literal needles; the rest of a log is never
decoded. With hyperscan installed (``pip install 'nccl-doctor[fast]'``) one database finds them
all in a single pass and says which needles each line holds; without it one compiled alternation
of the needles (Python's ``re``) finds the lines, and each consumer checks its own needles on
them. ``NCCL_DOCTOR_NO_HYPERSCAN=1`` forces the pure-Python path.
"""
from __future__ import annotations

import os
import re
import threading

__all__ = ["Needles", "Prefilter", "Span"]

Span = tuple[int, int, "tuple[int, ...] | None"]  # line start, line end, needle ids (None: unknown)


class Needles:
    """Literal needles (each case-sensitive or not), numbered once for every consumer."""

    def __init__(self) -> None:
        self.items: list[tuple[bytes, bool]] = []
        self._ids: dict[tuple[bytes, bool], int] = {}

    def add(self, needle: bytes, caseless: bool = False) -> int:
        """The id of a needle, added on first sight."""
        key = (needle.lower() if caseless else needle, caseless)
        if key not in self._ids:
            self._ids[key] = len(self.items)
            self.items.append(key)
        return self._ids[key]

    def __len__(self) -> int:
        return len(self.items)


class Prefilter:
    """Finds the lines of a chunk that hold any needle, in one pass."""

    def __init__(self, needles: Needles, *, use_hyperscan: bool = True) -> None:
        self.needles = list(needles.items)
        self._local = threading.local()
        self._db = None
        if use_hyperscan and os.environ.get("NCCL_DOCTOR_NO_HYPERSCAN") != "1":
            self._db = _hyperscan_db(self.needles)
        parts = [b"(?i:" + re.escape(n) + b")" if caseless else re.escape(n) for n, caseless in self.needles]
        self._regex = re.compile(b"|".join(parts)) if parts else None

    @property
    def backend(self) -> str:
        return "hyperscan" if self._db is not None else "python-re"

    def spans(self, data: bytes, start: int, end: int) -> list[Span]:
        """Sorted (line start, line end, needle ids) of the lines beginning in ``data[start:end]``
        that contain a needle; ids are None on the pure-Python path (check them yourself)."""
        if start >= end or not self.needles:
            return []
        if self._db is not None:
            return self._hyperscan_spans(data, start, end)
        spans: list[Span] = []
        regex, pos = self._regex, start
        while True:
            hit = regex.search(data, pos, end)
            if hit is None:
                return spans
            ls = data.rfind(b"\n", 0, hit.start()) + 1
            le = data.find(b"\n", hit.end())
            le = len(data) if le < 0 else le
            spans.append((ls, le, None))
            pos = le + 1

    def _hyperscan_spans(self, data: bytes, start: int, end: int) -> list[Span]:
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            import hyperscan

            scratch = self._local.scratch = hyperscan.Scratch(self._db)
        found: list[tuple[int, int]] = []
        add = found.append
        # the body ends at a line end, and no needle spans lines: the body is all there is to scan
        self._db.scan(memoryview(data)[start:end], match_event_handler=lambda nid, _f, to, _fl, _c: add((to, nid)),
                      scratch=scratch)
        if not found:
            return []
        found.sort()
        spans: list[Span] = []
        line_start = line_end = -1
        ids: list[int] = []
        for to, nid in found:
            pos = start + to - 1  # the needle's last byte
            if pos < line_end:
                if nid not in ids:
                    ids.append(nid)
                continue
            if line_start >= 0:
                spans.append((line_start, line_end, tuple(ids)))
            line_start = data.rfind(b"\n", 0, pos) + 1
            line_end = data.find(b"\n", pos)
            line_end = len(data) if line_end < 0 else line_end
            ids = [nid]
        if line_start >= 0:
            spans.append((line_start, line_end, tuple(ids)))
        return spans


def _hyperscan_db(needles: list[tuple[bytes, bool]]):
    try:
        import hyperscan
    except ImportError:
        return None
    try:
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        db.compile(expressions=[re.escape(n) for n, _ in needles], ids=list(range(len(needles))),
                   elements=len(needles), flags=[hyperscan.HS_FLAG_CASELESS if c else 0 for _, c in needles])
    except Exception:  # noqa: BLE001 - cannot compile here (old CPU, odd build): the pure-Python path
        return None
    return db
