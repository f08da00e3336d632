"""Reading one log for hang evidence: a table of line handlers fed by the shared prefilter.

Each handler is a row (needle, pattern, handler): the prefilter finds the lines holding a needle in
one pass over each chunk, the row's regex reads them, its handler updates the state of the process
that printed the line. Progress lines printed once per collective (NCCL's ``opCount`` lines, the
``TORCH_DISTRIBUTED_DEBUG=DETAIL`` fingerprints) are read only in the tail of the log, backwards,
until each process's latest one is known: what a hang analysis needs is where each rank stopped,
not its history. OpCounts that go backwards in one communicator are noted and that communicator is
not used to name anyone.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ..logs import Chunk
from ..prefilter import Needles, Span
from .evidence import (MAX_EVENTS, MAX_RANK, MAX_RECORDS, MAX_STREAMS, Event, FileScan, PGState, Stream,
                       names_from_path, parse_ts)

__all__ = ["LogForensics", "Handler", "HANDLERS", "PROGRESS", "TAIL_BYTES"]

MAX_LINE = 16 << 10
TAIL_BYTES = 16 << 20  # the end of a log that is read for each process's latest collective
_PROGRESS_MIN = 256  # tail lines read past the last new process/communicator before stopping
_PROGRESS_MAX = 200_000  # tail progress lines read at most
_KEYS_MAX = 8192  # (process, communicator) pairs followed in the tail

# Line identity: which process printed a line
_ID_RANKPFX = re.compile(r"^\s*(?:\[(?P<role>[A-Za-z_]*?)(?P<lr>\d+)\]:\s*)?\[rank(?P<rank>\d+)\]:")
_ID_ROLEPFX = re.compile(r"^\s*\[(?P<role>[A-Za-z_]+?)(?P<lr>\d+)\]:")
_ID_NCCL = re.compile(r"(?:^|\s|\]:)(?P<host>[A-Za-z0-9][\w.\-]*):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\]")
_ID_PGRANK = re.compile(r"\[(?:PG ID \S+ PG GUID [^\]]*?|PG \d+(?: \([^)]*\))?) Rank (\d+)\]|\[Rank (\d+)\]")
_ID_SRUN = re.compile(r"^\s*(\d{1,5}): ")
_ID_RAY = re.compile(r"pid=(\d+), ip=([\d.]+)\)")


_WATCHDOG = re.compile(
    r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(\d+), OpType=(\w+)"
    r"(?:, NumelIn=(-?\d+), NumelOut=(-?\d+))?, Timeout\(ms\)=(\d+)\)(?: ran for (\d+) milliseconds)?")
_AT_WORK = re.compile(r"(?:at (?:NCCL )?work(?: sequence id)?:|Timeout at NCCL work:)\s*(\d+)")
_ENQ = re.compile(r"[Ll]ast enqueued (?:NCCL )?work:? (-?\d+)")
_COMP = re.compile(r"last completed(?: NCCL)?(?: work)?:? (-?\d+)")
_STARTED = re.compile(r"last started(?: NCCL)?(?: work)?:? (-?\d+)")
_DUMP_FROM = re.compile(r"collective timeout from\s+rank (\d+)")
_PG = re.compile(r"\[PG ID (\S+) PG GUID \S+?(?:\(([^)]*)\))? Rank \d+\]|\[PG (\d+) (?:\(([^)]*)\) )?Rank \d+\]")
_FP = re.compile(r"CollectiveFingerPrint\((?:SequenceNumber=(\d+), )?OpType=(\w+)(?:, TensorShape=\[([^\]]*)\])?"
                 r"(?:, TensorDtypes=(\w+))?")
_MISMATCH = re.compile(r"Detected mismatch between collectives on ranks\. Rank (\d+) is running collective: (.*?), but Rank (\d+) is running collective: (.*)")
_MISMATCH_OLD = re.compile(r"Rank (\d+) is running (?:inconsistent )?collective: (CollectiveFingerPrint\(.*)")
_BARRIER = re.compile(r"Ranks? ([\d, ]+) failed to pass monitoredBarrier")
_LAGGING = re.compile(r"ranks \[([\d, ]+)\] are the lagging ranks")
_JOINED_NOT_FINISHED = re.compile(r"\[([\d, ]+)\] joined but didn't finish collective #(\d+)")
_NOT_JOINED = re.compile(r"\[([\d, ]+)\] finished collective #(\d+), but didn't join collective #(\d+)")
_STACK_FRAME = re.compile(r"^\s*(?:\[\w*\d+\]:\s*)*#(\d+) (.+?) from (.+):(\d+)\s*$")
_OPCOUNT = re.compile(rb"opCount ([0-9a-f]+) sendbuff \S+ recvbuff \S+ count (\d+) datatype (\d+) op (\d+) root (-?\d+) comm (\S+) \[nranks=(\d+)\]")
_OPNAME = re.compile(rb"(\w+): $")
_FP_SEQ = re.compile(rb"CollectiveFingerPrint\(SequenceNumber=(\d+)")
_COMM = re.compile(r"comm (0x[0-9a-f]+|\(nil\)) rank (\d+) nranks (\d+) cudaDev (\d+)(?: nvmlDev \d+)? busId ([0-9a-f]+)"
                   r"(?: commId (0x[0-9a-f]+))?.*? - (Init|Abort|Destroy) COMPLETE")
_ELASTIC_LINE = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+) \(pid: (\d+)\)")
_ELASTIC_EXIT = re.compile(r"exitcode\s*: (-?\d+) \(pid: (\d+)\)(?:\s*\((SIG\w+)\))?")
_ELASTIC_FIELD = re.compile(r"^\s*(time|host|rank|traceback)\s*: (.*)$")
_XID = re.compile(r"NVRM: Xid \(([^)]*)\): (\d+)(?:, pid=([^,]*))?(?:, name=([^,]*))?(?:, (.*))?")
_EXC = re.compile(r"(?:^|[\s:\]])((?:[A-Za-z_][\w]*\.)*(?:[A-Z]\w*(?:Error|Exception)|Error)): (.*)$")
_NCCL_WARN = re.compile(r"NCCL WARN (.*)$")
_RAS_RANK = re.compile(r"Rank (\d+) has (?:launched up to operation (\d+)|not launched any operations)"
                       r"(?: -- GPU \S+ managed by process (\d+) on node (\S+))?")
_RAS_MAJ = re.compile(r"(\d+) ranks have (?:launched up to operation (\d+)|not launched any operations)")
_RAS_PROC = re.compile(r"Process (\d+) on node (\S+) managing GPU")

# Errors that are a consequence of someone else's failure, not a cause.
_SECONDARY = re.compile(
    r"Timed out waiting|Connection (?:closed|reset) by (?:remote )?peer|failed to pass monitoredBarrier|"
    r"Watchdog caught|collective operation timeout|communicator was aborted|remote process exited|"
    r"ncclRemoteError|Socket Timeout|[Tt]imed out|timeout|Broken pipe|DistNetworkError|DistStoreError|"
    r"recvValue|Detected mismatch between collectives|lagging|Please check rank \d+ logs|"
    r"socket progress error|Connection refused|closing signal|SIGTERM|ChildFailedError|"
    r"terminate called|Some NCCL operations have failed|Abort COMPLETE|peer|Failed to recv")
_NCCL_PRIMARY = re.compile(r"Cuda failure|unhandled cuda error|uncorrectable ECC|illegal memory access|"
                           r"Duplicate GPU|Error while creating shared memory|ibv_|NET/IB|out of memory", re.I)




def _ranks(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"\d+", text)[:MAX_RECORDS] if int(x) < MAX_RANK]


@dataclass
class Line:
    """One candidate line, with the process that printed it and its neighbours on demand."""

    text: str
    loc: str
    ts: float | None
    stream: Stream
    chunk: Chunk
    start: int
    end: int

    def after(self, n: int) -> list[str]:
        data = self.chunk.data
        seg = data[self.end + 1:self.end + 1 + (8 << 10)]
        return [s.decode("utf-8", "replace").rstrip("\r") for s in seg.split(b"\n")[:n]]

    def before(self, n: int) -> list[str]:
        data = self.chunk.data
        seg = data[max(0, self.start - 4096):max(0, self.start - 1)]
        return [s.decode("utf-8", "replace").rstrip("\r") for s in seg.split(b"\n")[-n:]]


@dataclass(frozen=True)
class Handler:
    """A row of the table: lines holding ``needle`` and matching ``pattern`` go to ``handle``.

    The first row whose needle is in a line owns it, unless the row falls through when its
    pattern does not match; a row without a pattern reads the line itself."""

    needle: str
    pattern: re.Pattern[str] | None
    handle: Callable[["LogForensics", Line, re.Match | None], None]
    fall_through: bool = False


# ---------------------------------------------------------------------------------- handlers
def _on_watchdog(fx: "LogForensics", ln: Line, m: re.Match) -> None:
    fx.scan.kinds.add("watchdog")
    st, seq = ln.stream, int(m.group(1))
    pgm = _PG.search(ln.text)
    pg_id = (pgm.group(1) or pgm.group(3)) if pgm else None
    # the "[PG ID ..]" line that names the group follows; park it under the seq for now
    pst = st.pg(pg_id or f"?{seq}")
    if pst.stuck_seq is None:
        pst.stuck_seq, pst.op = seq, m.group(2)
        pst.numel_in = int(m.group(3)) if m.group(3) else None
        pst.numel_out = int(m.group(4)) if m.group(4) else None
        pst.timeout_ms = int(m.group(5))
        pst.ran_ms = int(m.group(6)) if m.group(6) else None
        pst.loc, pst.source = ln.loc, "watchdog"
        st.add_event(Event("watchdog_timeout", ln.text.strip()[:300], ln.ts, ln.loc))


def _on_stack(fx: "LogForensics", ln: Line, _m: None) -> None:
    if "not found" in ln.text:
        ln.stream.fr_disabled = True
        return
    frames = []
    for nxt in ln.after(40):
        fm = _STACK_FRAME.match(nxt)
        if not fm:
            break
        frames.append(f"{fm.group(2)} at {fm.group(3)}:{fm.group(4)}")
    if frames and not ln.stream.stack:
        ln.stream.stack = frames


def _on_mismatch(fx: "LogForensics", ln: Line, _m: None) -> None:
    fx.scan.kinds.add("mismatch")
    rec = None
    m = _MISMATCH.search(ln.text)
    if m:
        rec = {"rank_a": int(m.group(1)), "rank_b": int(m.group(3)), "a": _fp_dict(_FP.search(m.group(2))),
               "b": _fp_dict(_FP.search(m.group(4))), "loc": ln.loc}
    else:
        m = _MISMATCH_OLD.search(ln.text)
        if m:
            rec = {"rank_a": int(m.group(1)), "rank_b": None, "a": _fp_dict(_FP.search(m.group(2))), "b": None,
                   "loc": ln.loc}
    if rec and len(ln.stream.mismatch) < MAX_EVENTS:
        ln.stream.mismatch.append(rec)


def _on_lagging(fx: "LogForensics", ln: Line, m: re.Match) -> None:
    fx.scan.kinds.add("desync")
    fx.scan.desync.setdefault("never_joined", sorted(set(_ranks(m.group(1)))))


def _on_joined_not_finished(fx: "LogForensics", ln: Line, m: re.Match) -> None:
    fx.scan.kinds.add("desync")
    fx.scan.desync.setdefault("joined_not_finished", {"ranks": _ranks(m.group(1)), "seq": int(m.group(2))})


def _on_not_joined(fx: "LogForensics", ln: Line, m: re.Match) -> None:
    fx.scan.kinds.add("desync")
    fx.scan.desync.setdefault("finished_not_joined", {"ranks": _ranks(m.group(1)), "seq": int(m.group(3))})


def _on_pg_status(fx: "LogForensics", ln: Line, m: re.Match) -> None:
    fx.scan.kinds.add("pg_status")
    st, line = ln.stream, ln.text
    pgm = _PG.search(line)
    pg_id = (pgm.group(1) or pgm.group(3)) if pgm else "0"
    desc = (pgm.group(2) or pgm.group(4)) if pgm else None
    pst = st.pg(pg_id)
    enq = int(m.group(1))
    if pst.enqueued is None or enq > pst.enqueued:
        pst.enqueued = enq
        comp, started = _COMP.search(line), _STARTED.search(line)
        if comp:
            pst.completed = int(comp.group(1))
        if started:
            pst.started = int(started.group(1))
    if desc and not pst.desc:
        pst.desc = desc
    at = _AT_WORK.search(line)
    if at:
        seq = int(at.group(1))
        parked = st.pgs.pop(f"?{seq}", None)
        if parked is not None:
            pst.merge(parked)
        if pst.stuck_seq is None:
            pst.stuck_seq = seq
    df = _DUMP_FROM.search(line)
    if df:
        st.dump_from = int(df.group(1))
    if pst.loc is None:
        pst.loc = ln.loc


def _on_barrier(fx: "LogForensics", ln: Line, m: re.Match) -> None:
    fx.scan.kinds.add("monitored_barrier")
    st = ln.stream
    st.barrier_missing = sorted(set(st.barrier_missing) | set(_ranks(m.group(1))))[:MAX_RECORDS]
    st.add_event(Event("monitored_barrier", ln.text.strip()[:300], ln.ts, ln.loc))


def _on_comm(fx: "LogForensics", ln: Line, m: re.Match) -> None:
    fx.scan.kinds.add("nccl_init")
    st = ln.stream
    comm = st.comm(m.group(1))
    if comm is None:
        fx.note("more than 64 communicators in one process: the rest are not followed")
        return
    rank, nranks = int(m.group(2)), int(m.group(3))
    if rank >= MAX_RANK or nranks > MAX_RANK:
        return
    comm.update({"rank": rank, "nranks": nranks, "dev": int(m.group(4)), "busId": m.group(5)})
    if m.group(6):
        comm["commId"] = m.group(6)
    comm[m.group(7).lower()] = ln.loc
    if st.pid is not None:
        prev = fx.pid_rank.get((st.host, st.pid))
        if (prev is None or nranks > prev[0]) and len(fx.pid_rank) < MAX_STREAMS:
            fx.pid_rank[(st.host, st.pid)] = (nranks, rank)


def _on_elastic_line(fx: "LogForensics", ln: Line, m: re.Match) -> None:
    fx.scan.kinds.add("elastic")
    if len(fx.scan.elastic) < MAX_RECORDS:
        fx.scan.elastic.append({"local_rank": int(m.group(2)), "exitcode": int(m.group(1)), "pid": int(m.group(3)),
                                "ts": ln.ts, "loc": ln.loc, "first": True})


def _on_elastic_exit(fx: "LogForensics", ln: Line, m: re.Match) -> None:
    """torchelastic's failure summary: the fields around an ``exitcode`` line."""
    fx.scan.kinds.add("elastic")
    rec = {"exitcode": int(m.group(1)), "pid": int(m.group(2)), "signal": m.group(3), "loc": ln.loc}
    for prev in reversed(ln.before(12)[-8:]):
        fm = _ELASTIC_FIELD.match(prev)
        if fm:
            rec.setdefault(fm.group(1), fm.group(2).strip())
        if "Root Cause" in prev:
            rec["root_cause"] = True
            break
        if "Failures:" in prev:
            break
    for nxt in ln.after(3):
        fm = _ELASTIC_FIELD.match(nxt)
        if fm and fm.group(1) == "traceback":
            rec["traceback"] = fm.group(2).strip()
    if "rank" in rec:
        rm = re.match(r"(\d+)(?: \(local_rank: (\d+)\))?", rec["rank"])
        if rm:
            rec["rank"] = int(rm.group(1))
            rec["local_rank"] = int(rm.group(2)) if rm.group(2) else None
    if "time" in rec:
        rec["ts"] = parse_ts(rec["time"])
    if len(fx.scan.elastic) < MAX_RECORDS:
        fx.scan.elastic.append(rec)


