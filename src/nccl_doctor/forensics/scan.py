"""Per-file evidence about each rank's progress, read fast and in bounded memory.

A file is read in big binary chunks. A handful of literal needles (``bytes.find``, several GB/s)
pick the few lines worth a regex; everything else is never decoded. Each chunk keeps a few KB of
look-behind and look-ahead so that multi-line records (elastic's failure summary, the stack of the
failed collective) are read whole. What a file yields is small: one :class:`Stream` per process
seen in it, holding only the latest state per process group and the first errors.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

__all__ = ["Stream", "Event", "PGState", "FileScan", "scan_file", "names_from_path", "prefilter_backend", "CHUNK"]

CHUNK = 8 << 20
LOOK = 8 << 10
MAX_LINE = 16 << 10
MAX_EVENTS = 6
HEAVY_TAIL = 512  # opCount lines parsed per chunk (only the latest per communicator matters)

# Literal needles: every line the analysis reads contains one of them.
NEEDLES: tuple[bytes, ...] = (
    b"ollective",  # watchdog timeout, stack of failed collective, desync report, mismatch, fingerprints
    b"nqueued",  # last enqueued / completed work (watchdog, dump signal, PG status)
    b"monitoredBarrier",
    b" COMPLETE",  # NCCL Init / Abort / Destroy COMPLETE
    b"xitcode",  # torchelastic failure summary
    b"Xid",
    b"of memory",
    b"Error: ",
    b"NCCL WARN",
    b" launched ",  # NCCL RAS
    b"managing GPU",  # NCCL RAS dead / missing processes
)
OPCOUNT = b"opCount "


@dataclass
class Event:
    kind: str
    text: str
    ts: float | None
    loc: str
    primary: bool = False


@dataclass
class PGState:
    enqueued: int | None = None
    started: int | None = None
    completed: int | None = None
    stuck_seq: int | None = None  # the work the watchdog caught
    op: str | None = None
    numel_in: int | None = None
    numel_out: int | None = None
    timeout_ms: int | None = None
    ran_ms: int | None = None
    desc: str | None = None
    fp_seq: int | None = None  # TORCH_DISTRIBUTED_DEBUG=DETAIL fingerprint (0-based sequence)
    fp_op: str | None = None
    fp_shape: str | None = None
    fp_dtype: str | None = None
    entry: dict | None = None  # flight recorder entry at the stuck / last collective
    last_entry: dict | None = None
    prev_entry: dict | None = None  # the flight recorder entry before `entry` (what the group did last)
    loc: str | None = None
    source: str | None = None  # "watchdog", "flight_recorder", "detail"

    def merge(self, other: "PGState") -> None:
        for name in ("enqueued", "started", "completed", "fp_seq"):
            a, b = getattr(self, name), getattr(other, name)
            if b is not None and (a is None or b > a):
                setattr(self, name, b)
                if name == "fp_seq":
                    self.fp_op, self.fp_shape, self.fp_dtype = other.fp_op, other.fp_shape, other.fp_dtype
        for name in ("stuck_seq", "op", "numel_in", "numel_out", "timeout_ms", "ran_ms", "desc", "entry",
                     "last_entry", "prev_entry", "loc", "source"):
            if getattr(self, name) is None and getattr(other, name) is not None:
                setattr(self, name, getattr(other, name))


@dataclass
class Stream:
    """What one process (rank) says in one file."""

    key: str
    file: str
    rank: int | None = None
    local_rank: int | None = None
    host: str | None = None
    pid: int | None = None
    pgs: dict[str, PGState] = field(default_factory=dict)
    comms: dict[str, dict] = field(default_factory=dict)  # NCCL comm pointer -> init / last op / abort
    events: list[Event] = field(default_factory=list)  # first few errors, in file order
    first_primary: Event | None = None
    exit: dict | None = None
    barrier_missing: list[int] = field(default_factory=list)
    mismatch: list[dict] = field(default_factory=list)
    dump_from: int | None = None  # "dump signal due to a collective timeout from rank N"
    stack: list[str] = field(default_factory=list)
    fr_disabled: bool = False
    first_ts: float | None = None
    last_ts: float | None = None
    lines: int = 0
    is_dump: bool = False

    def pg(self, pg_id: str) -> PGState:
        st = self.pgs.get(pg_id)
        if st is None:
            st = self.pgs[pg_id] = PGState()
        return st

    def add_event(self, ev: Event) -> None:
        if ev.primary and (self.first_primary is None or _earlier(ev, self.first_primary)):
            self.first_primary = ev
        if len(self.events) < MAX_EVENTS:
            self.events.append(ev)

    def absorb(self, other: "Stream") -> None:
        self.rank = self.rank if self.rank is not None else other.rank
        self.local_rank = self.local_rank if self.local_rank is not None else other.local_rank
        self.host = self.host or other.host
        self.pid = self.pid or other.pid
        for k, st in other.pgs.items():
            self.pg(k).merge(st)
        for k, c in other.comms.items():
            self.comms.setdefault(k, {}).update(c)
        for ev in other.events:
            self.add_event(ev)
        if other.first_primary is not None and other.first_primary not in other.events:
            self.add_event(other.first_primary)
        self.events.sort(key=lambda e: (e.ts is None, e.ts or 0))
        self.exit = self.exit or other.exit
        self.barrier_missing = sorted(set(self.barrier_missing) | set(other.barrier_missing))
        self.mismatch += other.mismatch[: MAX_EVENTS - len(self.mismatch)]
        self.dump_from = self.dump_from if self.dump_from is not None else other.dump_from
        self.stack = self.stack or other.stack
        self.fr_disabled = self.fr_disabled or other.fr_disabled
        for name, pick in (("first_ts", min), ("last_ts", max)):
            a, b = getattr(self, name), getattr(other, name)
            setattr(self, name, b if a is None else a if b is None else pick(a, b))
        self.lines += other.lines
        self.is_dump = self.is_dump or other.is_dump


def _earlier(a: Event, b: Event) -> bool:
    if a.ts is not None and b.ts is not None:
        return a.ts < b.ts
    return False


@dataclass
class FileScan:
    path: str
    streams: list[Stream]
    desync: dict = field(default_factory=dict)  # lagging ranks from TORCH_NCCL_DESYNC_DEBUG
    ras: dict = field(default_factory=dict)
    elastic: list[dict] = field(default_factory=list)
    bytes: int = 0
    lines: int = 0
    problem: str | None = None
    kinds: set[str] = field(default_factory=set)  # what kinds of evidence the file held
    pg_ranks: dict = field(default_factory=dict)  # group -> member ranks (Flight Recorder pg_config)


# ----------------------------------------------------------------------------------------------
# Names: rank / host from the file name
_RANK_NAME = (
    re.compile(r"(?i)(?:^|[^a-z])rank[_\-.]?(\d{1,6})(?!\d)"),
    re.compile(r"(?i)(?:^|[/_.\-])r(\d{1,6})(?:[._\-]|$)"),
    re.compile(r"(?i)(?:^|[/_.\-])(?:worker|task|proc|process)[_\-.]?(\d{1,6})(?:[._\-]|$)"),
)
_TORCHRUN_DIR = re.compile(r"attempt_\d+[/\\](\d+)[/\\](?:stdout|stderr|error)\.(?:log|json)$")
_DUMP_NAME = re.compile(r"(\d{1,6})(?:\.json|\.pkl|\.pickle)?$")
_STOP = {"rank", "log", "logs", "out", "err", "stdout", "stderr", "nccl", "trace", "attempt", "job", "slurm",
         "txt", "train", "default", "debug", "torch", "dump", "json", "worker", "task", "node", "host",
         "output", "error", "fr", "flight", "recorder", "pkl", "run", "local", "tmp"}
_HOSTY = re.compile(r"^(?=.*[a-z])[a-z][a-z0-9\-]*\d[a-z0-9\-]*$|^\d{1,3}(?:[\-.]\d{1,3}){3}$", re.I)


def names_from_path(path: str, *, dump: bool = False) -> tuple[int | None, int | None, str | None]:
    """(rank, local_rank, host) guessed from a file name; content overrides them."""
    base = os.path.basename(path)
    rank = local = host = None
    m = _TORCHRUN_DIR.search(path.replace("\\", "/"))
    if m:
        local = int(m.group(1))
    if dump:
        m = _DUMP_NAME.search(base)
        if m:
            rank = int(m.group(1))
    if rank is None:
        stem = re.sub(r"\.(log|txt|out|err)$", "", base, flags=re.I)
        for rx in _RANK_NAME:
            m = rx.search(stem)
            if m:
                rank = int(m.group(1))
                break
    # host: "node07" / "host-3" style names, NCCL_DEBUG_FILE=...%h.%p (host then pid), IP addresses,
    # or SLURM-style names with dashes and digits (gpu-st-p4d-1, ip-10-0-0-5)
    stem = re.sub(r"\.(log|txt|out|err|json)$", "", base, flags=re.I)
    m = re.search(r"(?i)(?:^|[._\-])((?:node|host)[_\-]?[a-z0-9][a-z0-9\-]*?)(?=$|[._]|-rank|-r\d|-worker)", stem)
    toks = re.split(r"[._]", stem)
    if m:
        host = m.group(1)
    elif len(toks) >= 2 and toks[-1].isdigit() and _HOSTY.match(toks[-2]) and toks[-2].split("-")[0].lower() not in _STOP:
        host = toks[-2]  # nccl.<host>.<pid>
    else:
        for tok in toks:
            if re.fullmatch(r"\d{1,3}(?:[\-.]\d{1,3}){3}", tok) or (
                    "-" in tok and _HOSTY.match(tok) and not re.match(r"(?i)^(rank|r|worker|task|proc|attempt)[\-_]?\d+$", tok)
                    and tok.split("-")[0].lower() not in _STOP):
                host = tok
                break
    return rank, local, host


# ----------------------------------------------------------------------------------------------
# Line identity: which process printed a line
_ID_RANKPFX = re.compile(r"^\s*(?:\[(?P<role>[A-Za-z_]*?)(?P<lr>\d+)\]:\s*)?\[rank(?P<rank>\d+)\]:")
_ID_ROLEPFX = re.compile(r"^\s*\[(?P<role>[A-Za-z_]+?)(?P<lr>\d+)\]:")
_ID_NCCL = re.compile(r"(?:^|\s|\]:)(?P<host>[A-Za-z0-9][\w.\-]*):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\]")
_ID_PGRANK = re.compile(r"\[(?:PG ID \S+ PG GUID [^\]]*?|PG \d+(?: \([^)]*\))?) Rank (\d+)\]|\[Rank (\d+)\]")
_ID_SRUN = re.compile(r"^\s*(\d{1,5}): ")
_ID_RAY = re.compile(r"pid=(\d+), ip=([\d.]+)\)")

_TS_GLOG = re.compile(r"[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d(?:\.\d+)?)")
_TS_ISO = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T_](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?")
_MDAYS = (0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334)


def parse_ts(text: str) -> float | None:
    """Seconds since the start of the year (years are rarely printed; all ranks share one)."""
    m = _TS_ISO.search(text)
    if m:
        mo, d, h, mi, s = (int(x) for x in m.groups()[1:6])
        frac = float("0." + m.group(7)) if m.group(7) else 0.0
    else:
        m = _TS_GLOG.search(text)
        if not m:
            return None
        mo, d, h, mi = (int(x) for x in m.groups()[:4])
        s_full = float(m.group(5))
        s, frac = int(s_full), s_full - int(s_full)
    if not 1 <= mo <= 12:
        return None
    return ((_MDAYS[mo - 1] + d - 1) * 24 + h) * 3600 + mi * 60 + s + frac


# ----------------------------------------------------------------------------------------------
# Line regexes (run only on candidate lines)
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
    return [int(x) for x in re.findall(r"\d+", text)]


class _FileState:
    def __init__(self, path: str, name_rank, name_local, name_host):
        self.path = path
        self.streams: dict[str, Stream] = {}
        self.name_rank, self.name_local, self.name_host = name_rank, name_local, name_host
        self.last_key: str | None = None
        self.scan = FileScan(path=path, streams=[])
        self.pid_rank: dict[tuple[str | None, int], tuple[int, int]] = {}  # (host,pid) -> (nranks, rank)
        self._head_cache: dict[bytes, Stream] = {}  # opCount line prefix -> stream

    def stream_for(self, line: str) -> Stream:
        rank = local = pid = None
        host = None
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
        if rank is not None:
            key = f"r{rank}"
        elif pid is not None:
            key = f"{host}:{pid}"
        elif local is not None:
            key = f"l{local}"
        else:
            key = "file"
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
        self.last_key = key
        return st

    # -- handlers ------------------------------------------------------------------------------
    def handle(self, line: str, loc: str, after: list[str], before: list[str]) -> None:
        st = self.stream_for(line)
        ts = parse_ts(line[:120])
        if ts is not None:
            if st.first_ts is None or ts < st.first_ts:
                st.first_ts = ts
            if st.last_ts is None or ts > st.last_ts:
                st.last_ts = ts
        kinds = self.scan.kinds
        if "ollective" in line:
            if "Watchdog caught collective operation timeout" in line:
                m = _WATCHDOG.search(line)
                if m:
                    kinds.add("watchdog")
                    seq = int(m.group(1))
                    pgm = _PG.search(line)
                    pg_id = (pgm.group(1) or pgm.group(3)) if pgm else None
                    # the "[PG ID ..]" line that names the group follows; park it under the seq for now
                    key = pg_id or f"?{seq}"
                    pst = st.pg(key)
                    if pst.stuck_seq is None:
                        pst.stuck_seq, pst.op = seq, m.group(2)
                        pst.numel_in = int(m.group(3)) if m.group(3) else None
                        pst.numel_out = int(m.group(4)) if m.group(4) else None
                        pst.timeout_ms = int(m.group(5))
                        pst.ran_ms = int(m.group(6)) if m.group(6) else None
                        pst.loc, pst.source = loc, "watchdog"
                        st.add_event(Event("watchdog_timeout", line.strip()[:300], ts, loc))
                return
            if "Stack trace of the failed collective" in line:
                if "not found" in line:
                    st.fr_disabled = True
                    return
                frames = []
                for nxt in after[:40]:
                    fm = _STACK_FRAME.match(nxt)
                    if not fm:
                        break
                    frames.append(f"{fm.group(2)} at {fm.group(3)}:{fm.group(4)}")
                if frames and not st.stack:
                    st.stack = frames
                return
            if "Detected mismatch between collectives" in line or "is running inconsistent collective" in line:
                kinds.add("mismatch")
                m = _MISMATCH.search(line)
                rec = None
                if m:
                    a, b = _FP.search(m.group(2)), _FP.search(m.group(4))
                    rec = {"rank_a": int(m.group(1)), "rank_b": int(m.group(3)),
                           "a": _fp_dict(a), "b": _fp_dict(b), "loc": loc}
                else:
                    m = _MISMATCH_OLD.search(line)
                    if m:
                        rec = {"rank_a": int(m.group(1)), "rank_b": None, "a": _fp_dict(_FP.search(m.group(2))),
                               "b": None, "loc": loc}
                if rec and len(st.mismatch) < MAX_EVENTS:
                    st.mismatch.append(rec)
                return
            if "Running collective: CollectiveFingerPrint" in line:
                m = _FP.search(line)
                if m and m.group(1) is not None:
                    kinds.add("detail")
                    pst = st.pg("0")
                    seq = int(m.group(1))
                    if pst.fp_seq is None or seq >= pst.fp_seq:
                        pst.fp_seq, pst.fp_op, pst.fp_shape, pst.fp_dtype = seq, m.group(2), m.group(3), m.group(4)
                        pst.loc, pst.source = loc, pst.source or "detail"
                return
            m = _LAGGING.search(line)
            if m:
                kinds.add("desync")
                self.scan.desync.setdefault("never_joined", sorted(set(_ranks(m.group(1)))))
                return
            m = _JOINED_NOT_FINISHED.search(line)
            if m:
                kinds.add("desync")
                self.scan.desync.setdefault("joined_not_finished", {"ranks": _ranks(m.group(1)), "seq": int(m.group(2))})
                return
            m = _NOT_JOINED.search(line)
            if m:
                kinds.add("desync")
                self.scan.desync.setdefault("finished_not_joined", {"ranks": _ranks(m.group(1)), "seq": int(m.group(3))})
                return
        if "nqueued" in line:
            m = _ENQ.search(line)
            if m:
                kinds.add("pg_status")
                pgm = _PG.search(line)
                pg_id = (pgm.group(1) or pgm.group(3)) if pgm else "0"
                desc = (pgm.group(2) or pgm.group(4)) if pgm else None
                at = _AT_WORK.search(line)
                comp = _COMP.search(line)
                started = _STARTED.search(line)
                pst = st.pg(pg_id)
                enq = int(m.group(1))
                if pst.enqueued is None or enq > pst.enqueued:
                    pst.enqueued = enq
                    if comp:
                        pst.completed = int(comp.group(1))
                    if started:
                        pst.started = int(started.group(1))
                if desc and not pst.desc:
                    pst.desc = desc
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
                    pst.loc = loc
            return
        if "monitoredBarrier" in line:
            m = _BARRIER.search(line)
            if m:
                kinds.add("monitored_barrier")
                st.barrier_missing = sorted(set(st.barrier_missing) | set(_ranks(m.group(1))))
                st.add_event(Event("monitored_barrier", line.strip()[:300], ts, loc))
            return
        if " COMPLETE" in line:
            m = _COMM.search(line)
            if m:
                kinds.add("nccl_init")
                comm = st.comms.setdefault(m.group(1), {})
                what = m.group(7).lower()
                comm.update({"rank": int(m.group(2)), "nranks": int(m.group(3)), "dev": int(m.group(4)),
                             "busId": m.group(5)})
                if m.group(6):
                    comm["commId"] = m.group(6)
                comm[what] = loc
                if st.pid is not None:
                    prev = self.pid_rank.get((st.host, st.pid))
                    if prev is None or int(m.group(3)) > prev[0]:
                        self.pid_rank[(st.host, st.pid)] = (int(m.group(3)), int(m.group(2)))
            return
        if "xitcode" in line:
            m = _ELASTIC_LINE.search(line)
            if m:
                kinds.add("elastic")
                self.scan.elastic.append({"local_rank": int(m.group(2)), "exitcode": int(m.group(1)),
                                          "pid": int(m.group(3)), "ts": ts, "loc": loc, "first": True})
                return
            m = _ELASTIC_EXIT.search(line)
            if m:
                kinds.add("elastic")
                rec = {"exitcode": int(m.group(1)), "pid": int(m.group(2)), "signal": m.group(3), "loc": loc}
                for prev in reversed(before[-8:]):
                    fm = _ELASTIC_FIELD.match(prev)
                    if fm:
                        rec.setdefault(fm.group(1), fm.group(2).strip())
                    if "Root Cause" in prev:
                        rec["root_cause"] = True
                        break
                    if "Failures:" in prev or re.match(r"^\s*\[\d+\]:\s*$", prev) and "rank" in rec:
                        if "Failures:" in prev:
                            break
                for nxt in after[:3]:
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
                self.scan.elastic.append(rec)
            return
        if "Xid" in line:
            m = _XID.search(line)
            if m:
                kinds.add("xid")
                st.add_event(Event("xid", f"Xid {m.group(2)} on {m.group(1)}: {(m.group(5) or '').strip()}"[:300],
                                   ts, loc, primary=True))
            return
        if "of memory" in line:
            if re.search(r"CUDA out of memory|OutOfMemoryError|out of memory", line, re.I):
                kinds.add("oom")
                kind = "host_oom" if re.search(r"Killed process|oom-kill|oom_reaper", line) else "oom"
                st.add_event(Event(kind, line.strip()[:300], ts, loc, primary=True))
            return
        if "NCCL WARN" in line:
            m = _NCCL_WARN.search(line)
            if m:
                text = m.group(1).strip()
                primary = bool(_NCCL_PRIMARY.search(text)) and not _SECONDARY.search(text)
                st.add_event(Event("nccl_warn", text[:300], ts, loc, primary=primary))
            return
        if " launched " in line:
            m = _RAS_RANK.search(line)
            if m:
                kinds.add("ras")
                ras = self.scan.ras.setdefault("ranks", {})
                ras[int(m.group(1))] = {"op": int(m.group(2)) if m.group(2) else 0, "pid": m.group(3),
                                        "host": m.group(4), "loc": loc}
                return
            m = _RAS_MAJ.search(line)
            if m:
                kinds.add("ras")
                self.scan.ras.setdefault("majority", []).append(
                    {"count": int(m.group(1)), "op": int(m.group(2)) if m.group(2) else 0})
            return
        if "managing GPU" in line:
            m = _RAS_PROC.search(line)
            if m:
                kinds.add("ras")
                dead = any("considered dead" in b for b in before[-6:])
                self.scan.ras.setdefault("dead" if dead else "missing_procs", []).append(
                    {"pid": int(m.group(1)), "host": m.group(2), "loc": loc})
            return
        if "Error: " in line:
            if "ChildFailedError" in line or "Traceback" in line:
                return
            m = _EXC.search(line)
            if m:
                text = m.group(2).strip()
                kind = m.group(1).rsplit(".", 1)[-1]
                secondary = bool(_SECONDARY.search(line))
                st.add_event(Event("exception", f"{kind}: {text}"[:300], ts, loc, primary=not secondary))

    def handle_opcounts(self, data: bytes, start: int, end: int, line_of) -> None:
        n = data.count(OPCOUNT, start, end)
        if not n:
            return
        self.scan.kinds.add("opcount")
        lo = start
        if n > HEAVY_TAIL:
            pos = end
            for _ in range(HEAVY_TAIL):
                pos = data.rfind(OPCOUNT, start, pos)
            lo = data.rfind(b"\n", start, pos) + 1
        for m in _OPCOUNT.finditer(data, lo, end):
            ls = data.rfind(b"\n", 0, m.start()) + 1
            name = _OPNAME.search(data, max(ls, m.start() - 40), m.start())
            hb = data[ls:m.start()]
            st = self._head_cache.get(hb)
            if st is None:
                st = self.stream_for(hb.decode("utf-8", "replace"))
                if len(self._head_cache) < 4096:
                    self._head_cache[hb] = st
            comm = st.comms.setdefault(m.group(6).decode(), {})
            comm["opCount"] = int(m.group(1), 16)
            comm["op"] = name.group(1).decode() if name else None
            comm["count"], comm["datatype"], comm["nranks"] = int(m.group(2)), int(m.group(3)), int(m.group(7))
            comm["op_pos"] = m.start()
        # locations are resolved lazily (line numbers of the few last ops only)
        for st in self.streams.values():
            for comm in st.comms.values():
                pos = comm.pop("op_pos", None)
                if pos is not None:
                    comm["op_loc"] = line_of(pos)

    def finish(self) -> FileScan:
        streams = self.streams
        # map NCCL host:pid streams onto ranks (from the widest communicator's Init COMPLETE)
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
            # watchdog records whose PG line never came: group "0"
            for k in [k for k in st.pgs if k.startswith("?")]:
                st.pg("0").merge(st.pgs.pop(k))
        self.scan.streams = list(streams.values())
        return self.scan


def _fp_dict(m) -> dict | None:
    if not m:
        return None
    return {"seq": int(m.group(1)) if m.group(1) else None, "op": m.group(2), "shape": m.group(3),
            "dtype": m.group(4)}


def scan_file(path: str, *, chunk_size: int = CHUNK) -> FileScan:
    """Read one log file; never holds more than about one chunk of it."""
    name_rank, name_local, name_host = names_from_path(path)
    fs = _FileState(path, name_rank, name_local, name_host)
    base = os.path.basename(path)
    try:
        f = open(path, "rb")  # noqa: SIM115
    except OSError as exc:
        fs.scan.problem = f"cannot open: {exc.strerror or exc}"
        return fs.finish()
    with f:
        buf = b""
        skip = 0  # bytes of buf already processed (look-behind only)
        base_line = 1  # line number of buf[0]
        total = 0
        while True:
            chunk = f.read(chunk_size)
            eof = not chunk
            total += len(chunk)
            data = buf + chunk if buf else chunk
            if eof:
                cut = len(data)
            else:
                nl = data.rfind(b"\n")
                if nl < 0:
                    if len(data) > MAX_LINE * 64:  # one endless line: drop it
                        buf, skip = b"", 0
                    else:
                        buf = data
                    continue
                cut = data.rfind(b"\n", skip, max(skip, nl + 1 - LOOK)) + 1
                if cut <= skip:
                    cut = nl + 1
            _process(fs, data, skip, cut, base_line, base)
            if eof:
                fs.scan.lines = base_line - 1 + data.count(b"\n", 0, len(data)) + (1 if data and not data.endswith(b"\n") else 0)
                break
            keep = data.rfind(b"\n", 0, max(0, cut - LOOK)) + 1
            base_line += data.count(b"\n", 0, keep)
            buf = data[keep:]
            skip = cut - keep
        fs.scan.bytes = total
    return fs.finish()


_HS: list = []  # [database or None], built once per process


def prefilter_backend() -> str:
    """'hyperscan' (one pass for all needles) when installed, else 'bytes.find' (one pass per needle).

    NCCL_DOCTOR_NO_HYPERSCAN=1 forces the pure-Python path."""
    if not _HS:
        db = None
        if os.environ.get("NCCL_DOCTOR_NO_HYPERSCAN") != "1":
            try:
                import hyperscan

                db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
                db.compile(expressions=[re.escape(n) for n in NEEDLES], ids=list(range(len(NEEDLES))),
                           elements=len(NEEDLES), flags=[0] * len(NEEDLES))
            except Exception:  # not installed, or cannot compile here
                db = None
        _HS.append(db)
    return "hyperscan" if _HS[0] is not None else "bytes.find"


def _candidate_starts(data: bytes, start: int, end: int) -> set[int]:
    starts: set[int] = set()
    if prefilter_backend() == "hyperscan":
        ends: list[int] = []
        _HS[0].scan(data[start:end], match_event_handler=lambda _i, _f, to, _fl, _c: ends.append(to))
        for to in ends:
            starts.add(data.rfind(b"\n", 0, start + to) + 1)
        return starts
    for needle in NEEDLES:
        pos = data.find(needle, start, end)
        while pos >= 0:
            ls = data.rfind(b"\n", 0, pos) + 1
            starts.add(ls)
            le = data.find(b"\n", pos, end)
            if le < 0:
                break
            pos = data.find(needle, le, end)
    return starts


def _process(fs: _FileState, data: bytes, start: int, end: int, base_line: int, base: str) -> None:
    if start >= end:
        return
    starts = _candidate_starts(data, start, end)
    # line numbers: count newlines incrementally between sorted hits
    cache = {"pos": 0, "line": base_line}

    def line_of(pos: int) -> str:
        if pos < cache["pos"]:
            cache["pos"], cache["line"] = 0, base_line
        cache["line"] += data.count(b"\n", cache["pos"], pos)
        cache["pos"] = pos
        return f"{base}:{cache['line']}"

    for ls in sorted(starts):
        le = data.find(b"\n", ls)
        if le < 0:
            le = len(data)
        raw = data[ls:min(le, ls + MAX_LINE)]
        line = raw.decode("utf-8", "replace").rstrip("\r")
        loc = line_of(ls)
        after = _lines_after(data, le, 40) if ("ollective" in line or "xitcode" in line) else []
        before = _lines_before(data, ls, 12) if ("xitcode" in line or "managing GPU" in line) else []
        fs.handle(line, loc, after, before)
    fs.handle_opcounts(data, start, end, line_of)


def _lines_after(data: bytes, le: int, n: int) -> list[str]:
    seg = data[le + 1:le + 1 + LOOK]
    return [s.decode("utf-8", "replace").rstrip("\r") for s in seg.split(b"\n")[:n]]


def _lines_before(data: bytes, ls: int, n: int) -> list[str]:
    seg = data[max(0, ls - 4096):max(0, ls - 1)]
    return [s.decode("utf-8", "replace").rstrip("\r") for s in seg.split(b"\n")[-n:]]
