"""The one way logs enter a session: paths, directories, globs, stdin and text, each read once.

    from nccl_doctor.ingest import ingest_paths, ingest_text
    result = ingest_paths(session, ["logs/", "dumps/nccl_trace_rank_*"])   # the CLI, the TUI
    result = ingest_text(session, uploaded_text, name="rank0.log")           # HTTP, bots, pastes
    session.report()["hang"]                                                 # the hang analysis

Every source goes through one reader (:mod:`nccl_doctor.logs`): its chunks go through one prefilter
holding every needle (the KB's signatures' and the hang forensics'), then to the KB's signature
scanner and to the hang forensics; Flight Recorder dumps go to the forensics only. The result
says which files were read, which were skipped and why (one line each), whether the scan was
partial (Ctrl-C, a stream that went quiet) and what the analysis could not use; the session gets
the signature hits, the facts the hang analysis found and the ``hang`` report itself.
"""
from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .engine.matching import SignatureHit
from .errors import DumpProblem, InputTooLarge, LogProblem
from .forensics.analyze import HangReport, analyze
from .forensics.evidence import FileScan
from .forensics.frdump import MAX_DUMP_BYTES, parse_dump, scan_dump
from .forensics.handlers import HandlerTable
from .forensics.scan import TAIL_BYTES, LogForensics
from .log_paths import Skipped, expand, short_names
from .logs import (BIG_READ_BYTES, CHUNK_BYTES, Source, chunks, expect_big_reads, open_source, stdin_is_big,
                   stdin_source, text_source)
from .prefilter import Needles, Prefilter
from .scanner import SignatureScanner, SignatureSpec, SignatureTable

__all__ = ["ingest_paths", "ingest_text", "IngestResult", "SourceResult", "Skipped", "Progress", "ReadingPlan",
           "plan_for", "read_source", "open_and_read", "read_paths", "read_file", "forensics_of_paths",
           "PARALLEL_MIN_BYTES"]

PARALLEL_MIN_BYTES = 64 << 20  # below this, worker processes cost more than they save
TEXT_CHUNK_BYTES = 1 << 20  # text read against a deadline: checked at least this often


@dataclass
class Progress:
    """How far an ingest has got, for a progress line."""

    done_bytes: int
    total_bytes: int | None
    files_done: int
    files_total: int
    seconds: float
    current: str = ""

    @property
    def rate(self) -> float:
        return self.done_bytes / self.seconds if self.seconds > 0 else 0.0

    @property
    def eta(self) -> float | None:
        if not self.total_bytes or not self.rate:
            return None
        return max(0.0, (self.total_bytes - self.done_bytes) / self.rate)


@dataclass
class IngestResult:
    """What one ingest read, skipped and found."""

    files: list[str] = field(default_factory=list)  # sources read, as evidence names them
    skipped: list[Skipped] = field(default_factory=list)  # one line each: path and reason
    partial: bool = False  # stopped early: Ctrl-C, or a stream that went quiet
    partial_reasons: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # what the hang analysis could not use
    hang: dict | None = None  # the "hang" object (also in session.report())
    hang_lines: list[str] = field(default_factory=list)  # the hang analysis in sentences
    lines: int = 0
    bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the CLI's ``ingest`` object)."""
        return {"files": list(self.files), "skipped": [s.to_dict() for s in self.skipped], "partial": self.partial,
                "partial_reasons": list(self.partial_reasons), "problems": list(self.problems),
                "lines": self.lines, "bytes": self.bytes}


@dataclass
class SourceResult:
    """What reading one source gave (plain data, so worker processes can send it back)."""

    name: str
    path: str | None = None
    kind: str = "log"
    lines: int = 0
    bytes: int = 0
    hits: list[SignatureHit] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    scan: FileScan | None = None
    skipped: str | None = None  # why the source could not be used
    stopped: str | None = None  # why reading stopped before the end
    interrupted: bool = False


# ----------------------------------------------------------------------------------- the plan
class ReadingPlan:
    """Everything needed to read logs for one KB: the signature table, the forensics' handler
    table and the prefilter holding both sets of needles. Built once per KB and process."""

    def __init__(self, specs: list[SignatureSpec], regexes: dict | None = None, *, use_hyperscan: bool = True):
        self.specs = specs
        needles = Needles()
        self.signatures = SignatureTable(specs, regexes)
        self.signatures.register(needles)
        self.handlers = HandlerTable(needles)
        self.prefilter = Prefilter(needles, use_hyperscan=use_hyperscan)
        self.read_ahead = True  # a thread reads the next chunk while this one is scanned