def _on_xid(fx: "LogForensics", ln: Line, m: re.Match) -> None:
    fx.scan.kinds.add("xid")
    text = f"Xid {m.group(2)} on {m.group(1)}: {(m.group(5) or '').strip()}"
    ln.stream.add_event(Event("xid", text[:300], ln.ts, ln.loc, primary=True))


def _on_oom(fx: "LogForensics", ln: Line, _m: None) -> None:
    if _OOM.search(ln.text):
        fx.scan.kinds.add("oom")
        kind = "host_oom" if _HOST_OOM.search(ln.text) else "oom"
        ln.stream.add_event(Event(kind, ln.text.strip()[:300], ln.ts, ln.loc, primary=True))


def _on_nccl_warn(fx: "LogForensics", ln: Line, m: re.Match) -> None:
    text = m.group(1).strip()
    primary = bool(_NCCL_PRIMARY.search(text)) and not _SECONDARY.search(text)
    ln.stream.add_event(Event("nccl_warn", text[:300], ln.ts, ln.loc, primary=primary))


def _on_ras_rank(fx: "LogForensics", ln: Line, m: re.Match) -> None:
    fx.scan.kinds.add("ras")
    ras = fx.scan.ras.setdefault("ranks", {})
    rank = int(m.group(1))
    if rank < MAX_RANK and len(ras) < MAX_RECORDS:
        ras[rank] = {"op": int(m.group(2)) if m.group(2) else 0, "pid": m.group(3), "host": m.group(4), "loc": ln.loc}


