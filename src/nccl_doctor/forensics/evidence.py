"""What the logs of one file say about each process in it, kept small and bounded.

A :class:`FileScan` holds one :class:`Stream` per process seen in a file, and a stream only the
latest state per process group and communicator and its first errors, never one entry per line:
whatever the size of a log or the number of distinct ranks, communicators or hosts in it, the caps
below bound what is kept (beyond them the scan says so in ``notes`` and goes on).
"""
from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field

__all__ = ["Event", "PGState", "Stream", "FileScan", "names_from_path", "parse_ts",
           "MAX_EVENTS", "MAX_STREAMS", "MAX_COMMS", "MAX_RANK"]

MAX_EVENTS = 6  # first errors kept per process
MAX_STREAMS = 4096  # processes told apart in one file; more are counted together
MAX_COMMS = 64  # communicators kept per process
MAX_RANK = 1 << 20  # a rank number above this is garbage, not a rank
MAX_RECORDS = 4096  # elastic exit records, RAS rows, ranks named by a barrier, per file


@dataclass
class Event:
    """An error or warning a process printed: what, when, where (file:line), and whether it is a
    cause (``primary``) rather than a consequence of someone else's failure."""

    kind: str
    text: str
    ts: float | None
    loc: str
    primary: bool = False


@dataclass
class PGState:
    """Where one process stands in one process group: the latest work it enqueued, started and
    completed, the work the watchdog caught, and the Flight Recorder entries around it."""

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

    def comm(self, key: str) -> dict | None:
        """The state of one communicator (None once :data:`MAX_COMMS` are kept)."""
        found = self.comms.get(key)
        if found is None and len(self.comms) < MAX_COMMS:
            found = self.comms[key] = {}
        return found

    def absorb(self, other: "Stream") -> None:
        self.rank = self.rank if self.rank is not None else other.rank
        self.local_rank = self.local_rank if self.local_rank is not None else other.local_rank
        self.host = self.host or other.host
        self.pid = self.pid or other.pid
        for k, st in other.pgs.items():
            self.pg(k).merge(st)
        for k, c in other.comms.items():
            mine = self.comm(k)
            if mine is not None:
                mine.update(c)
        for ev in other.events:
            self.add_event(ev)
        if other.first_primary is not None and other.first_primary not in other.events:
            self.add_event(other.first_primary)
        self.events.sort(key=lambda e: (e.ts is None, e.ts or 0))
        self.exit = self.exit or other.exit
        self.barrier_missing = sorted(set(self.barrier_missing) | set(other.barrier_missing))[:MAX_RECORDS]
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
    """Everything one file says for the hang analysis: a stream per process, and the file-wide
    reports (desync, RAS, torchelastic's failure summary)."""

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
    notes: list[str] = field(default_factory=list)  # caps reached, opCounts that go backwards, ...
    partial: bool = False  # reading stopped before the end (Ctrl-C, a stream that went quiet)

    def to_plain(self) -> dict:
        """JSON-ready, for a session to keep between requests (:meth:`from_plain` reverses it)."""
        out = asdict(self)
        out["kinds"] = sorted(self.kinds)
        if isinstance(self.ras.get("ranks"), dict):
            out["ras"]["ranks"] = [[rank, row] for rank, row in self.ras["ranks"].items()]
        return out

    @classmethod
    def from_plain(cls, data: dict) -> "FileScan":
        """A scan kept by :meth:`to_plain`. Raises KeyError / TypeError / ValueError when damaged."""
        streams = []
        for s in data["streams"]:
            fields = dict(s)
            fields["pgs"] = {str(k): PGState(**v) for k, v in s["pgs"].items()}
            fields["events"] = [Event(**e) for e in s["events"]]
            fields["first_primary"] = Event(**s["first_primary"]) if s.get("first_primary") else None
            streams.append(Stream(**fields))
        fields = {k: v for k, v in data.items() if k != "streams"}
        fields["kinds"] = set(data.get("kinds", []))
        ras = dict(data.get("ras") or {})
        if isinstance(ras.get("ranks"), list):
            ras["ranks"] = {int(rank): row for rank, row in ras["ranks"]}
        fields["ras"] = ras
        return cls(streams=streams, **fields)



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