_PLANS: dict[int, tuple[Any, ReadingPlan]] = {}
_PLANS_LOCK = threading.Lock()


def plan_for(doctor: Any) -> ReadingPlan:
    """The reading plan for a Doctor's KB (built once; the few most recent KBs are kept)."""
    ckb = doctor.compiled
    with _PLANS_LOCK:
        found = _PLANS.get(id(ckb))
        if found is None or found[0] is not ckb:
            table = SignatureTable.from_kb(ckb)
            found = _PLANS[id(ckb)] = (ckb, ReadingPlan(table.specs, ckb.signature_regexes))
            while len(_PLANS) > 8:
                del _PLANS[next(iter(_PLANS))]
        return found[1]


# --------------------------------------------------------------------------- reading a source
def read_source(plan: ReadingPlan, source: Source, *, on_bytes: Callable[[int], None] | None = None,
                chunk_bytes: int = CHUNK_BYTES, deadline: float | None = None) -> SourceResult:
    """Read one opened source to its end (or to Ctrl-C): signature hits and hang evidence.
    Past ``deadline`` (``time.monotonic()``) it stops with :class:`InputTooLarge`."""
    result = SourceResult(name=source.name, kind=source.kind)
    try:
        if source.kind == "dump":
            return _read_dump(source, result)
        return _read_log(plan, source, result, on_bytes, chunk_bytes, deadline)
    finally:
        source.close()


def _read_dump(source: Source, result: SourceResult) -> SourceResult:
    raw = source.head + source.read(MAX_DUMP_BYTES + 1 - len(source.head))
    if len(raw) > MAX_DUMP_BYTES:
        result.skipped = f"larger than any Flight Recorder dump ({MAX_DUMP_BYTES >> 20} MB limit)"
        return result
    try:
        result.scan = scan_dump(parse_dump(raw, source.name), source.path or source.name)
    except DumpProblem as exc:
        result.skipped = str(exc).removeprefix(f"{source.name}: ")
        return result
    result.bytes = len(raw)
    result.scan.bytes = len(raw)
    return result


def _read_log(plan: ReadingPlan, source: Source, result: SourceResult, on_bytes: Callable[[int], None] | None,
              chunk_bytes: int, deadline: float | None = None) -> SourceResult:
    signatures = SignatureScanner(plan.signatures)
    forensics = LogForensics(source.path or source.name, plan.handlers, name=source.name)
    tail: deque = deque()
    tail_bytes = lines = done = 0
    spans_of = plan.prefilter.spans
    try:
        kept = TAIL_BYTES // chunk_bytes + 2  # the tail below holds at most this many chunks
        for chunk in chunks(source, chunk_bytes=chunk_bytes, keep=kept, buffers=_thread_buffers(),
                            read_ahead=plan.read_ahead):
            spans = spans_of(chunk.data, chunk.start, chunk.end)
            if spans:
                signatures.feed(chunk, spans)
                forensics.feed(chunk, spans)
            tail.append(chunk)
            tail_bytes += chunk.end - chunk.start
            while len(tail) > 1 and tail_bytes - (tail[0].end - tail[0].start) >= TAIL_BYTES:
                tail_bytes -= tail[0].end - tail[0].start
                tail.popleft()
            lines = chunk.first_line - 1 + chunk.lines
            if chunk.end == len(chunk.data) and chunk.end > chunk.start and not chunk.data.endswith(b"\n"):
                lines += 1
            done = chunk.offset + chunk.end - chunk.start
            if on_bytes is not None:
                on_bytes(source.position())
            if deadline is not None and time.monotonic() > deadline:
                raise InputTooLarge("reading this log took longer than the time allowed; send the part around "
                                    "the first error")
    except KeyboardInterrupt:
        result.interrupted = True
        result.stopped = "interrupted"
    forensics.read_tail(list(tail))
    result.stopped = result.stopped or source.stopped
    result.lines, result.bytes = lines, done
    result.hits, result.counts = signatures.hits(), dict(signatures.counts)
    result.scan = forensics.finish(lines=lines, size=done, partial=result.stopped is not None)
    return result