def _on_ras_majority(fx: "LogForensics", ln: Line, m: re.Match) -> None:
    fx.scan.kinds.add("ras")
    rows = fx.scan.ras.setdefault("majority", [])
    if len(rows) < MAX_RECORDS:
        rows.append({"count": int(m.group(1)), "op": int(m.group(2)) if m.group(2) else 0})


def _on_ras_process(fx: "LogForensics", ln: Line, m: re.Match) -> None:
    fx.scan.kinds.add("ras")
    dead = any("considered dead" in b for b in ln.before(6))
    rows = fx.scan.ras.setdefault("dead" if dead else "missing_procs", [])
    if len(rows) < MAX_RECORDS:
        rows.append({"pid": int(m.group(1)), "host": m.group(2), "loc": ln.loc})


def _on_exception(fx: "LogForensics", ln: Line, _m: None) -> None:
    line = ln.text
    if "ChildFailedError" in line or "Traceback" in line:
        return
    m = _EXC.search(line)
    if m:
        kind = m.group(1).rsplit(".", 1)[-1]
        secondary = bool(_SECONDARY.search(line))
        ln.stream.add_event(Event("exception", f"{kind}: {m.group(2).strip()}"[:300], ln.ts, ln.loc,
                                  primary=not secondary))


_OOM = re.compile(r"CUDA out of memory|OutOfMemoryError|out of memory", re.I)
_HOST_OOM = re.compile(r"Killed process|oom-kill|oom_reaper")

