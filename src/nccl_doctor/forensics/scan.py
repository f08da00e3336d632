"""Reading one log for hang evidence, from the chunks and candidate lines the ingest reads once.

Candidate lines go to the table of handlers (:mod:`.handlers`), after telling which process
printed each. Progress lines printed once per collective (NCCL's ``opCount`` lines, the
``TORCH_DISTRIBUTED_DEBUG=DETAIL`` fingerprints) are read only in the tail of the log, backwards,
until each process's latest one is known: what a hang analysis needs is where each rank stopped,
not its history. OpCounts that go backwards in one communicator are noted and that communicator is
not used to name anyone.
"""
from __future__ import annotations

import re

from ..logs import Chunk, LineCounter
from ..prefilter import Span
from .evidence import MAX_RANK, MAX_STREAMS, FileScan, Stream, names_from_path, parse_ts
from .handlers import FINGERPRINT, FINGERPRINT_RE, OPCOUNT, OPCOUNT_RE, OPNAME_RE, HandlerTable, Line

__all__ = ["LogForensics", "TAIL_BYTES"]

MAX_LINE = 16 << 10
TAIL_BYTES = 16 << 20  # the end of a log that is read for each process's latest collective
_PROGRESS_MIN = 32  # tail lines read past the last new process/communicator before stopping
_FIRST_WITHIN = 4 << 20  # a log whose last 4 MB hold no progress line of a kind has none worth reading
_PROGRESS_MAX = 200_000  # tail progress lines read at most
_KEYS_MAX = 8192  # (process, communicator) pairs followed in the tail

# Line identity: which process printed a line
_ID_RANKPFX = re.compile(r"^\s*(?:\[(?P<role>[A-Za-z_]*?)(?P<lr>\d+)\]:\s*)?\[rank(?P<rank>\d+)\]:")
_ID_ROLEPFX = re.compile(r"^\s*\[(?P<role>[A-Za-z_]+?)(?P<lr>\d+)\]:")
_ID_NCCL = re.compile(r"(?:^|\s|\]:)(?P<host>[A-Za-z0-9][\w.\-]*):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\]")
_ID_PGRANK = re.compile(r"\[(?:PG ID \S+ PG GUID [^\]]*?|PG \d+(?: \([^)]*\))?) Rank (\d+)\]|\[Rank (\d+)\]")
_ID_SRUN = re.compile(r"^\s*(\d{1,5}): ")
_ID_RAY = re.compile(r"pid=(\d+), ip=([\d.]+)\)")