_BUFFERS = threading.local()


def _thread_buffers() -> list[bytearray]:
    """This thread's read buffers, reused from one source to the next (sources are read one after
    another in a thread, each finished before the next starts)."""
    found = getattr(_BUFFERS, "ring", None)
    if found is None:
        found = _BUFFERS.ring = []
    return found


def open_and_read(plan: ReadingPlan, path: str, name: str, on_bytes: Callable[[int], None] | None = None) -> SourceResult:
    """Open, sniff and read one path (``-`` for stdin); what cannot be used comes back skipped."""
    try:
        source = stdin_source() if path == "-" else open_source(path)
    except LogProblem as exc:
        return SourceResult(name=name, path=path, skipped=str(exc).removeprefix(f"{path}: "))
    source.name = name
    try:
        result = read_source(plan, source, on_bytes=on_bytes)
    except LogProblem as exc:
        return SourceResult(name=name, path=path, skipped=str(exc).removeprefix(f"{name}: "))
    result.path = path
    return result


# ------------------------------------------------------------------------------ many sources
def read_paths(plan: ReadingPlan, paths: list[str], *, progress: Callable[[Progress], None] | None = None,
               jobs: int | None = None) -> tuple[list[SourceResult], bool]:
    """Read every file (in worker processes when there is enough to share); (results, interrupted)."""
    sizes = {p: _size(p) for p in paths}
    names = short_names(paths)
    total = sum(s for s in sizes.values() if s) or None
    jobs = jobs or os.cpu_count() or 1
    if jobs > 1 and len(paths) > 1 and (total or 0) >= PARALLEL_MIN_BYTES and "-" not in paths:
        from .workers import read_in_workers

        return read_in_workers(plan, paths, names, sizes, jobs=min(jobs, len(paths)), progress=progress)
    results: list[SourceResult] = []
    start, finished = time.monotonic(), 0
    for index, path in enumerate(paths):
        def on_bytes(pos: int, index: int = index, path: str = path) -> None:
            if progress is not None:
                progress(Progress(finished + pos, total, index, len(paths), time.monotonic() - start, path))

        result = open_and_read(plan, path, names[path], on_bytes)
        results.append(result)
        finished += sizes.get(path) or result.bytes
        if result.interrupted:
            return results, True
    return results, False


def _big_input(paths: list[str]) -> bool:
    """Whether these sources are big enough for counting with numpy (64 MB, or a pipe on stdin
    that its writer has already filled)."""
    return sum(_size(p) or 0 for p in paths) >= BIG_READ_BYTES or ("-" in paths and stdin_is_big())


def _size(path: str) -> int | None:
    if path == "-":
        return None
    try:
        return os.path.getsize(path)
    except OSError:
        return None


# ----------------------------------------------------------------------------------- sessions
def ingest_paths(session: Any, args: Iterable[str], *, progress: Callable[[Progress], None] | None = None,
                 jobs: int | None = None) -> IngestResult:
    """Read log paths, directories, globs and ``-`` (stdin) into a session.

    Raises :class:`LogProblem` for an argument that names nothing and when no source at all
    could be used (the message says why); files that cannot be used are skipped with a reason
    in the result. Ctrl-C stops the reading at once: the result is then partial."""
    expansion = expand(list(args))
    if _big_input(expansion.files):
        expect_big_reads(wait=False)  # numpy loads while the plan is built, not mid-read
    plan = plan_for(session.doctor)
    results, interrupted = read_paths(plan, expansion.files, progress=progress, jobs=jobs)
    result = _apply(session, results, expansion.skipped, expansion.notes)
    if interrupted:
        result.partial = True
        left = len(expansion.files) - len(results)
        result.partial_reasons.insert(0, "interrupted (Ctrl-C)" + (f"; {left} file(s) not read" if left > 0 else ""))
    if not result.files and not interrupted:
        first = result.skipped[0] if result.skipped else None
        more = f" (and {len(result.skipped) - 1} more skipped)" if len(result.skipped) > 1 else ""
        raise LogProblem(f"{first.path}: {first.reason}{more}" if first else "no log to read")
    return result