# Order matters: the first row whose needle a line holds owns the line.
HANDLERS: tuple[Handler, ...] = (
    Handler("Watchdog caught collective operation timeout", _WATCHDOG, _on_watchdog),
    Handler("Stack trace of the failed collective", None, _on_stack),
    Handler("Detected mismatch between collectives", None, _on_mismatch),
    Handler("is running inconsistent collective", None, _on_mismatch),
    Handler("are the lagging ranks", _LAGGING, _on_lagging, fall_through=True),
    Handler("joined but didn't finish collective", _JOINED_NOT_FINISHED, _on_joined_not_finished, fall_through=True),
    Handler("but didn't join collective", _NOT_JOINED, _on_not_joined, fall_through=True),
    Handler("nqueued", _ENQ, _on_pg_status),
    Handler("monitoredBarrier", _BARRIER, _on_barrier),
    Handler(" COMPLETE", _COMM, _on_comm),
    Handler("xitcode", _ELASTIC_LINE, _on_elastic_line, fall_through=True),
    Handler("xitcode", _ELASTIC_EXIT, _on_elastic_exit),
    Handler("Xid", _XID, _on_xid),
    Handler("of memory", None, _on_oom),
    Handler("NCCL WARN", _NCCL_WARN, _on_nccl_warn),
    Handler(" launched ", _RAS_RANK, _on_ras_rank, fall_through=True),
    Handler(" launched ", _RAS_MAJ, _on_ras_majority),
    Handler("managing GPU", _RAS_PROC, _on_ras_process),
    Handler("Error: ", None, _on_exception),
)