class LogForensics:
    """Hang evidence from one log, fed the chunks and candidate lines the ingest reads once."""

    def __init__(self, path: str, table: HandlerTable, *, name: str | None = None) -> None:
        self.path, self.table = path, table
        self.base = name or path.rsplit("/", 1)[-1]
        self.name_rank, self.name_local, self.name_host = names_from_path(path)
        self.streams: dict[str, Stream] = {}
        self.scan = FileScan(path=path, streams=[])
        self.pid_rank: dict[tuple[str | None, int], tuple[int, int]] = {}  # (host, pid) -> (nranks, rank)
        self._head_cache: dict[bytes, Stream] = {}  # progress line prefix -> stream
        self._noted: set[str] = set()

    def note(self, text: str) -> None:
        if text not in self._noted and len(self._noted) < 32:
            self._noted.add(text)
            self.scan.notes.append(text)

    # -- who printed a line ----------------------------------------------------------------------
    def stream_for(self, line: str) -> Stream:
        rank = local = pid = host = None
        m = _ID_RANKPFX.match(line)
        if m:
            rank = int(m.group("rank"))
            if m.group("lr") is not None:
                local = int(m.group("lr"))
        else:
            m = _ID_ROLEPFX.match(line)
            if m:
                local = int(m.group("lr"))
        m = _ID_NCCL.search(line[:200])
        if m:
            host, pid = m.group("host"), int(m.group("pid"))
        else:
            m = _ID_RAY.search(line[:200])
            if m:
                pid, host = int(m.group(1)), m.group(2)
        if rank is None:
            m = _ID_PGRANK.search(line[:300])
            if m:
                rank = int(m.group(1) or m.group(2))
            elif local is None and pid is None:
                m = _ID_SRUN.match(line)
                if m:
                    rank = int(m.group(1))
        if rank is not None and rank >= MAX_RANK:
            rank = None
        key = f"r{rank}" if rank is not None else f"{host}:{pid}" if pid is not None else \
            f"l{local}" if local is not None else "file"
        st = self.streams.get(key)
        if st is None:
            if len(self.streams) >= MAX_STREAMS - 1:  # the last place is for the ones over the cap
                self.note(f"more than {MAX_STREAMS} processes in one file: the rest are counted together")
                key, rank, local, host, pid = "over-cap", None, None, None, None
                st = self.streams.get(key)
            if st is None:
                st = self.streams[key] = Stream(key=key, file=self.path, rank=rank, local_rank=local, host=host, pid=pid)
        else:
            if host and not st.host:
                st.host = host
            if pid and not st.pid:
                st.pid = pid
            if local is not None and st.local_rank is None:
                st.local_rank = local
        return st

    # -- reading ---------------------------------------------------------------------------------
    def feed(self, chunk: Chunk, spans: list[Span]) -> None:
        """The candidate lines of one chunk (found by the shared prefilter)."""
        data = chunk.data
        line_of = LineCounter(chunk)
        mine = self.table.rows_by_id
        for start, end, ids in spans:
            if ids is not None and not any(i in mine for i in ids):
                continue  # a line only the KB's signatures want
            raw = data[start:min(end, start + MAX_LINE)]
            text = raw.decode("utf-8", "replace").rstrip("\r")
            rows = self.table.rows(text, ids)
            if not rows:
                continue
            st = self.stream_for(text)
            ts = parse_ts(text[:120])
            if ts is not None:
                st.first_ts = ts if st.first_ts is None else min(st.first_ts, ts)
                st.last_ts = ts if st.last_ts is None else max(st.last_ts, ts)
            ln = Line(text, f"{self.base}:{line_of(start)}", ts, st, chunk, start, end)
            for row in rows:
                m = row.pattern.search(text) if row.pattern is not None else None
                if row.pattern is None or m:
                    row.handle(self, ln, m)
                if m or not row.fall_through:
                    break

    def read_tail(self, tail: list[Chunk]) -> None:
        """The latest progress line of each process and communicator, read backwards from the end."""
        self._tail_opcounts(tail)
        self._tail_fingerprints(tail)

    def _backwards(self, tail: list[Chunk], needle: bytes):
        """(chunk, line start, needle position, line number) of the lines holding ``needle``, newest
        first; none when the last :data:`_FIRST_WITHIN` bytes hold none."""
        searched, found = 0, False
        for chunk in reversed(tail):
            data = chunk.data
            hi, pos_ref, line_ref = chunk.end, chunk.end, chunk.first_line + chunk.lines
            while True:
                lo = chunk.start if found else max(chunk.start, hi - (_FIRST_WITHIN - searched))
                pos = data.rfind(needle, lo, hi)
                if pos < 0:
                    searched += hi - lo
                    if not found and searched >= _FIRST_WITHIN:
                        return
                    break
                found = True
                ls = data.rfind(b"\n", 0, pos) + 1
                line_ref -= data.count(b"\n", ls, pos_ref)
                pos_ref = ls
                yield chunk, ls, pos, line_ref
                hi = ls

    def _tail_opcounts(self, tail: list[Chunk]) -> None:
        seen: dict[tuple[int, str], int] = {}  # (stream, comm) -> newest opCount
        quiet = parsed = 0
        for chunk, ls, pos, line in self._backwards(tail, OPCOUNT):
            data = chunk.data
            m = OPCOUNT_RE.match(data, pos, pos + 512)
            parsed += 1
            if m is None:
                continue
            self.scan.kinds.add("opcount")
            st = self._stream_of_prefix(bytes(data[ls:pos]))
            comm_ptr = m.group(6).decode("ascii", "replace")
            key = (id(st), comm_ptr)
            op = int(m.group(1), 16)
            newer = seen.get(key)
            if newer is not None or len(seen) >= _KEYS_MAX:
                quiet += 1
                if newer is not None and op > newer:  # an older line with a larger count: it goes backwards
                    self._contradiction(st, comm_ptr)
            else:
                quiet = 0
                seen[key] = op
                comm = st.comm(comm_ptr)
                if comm is None:
                    self.note("more than 64 communicators in one process: the rest are not followed")
                    continue
                name = OPNAME_RE.search(data, max(ls, pos - 40), pos)
                nranks = int(m.group(7))
                comm.update({"opCount": op, "op": name.group(1).decode() if name else None, "count": int(m.group(2)),
                             "datatype": int(m.group(3)), "nranks": nranks if nranks < MAX_RANK else None,
                             "op_loc": f"{self.base}:{line}"})
            if quiet > max(_PROGRESS_MIN, 4 * len(seen)) or parsed >= _PROGRESS_MAX:
                break

    def _tail_fingerprints(self, tail: list[Chunk]) -> None:
        seen: dict[int, int] = {}
        quiet = parsed = 0
        for chunk, ls, pos, line in self._backwards(tail, FINGERPRINT):
            data = chunk.data
            parsed += 1
            le = data.find(b"\n", pos)
            text = data[ls:min(le if le >= 0 else len(data), ls + MAX_LINE)].decode("utf-8", "replace").rstrip("\r")
            m = FINGERPRINT_RE.search(text)
            if not m or m.group(1) is None:
                continue
            self.scan.kinds.add("detail")
            st = self.stream_for(text)
            seq = int(m.group(1))
            if id(st) in seen or len(seen) >= _KEYS_MAX:
                quiet += 1
                if id(st) in seen and seq > seen[id(st)]:
                    self.note("collective fingerprints go backwards: sequence numbers are not used")
                    st.pg("0").fp_seq = None
            else:
                quiet = 0
                seen[id(st)] = seq
                pst = st.pg("0")
                pst.fp_seq, pst.fp_op, pst.fp_shape, pst.fp_dtype = seq, m.group(2), m.group(3), m.group(4)
                pst.loc = pst.loc or f"{self.base}:{line}"
                pst.source = pst.source or "detail"
            if quiet > max(_PROGRESS_MIN, 4 * len(seen)) or parsed >= _PROGRESS_MAX:
                break

    def _stream_of_prefix(self, prefix: bytes) -> Stream:
        st = self._head_cache.get(prefix)
        if st is None:
            st = self.stream_for(prefix.decode("utf-8", "replace"))
            if len(self._head_cache) < 4096:
                self._head_cache[prefix] = st
        return st

    def _contradiction(self, st: Stream, comm_ptr: str) -> None:
        comm = st.comms.get(comm_ptr)
        if comm is not None:
            comm["contradictory"] = True
        self.note(f"opCounts go backwards in communicator {comm_ptr} (garbled, or several jobs in one file): "
                  "its positions are not used")

    # -- the end ---------------------------------------------------------------------------------
    def finish(self, *, lines: int = 0, size: int = 0, partial: bool = False) -> FileScan:
        """The file's evidence: NCCL host:pid streams mapped onto ranks, one-process files merged."""
        streams = self.streams
        for key in list(streams):
            st = streams[key]
            if st.rank is None and st.pid is not None:
                hit = self.pid_rank.get((st.host, st.pid))
                if hit is not None:
                    rkey = f"r{hit[1]}"
                    if rkey in streams and rkey != key:
                        streams[rkey].absorb(st)
                        del streams[key]
                    else:
                        st.rank = hit[1]
                        streams[rkey] = streams.pop(key)
                        st.key = rkey
        ranks = {s.rank for s in streams.values() if s.rank is not None}
        pids = {(s.host, s.pid) for s in streams.values() if s.pid is not None}
        locals_ = {s.local_rank for s in streams.values() if s.local_rank is not None}
        if len(streams) > 1 and len(ranks) <= 1 and len(pids) <= 1 and len(locals_) <= 1:
            # one process wrote this file: PyTorch lines ([rankN]) and NCCL lines (host:pid) are the same rank
            items = sorted(streams.values(), key=lambda s: s.rank is None)
            head = items[0]
            for other in items[1:]:
                head.absorb(other)
            streams = {head.key: head}
        if len(streams) == 1:
            only = next(iter(streams.values()))
            if only.rank is None:
                only.rank = self.name_rank
            if only.local_rank is None:
                only.local_rank = self.name_local
        for st in streams.values():
            if st.host is None and self.name_host:
                st.host = self.name_host
            for k in [k for k in st.pgs if k.startswith("?")]:  # watchdog records whose PG line never came
                st.pg("0").merge(st.pgs.pop(k))
        self.scan.streams = list(streams.values())
        self.scan.lines, self.scan.bytes, self.scan.partial = lines, size, partial
        return self.scan
