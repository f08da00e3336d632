"""The lines hang forensics reads, as a table of (needle, pattern, handler) rows.

The prefilter finds the lines holding a row's needle in one pass over each chunk; the row's
pattern reads the line and its handler updates the state of the process that printed it
(:class:`~nccl_doctor.forensics.scan.LogForensics`). The first row whose needle a line holds
owns the line, unless that row falls through when its pattern does not match. Progress lines,
printed once per collective and process, are not rows: they are read in the tail only.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..logs import Chunk
from ..prefilter import Needles
from .evidence import MAX_EVENTS, MAX_RANK, MAX_RECORDS, MAX_STREAMS, Event, Stream, parse_ts

if TYPE_CHECKING:  # pragma: no cover
    from .scan import LogForensics

__all__ = ["Handler", "HANDLERS", "HandlerTable", "Line", "PROGRESS", "OPCOUNT", "FINGERPRINT",
           "OPCOUNT_RE", "OPNAME_RE", "FINGERPRINT_RE"]

_WATCHDOG = re.compile(
    r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(\d+), OpType=(\w+)"
    r"(?:, NumelIn=(-?\d+), NumelOut=(-?\d+))?, Timeout\(ms\)=(\d+)\)(?: ran for (\d+) milliseconds)?")
_AT_WORK = re.compile(r"(?:at (?:NCCL )?work(?: sequence id)?:|Timeout at NCCL work:)\s*(\d+)")
_ENQ = re.compile(r"[Ll]ast enqueued (?:NCCL )?work:? (-?\d+)")
_COMP = re.compile(r"last completed(?: NCCL)?(?: work)?:? (-?\d+)")
_STARTED = re.compile(r"last started(?: NCCL)?(?: work)?:? (-?\d+)")
_DUMP_FROM = re.compile(r"collective timeout from\s+rank (\d+)")
_PG = re.compile(r"\[PG ID (\S+) PG GUID \S+?(?:\(([^)]*)\))? Rank \d+\]|\[PG (\d+) (?:\(([^)]*)\) )?Rank \d+\]")
FINGERPRINT_RE = re.compile(r"CollectiveFingerPrint\((?:SequenceNumber=(\d+), )?OpType=(\w+)(?:, TensorShape=\[([^\]]*)\])?"
                 r"(?:, TensorDtypes=(\w+))?")
_MISMATCH = re.compile(r"Detected mismatch between collectives on ranks\. Rank (\d+) is running collective: (.*?), but Rank (\d+) is running collective: (.*)")
_MISMATCH_OLD = re.compile(r"Rank (\d+) is running (?:inconsistent )?collective: (CollectiveFingerPrint\(.*)")
_BARRIER = re.compile(r"Ranks? ([\d, ]+) failed to pass monitoredBarrier")
_LAGGING = re.compile(r"ranks \[([\d, ]+)\] are the lagging ranks")
_JOINED_NOT_FINISHED = re.compile(r"\[([\d, ]+)\] joined but didn't finish collective #(\d+)")
_NOT_JOINED = re.compile(r"\[([\d, ]+)\] finished collective #(\d+), but didn't join collective #(\d+)")
_STACK_FRAME = re.compile(r"^\s*(?:\[\w*\d+\]:\s*)*#(\d+) (.+?) from (.+):(\d+)\s*$")
OPCOUNT_RE = re.compile(rb"opCount ([0-9a-f]+) sendbuff \S+ recvbuff \S+ count (\d+) datatype (\d+) op (\d+) root (-?\d+) comm (\S+) \[nranks=(\d+)\]")
OPNAME_RE = re.compile(rb"(\w+): $")
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
        rec = {"rank_a": int(m.group(1)), "rank_b": int(m.group(3)), "a": _fp_dict(FINGERPRINT_RE.search(m.group(2))),
               "b": _fp_dict(FINGERPRINT_RE.search(m.group(4))), "loc": ln.loc}
    else:
        m = _MISMATCH_OLD.search(ln.text)
        if m:
            rec = {"rank_a": int(m.group(1)), "rank_b": None, "a": _fp_dict(FINGERPRINT_RE.search(m.group(2))), "b": None,
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