# Progress lines, one per collective and process: read in the tail only, newest first.
OPCOUNT = b"opCount "
FINGERPRINT = b"Running collective: CollectiveFingerPrint"
PROGRESS = (OPCOUNT, FINGERPRINT)


def _fp_dict(m) -> dict | None:
    if not m:
        return None
    return {"seq": int(m.group(1)) if m.group(1) else None, "op": m.group(2), "shape": m.group(3),
            "dtype": m.group(4)}


class HandlerTable:
    """The handlers' needles numbered in a shared :class:`Needles` set."""

    def __init__(self, needles: Needles, handlers: tuple[Handler, ...] = HANDLERS) -> None:
        self.handlers = handlers
        self.rows_by_id: dict[int, set[int]] = {}
        for index, row in enumerate(handlers):
            self.rows_by_id.setdefault(needles.add(row.needle.encode()), set()).add(index)

    def rows(self, text: str, ids: tuple[int, ...] | None) -> list[Handler]:
        """The rows whose needle the line holds, in table order."""
        if ids is None:
            return [row for row in self.handlers if row.needle in text]
        found: set[int] = set()
        for nid in ids:
            found |= self.rows_by_id.get(nid, set())
        return [self.handlers[i] for i in sorted(found)]


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
        line_no: list[int] = [chunk.start, chunk.first_line]
        mine = self.table.rows_by_id
        for start, end, ids in spans:
            if ids is not None and not any(i in mine for i in ids):
                continue  # a line only the KB's signatures want
            raw = data[start:min(end, start + MAX_LINE)]
            text = raw.decode("utf-8", "replace").rstrip("\r")
            rows = self.table.rows(text, ids)
            if not rows:
                continue
            line_no[1] += data.count(b"\n", line_no[0], start)
            line_no[0] = start
            st = self.stream_for(text)
            ts = parse_ts(text[:120])
            if ts is not None:
                st.first_ts = ts if st.first_ts is None else min(st.first_ts, ts)
                st.last_ts = ts if st.last_ts is None else max(st.last_ts, ts)
            ln = Line(text, f"{self.base}:{line_no[1]}", ts, st, chunk, start, end)
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
        """(chunk, line start, needle position, line number) of the lines holding ``needle``, newest first."""
        for chunk in reversed(tail):
            data = chunk.data
            hi, pos_ref, line_ref = chunk.end, chunk.end, chunk.first_line + chunk.lines
            while True:
                pos = data.rfind(needle, chunk.start, hi)
                if pos < 0:
                    break
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
            m = _OPCOUNT.match(data, pos, pos + 512)
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
                name = _OPNAME.search(data, max(ls, pos - 40), pos)
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
            m = _FP.search(text)
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
