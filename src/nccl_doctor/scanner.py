"""The KB's log signatures over chunks of a log: Python regexes only on lines holding a needle.

A :class:`SignatureTable` is the KB's signatures as plain, picklable data (so worker processes can
rebuild it) plus their regexes. A :class:`SignatureScanner` takes the chunks one reader hands out
and the prefilter's candidate lines, and keeps the first hit of each signature and how many lines
each matched; only first hits become objects, so memory stays flat on any log.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .engine.compiled import CompiledKB
from .engine.matching import LAST_ERROR, SignatureHit, clean_line, last_error_line
from .logs import MAX_LINE_BYTES, Chunk, LineCounter
from .prefilter import Needles, Span

__all__ = ["SignatureSpec", "SignatureTable", "SignatureScanner"]

_LAST_ERROR = LAST_ERROR.encode()


@dataclass(frozen=True)
class SignatureSpec:
    """One KB signature as plain data."""

    id: str
    pattern: str
    needles: tuple[bytes, ...]
    caseless: bool


class SignatureTable:
    """The KB's signatures, their regexes, and which needle ids lead to which signatures."""

    def __init__(self, specs: Iterable[SignatureSpec], regexes: dict | None = None) -> None:
        self.specs = list(specs)
        self._regexes = regexes  # the KB's own lazily compiled regexes, when in the same process
        self._compiled: dict[str, Any] = {}  # signature id -> its compiled (RE2) pattern
        self._str_only: set[str] = set()  # patterns that refuse bytes (not RE2)
        self.always = [s for s in self.specs if not s.needles]  # run on every line (none in the packaged KB)
        self.by_needle: dict[int, list[SignatureSpec]] = defaultdict(list)
        self.last_error: list[SignatureSpec] = []
        self.needle_text: dict[int, tuple[bytes, bool]] = {}

    @classmethod
    def from_kb(cls, ckb: CompiledKB) -> "SignatureTable":
        specs = [SignatureSpec(s.id, s.pattern, tuple(n.encode() for n in s.needles), s.ignore_case)
                 for s in ckb.kb.signatures.values()]
        return cls(specs, ckb.signature_regexes)

    def register(self, needles: Needles) -> None:
        """Number this table's needles in a shared set (call once, before scanning)."""
        for spec in self.specs:
            for needle in spec.needles:
                nid = needles.add(needle, spec.caseless)
                self.needle_text[nid] = needles.items[nid]
                if spec not in self.by_needle[nid]:
                    self.by_needle[nid].append(spec)
                if needle == _LAST_ERROR and spec not in self.last_error:
                    self.last_error.append(spec)

    def regex(self, spec: SignatureSpec):
        """The signature's compiled pattern: the KB's own (RE2), or compiled the same way here."""
        found = self._compiled.get(spec.id)
        if found is None:
            if self._regexes is not None:
                found = self._regexes[spec.id]
            else:
                from .kb.patterns import compile_pattern

                found = compile_pattern(spec.pattern, ignore_case=spec.caseless)
            self._compiled[spec.id] = found
        return found

    def search(self, spec: SignatureSpec, text: str, encoded: bytes):
        """The signature's first match in a line, or None. RE2 is searched on the line's UTF-8
        bytes (the same matches, three times faster through its Python wrapper than on ``str``);
        a pattern that takes only ``str`` gets the text."""
        regex = self.regex(spec)
        if spec.id in self._str_only:
            return regex.search(text)
        try:
            return regex.search(encoded)
        except TypeError:
            self._str_only.add(spec.id)
            return regex.search(text)

    def candidates(self, line: bytes, ids: tuple[int, ...] | None) -> list[SignatureSpec]:
        """The signatures worth trying on a line that the prefilter picked."""
        if ids is None:  # the pure-Python prefilter does not say which needles: look
            lowered = None
            found: list[SignatureSpec] = []
            for nid, (needle, caseless) in self.needle_text.items():
                haystack = (lowered := lowered if lowered is not None else line.lower()) if caseless else line
                if needle in haystack:
                    found.extend(s for s in self.by_needle[nid] if s not in found)
            return found + self.always
        if len(ids) == 1 and not self.always:
            return self.by_needle.get(ids[0], [])
        out: dict[str, SignatureSpec] = {}
        for nid in ids:
            for spec in self.by_needle.get(nid, ()):
                out.setdefault(spec.id, spec)
        return list(out.values()) + self.always


class SignatureScanner:
    """First hit and line count of every signature over one source's chunks."""

    def __init__(self, table: SignatureTable) -> None:
        self.table = table
        self.first: dict[str, SignatureHit] = {}
        self.counts: dict[str, int] = {}

    def feed(self, chunk: Chunk, spans: list[Span]) -> None:
        """Match the candidate lines of one chunk (spans from the shared prefilter)."""
        table, data = self.table, chunk.data
        if table.always:  # a needle-less signature must see every line
            spans = _every_line(chunk)
        line_of = LineCounter(chunk)
        for start, end, ids in spans:
            if ids is not None and not table.always and not any(i in table.by_needle for i in ids):
                continue
            raw = data[start:min(end, start + MAX_LINE_BYTES)]
            sigs = table.candidates(raw, ids)
            text = encoded = None
            for spec in sigs:
                if text is None:
                    text = clean_line(raw.decode("utf-8", "replace"))
                    encoded = text.encode("utf-8")
                found = table.search(spec, text, encoded)
                if found:
                    self._hit(spec, line_of, start, text, found)
            if sigs and raw.rstrip().endswith(_LAST_ERROR) and table.last_error:
                self._continue_error(chunk, end, line_of)

    def _hit(self, spec: SignatureSpec, line_of: LineCounter, pos: int, text: str, found) -> None:
        self.counts[spec.id] = self.counts.get(spec.id, 0) + 1
        if spec.id not in self.first:
            caps = {k: v.decode("utf-8", "replace") if isinstance(v, bytes) else v
                    for k, v in found.groupdict().items() if v is not None}
            self.first[spec.id] = SignatureHit(spec.id, line_of(pos), text, caps)

    def _continue_error(self, chunk: Chunk, end: int, line_of: LineCounter) -> None:
        """A bare "Last error:" line: the next line (read from the chunk's context if need be)
        is its text, for the signatures that read it."""
        data, start = chunk.data, end + 1
        if start >= len(data):
            return
        stop = data.find(b"\n", start)
        nxt = clean_line(data[start:len(data) if stop < 0 else stop][:MAX_LINE_BYTES].decode("utf-8", "replace"))
        if not nxt.strip():
            return
        joined = last_error_line(nxt)
        encoded = joined.encode("utf-8")
        for spec in self.table.last_error:
            found = self.table.search(spec, joined, encoded)
            if found:
                self._hit(spec, line_of, start, joined, found)

    def hits(self) -> list[SignatureHit]:
        """The first hit of each signature, in log order."""
        return sorted(self.first.values(), key=lambda h: h.line_no)


def _every_line(chunk: Chunk) -> list[Span]:
    spans: list[Span] = []
    data, pos = chunk.data, chunk.start
    while pos < chunk.end:
        end = data.find(b"\n", pos, chunk.end)
        end = chunk.end if end < 0 else end
        spans.append((pos, end, None))
        pos = end + 1
    return spans