def ingest_text(session: Any, text: str | bytes, name: str = "log", *, deadline: float | None = None) -> IngestResult:
    """Log text already in memory (an upload, a paste, a bot's attachment) into a session:
    the same reader, signatures and hang forensics as files. Past ``deadline``
    (``time.monotonic()``) it raises :class:`InputTooLarge` and the session is left as it was."""
    plan = plan_for(session.doctor)
    result = read_source(plan, text_source(text, name), deadline=deadline,
                         chunk_bytes=CHUNK_BYTES if deadline is None else TEXT_CHUNK_BYTES)
    return _apply(session, [result], [], [])


def _apply(session: Any, results: list[SourceResult], skipped: list[Skipped], notes: list[str]) -> IngestResult:
    out = IngestResult(skipped=list(skipped), problems=list(notes))
    scans: list[FileScan] = []
    for r in results:
        if r.skipped is not None:
            out.skipped.append(Skipped(r.path or r.name, r.skipped))
            continue
        out.files.append(r.name if r.path in (None, "-") else r.path)
        out.lines += r.lines
        out.bytes += r.bytes
        if r.stopped and not r.interrupted:
            out.partial = True
            out.partial_reasons.append(f"{r.path or r.name}: {r.stopped}")
        if r.kind == "log":
            session.add_hits(r.name, r.lines, r.hits, r.counts)
        if r.scan is not None:
            scans.append(r.scan)
    if scans or session.hang_evidence:
        report = _hang_into_session(session, scans, out)
        out.hang, out.hang_lines = report.to_dict(), report.summary_lines()
        out.problems += report.problems + report.notes
    return out


MAX_EVIDENCE_FILES = 4096  # sources whose hang evidence a session keeps (the newest)


def _hang_into_session(session: Any, scans: list[FileScan], out: IngestResult) -> HangReport:
    """Analyse these sources together with the ones the session read before (a log read twice
    merges with itself) and hand the session the report and its facts."""
    kept: list[FileScan] = []
    for plain in session.hang_evidence:
        try:
            kept.append(FileScan.from_plain(plain))
        except (KeyError, TypeError, ValueError, AttributeError):
            out.problems.append("the hang evidence kept from earlier logs is damaged: analysing these logs alone")
            kept = []
            break
    every = (kept + scans)[-MAX_EVIDENCE_FILES:]
    try:
        report = analyze(every)
    except (TypeError, ValueError, KeyError, AttributeError):
        if not kept:
            raise  # the logs just read alone: a bug, not bad input
        # evidence carried in a client's state that does not hold up: analyse these logs alone
        out.problems.append("the hang evidence kept from earlier logs is damaged: analysing these logs alone")
        every = scans[-MAX_EVIDENCE_FILES:]
        report = analyze(every)
    hang = report.to_dict()
    session.set_hang(hang, facts=report.facts() if hang is not None else {},
                     evidence=[scan.to_plain() for scan in every])
    return report


def forensics_of_paths(paths: list[str], *, jobs: int | None = None) -> HangReport:
    """The hang analysis alone of some paths (files that cannot be used become its problems)."""
    expansion = expand(paths)
    plan = ReadingPlan([])
    results, _ = read_paths(plan, expansion.files, jobs=jobs)
    report = analyze([r.scan for r in results if r.scan is not None])
    report.problems[:0] = [str(s) for s in expansion.skipped] + [f"{r.path}: {r.skipped}" for r in results if r.skipped]
    return report


def read_file(path: str, *, doctor: Any = None, chunk_bytes: int = CHUNK_BYTES,
              use_hyperscan: bool = True) -> SourceResult:
    """Read one file alone (tests, benchmarks): its signature hits with ``doctor``'s KB, and its
    hang evidence. Raises :class:`LogProblem` when it cannot be used."""
    if doctor is None:
        plan = ReadingPlan([], use_hyperscan=use_hyperscan)
    elif use_hyperscan:
        plan = plan_for(doctor)
    else:
        plan = ReadingPlan(SignatureTable.from_kb(doctor.compiled).specs, doctor.compiled.signature_regexes, use_hyperscan=False)
    result = read_source(plan, open_source(path), chunk_bytes=chunk_bytes)
    if result.skipped:
        raise LogProblem(f"{path}: {result.skipped}")
    return result
