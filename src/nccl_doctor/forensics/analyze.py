"""From per-rank evidence to the rank everyone waits for (analysis only; output is in ``hang.py``).

Per process group: the collective most ranks are stuck in (sequence number, op, sizes), the ranks
that never entered it, the ranks that entered a different one, and the ranks that died before the
others timed out. A rank whose own (non-communication) error came first is the cause; timeouts and
"connection closed by peer" on the others are consequences. Positions alone never make a hang: a
log cut at any moment shows some ranks one collective ahead of others, so without a failure line
or a timeout there is nothing to explain; and communicators whose opCounts contradict themselves
(garbled logs, several jobs in one file) are not used to name anyone.

Positions are compared only within one sequence: a rank's peers cannot complete collectives the
rank never joined, so the oldest collectives the ranks of one group have not finished lie within
a few of each other (:data:`MAX_SEQ_GAP`). Records further apart (watchdog lines pasted from two
runs, an elastic restart that began counting again, P2P numbering that differs per rank) are not
one sequence, and no rank is called behind from them.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .evidence import Event, FileScan, PGState, Stream

__all__ = ["analyze", "HangReport", "RankEvidence", "GroupState", "FirstFailure", "Mismatch", "Culprit"]

KIND_ORDER = {"xid": 0, "oom": 1, "host_oom": 2, "signal": 3, "exception": 4, "nccl_warn": 5, "exit": 6}
# evidence that something failed or timed out (positions and init lines alone are not)
FAILURE_KINDS = {"watchdog", "pg_status", "monitored_barrier", "mismatch", "desync", "ras", "flight_recorder", "elastic"}
# how far apart the positions of ranks in one group can be and still belong to one sequence: a
# rank's peers finish collective k only once it joined k, so a rank stuck in k holds them at k + 1;
# a few more for sends and rooted ops that complete on one side first, and async enqueueing
MAX_SEQ_GAP = 64
_SIGNALS = {-9: "SIGKILL", -6: "SIGABRT", -11: "SIGSEGV", -7: "SIGBUS", -15: "SIGTERM", -2: "SIGINT",
            -4: "SIGILL", -8: "SIGFPE"}


@dataclass
class RankEvidence:
    """Everything known about one rank: its merged stream, host and exit."""

    rank: int
    host: str | None = None
    stream: Stream | None = None
    exit: dict | None = None  # from torchelastic: exitcode, signal, ts, root_cause


@dataclass
class GroupState:
    """One process group (or NCCL communicator): where each rank is, who waits, who is behind."""

    group: str
    seq: int | None
    positions: dict[int, int]
    waiting: list[int]
    behind: list[int]
    desc: str | None = None
    op: str | None = None
    size: str | None = None
    dtype: str | None = None
    mismatched: list[int] = field(default_factory=list)
    mismatch_kind: str | None = None
    per_rank: dict[int, dict] = field(default_factory=dict)
    timeout_ms: int | None = None
    stack: list[str] = field(default_factory=list)
    loc: str | None = None
    source: str | None = None


@dataclass
class FirstFailure:
    """The earliest failure that is a cause, not a consequence (by time, then by kind)."""

    rank: int
    host: str | None
    kind: str
    detail: str
    where: str
    before_timeouts: bool | None
    other_failed_ranks: list[int] = field(default_factory=list)


@dataclass
class Mismatch:
    """Ranks that called a different collective (op, size or dtype) from the others."""

    ranks: list[int]
    kind: str | None
    per_rank: dict
    where: str | None


@dataclass
class Culprit:
    """The rank(s) everyone waits for, their hosts, and why they are named."""

    ranks: list[int]
    hosts: list[str]
    reason: str  # crashed_first, different_collective, never_joined, exited_early, silent, node_missing
    detail: str


@dataclass
class HangReport:
    """The conclusion of the forensics. :meth:`to_dict` is None when there is no hang evidence."""

    paths: list[str]
    ranks: dict[int, RankEvidence] = field(default_factory=dict)
    unranked: list[Stream] = field(default_factory=list)
    world: int | None = None
    kinds: set[str] = field(default_factory=set)
    groups: list[GroupState] = field(default_factory=list)
    main: GroupState | None = None
    first_failure: FirstFailure | None = None
    culprit: Culprit | None = None
    mismatch: Mismatch | None = None
    missing_hosts: list[str] = field(default_factory=list)
    exited_cleanly: list[int] = field(default_factory=list)
    silent: list[int] = field(default_factory=list)
    desync: dict = field(default_factory=dict)
    ras: dict = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    by_host: dict[str, list[int]] = field(default_factory=dict)
    named_missing: list[int] = field(default_factory=list)
    waiting: list[int] = field(default_factory=list)  # the ranks that wait, as reported
    missing: list[int] = field(default_factory=list)  # the ranks the others wait for, as reported

    def has_evidence(self) -> bool:
        """A failure or a timeout was seen (positions alone are not a hang)."""
        if self.kinds & FAILURE_KINDS:
            return True
        failing = [r for r, rk in self.ranks.items() if rk.stream and rk.stream.events]
        return len(failing) >= 2 or (self.first_failure is not None and len(self.ranks) >= 2)

    # the output lives in hang.py; these are the short names callers use
    def to_dict(self) -> dict | None:
        from .hang import hang_dict

        return hang_dict(self)

    def facts(self) -> dict[str, tuple]:
        from .hang import hang_facts

        return hang_facts(self)

    def summary_lines(self) -> list[str]:
        from .hang import summary_lines

        return summary_lines(self)


def analyze(scans: list[FileScan]) -> HangReport:
    """The hang analysis of the evidence read from every file."""
    rep = HangReport(paths=[sc.path for sc in scans])
    _merge(rep, scans)
    streams = {r.rank: r.stream for r in rep.ranks.values() if r.stream is not None}
    group_ids = sorted({g for st in streams.values() for g in st.pgs}, key=lambda g: (g != "0", g))
    for g in group_ids:  # 1. per process group: positions and the collective most ranks wait in
        info = _group(g, {rk: st.pgs[g] for rk, st in streams.items() if g in st.pgs}, rep.notes)
        if info:
            rep.groups.append(info)
    info = _opcount_group(rep, streams)  # 2. NCCL's opCount per communicator
    if info:
        rep.groups.append(info)
    if rep.groups:  # the group with the most telling disagreement is the main one
        rep.main = max(rep.groups, key=lambda g: (bool(g.behind or g.mismatched), len(g.waiting), g.group == "0"))
    _first_failure(rep, streams)
    _mismatch_from_detail(rep, streams)
    _explicit_missing(rep, streams)
    _clean_exits(rep)
    _silent(rep, streams)
    rep.by_host = _hosts(rep)
    _conclude(rep)
    return rep


def _merge(rep: HangReport, scans: list[FileScan]) -> None:
    pg_ranks: dict[str, set[int]] = {}
    widest = 0
    elastic: list[dict] = []
    for sc in scans:
        if sc.problem:
            rep.problems.append(sc.problem if sc.path in sc.problem else f"{sc.path}: {sc.problem}")
        rep.notes.extend(f"{sc.path}: {n}" for n in sc.notes if len(rep.notes) < 32)
        rep.kinds |= sc.kinds
        for k, v in sc.desync.items():
            rep.desync.setdefault(k, v)
        for k, v in sc.ras.items():
            if isinstance(v, dict):
                rep.ras.setdefault(k, {}).update(v)
            else:
                rep.ras.setdefault(k, []).extend(v)
        for g, rs in sc.pg_ranks.items():
            pg_ranks.setdefault(g, set()).update(rs)
        elastic.extend(sc.elastic)
        for st in sc.streams:
            for c in st.comms.values():
                widest = max(widest, c.get("nranks") or 0)
            if st.rank is None:
                rep.unranked.append(st)
                continue
            r = rep.ranks.get(st.rank)
            if r is None:
                rep.ranks[st.rank] = RankEvidence(rank=st.rank, host=st.host, stream=st)
            elif r.stream is None:
                r.stream, r.host = st, r.host or st.host
            else:
                r.stream.absorb(st)
                r.host = r.host or st.host
    for rec in elastic:  # torchelastic's failure summary: exit codes per global rank
        rank = rec.get("rank")
        if rank is None and rec.get("first"):
            cands = [r for r in rep.ranks.values() if r.stream and r.stream.local_rank == rec["local_rank"]]
            if len(cands) == 1:
                rank = cands[0].rank
        if not isinstance(rank, int):
            continue
        r = rep.ranks.setdefault(rank, RankEvidence(rank=rank))
        if r.exit is None or rec.get("root_cause"):
            r.exit = dict(rec)
        host = rec.get("host")
        if host and not r.host and host not in ("localhost",):
            r.host = host
    for rank, info in (rep.ras.get("ranks") or {}).items():  # NCCL RAS names the host of each rank
        r = rep.ranks.setdefault(rank, RankEvidence(rank=rank))
        r.host = r.host or info.get("host")
    members = set(rep.ranks)
    for rs in pg_ranks.values():
        members |= rs
    members |= set(rep.desync.get("never_joined", []))
    for st in [r.stream for r in rep.ranks.values() if r.stream]:
        members |= set(st.barrier_missing)
    rep.world = max([widest] + [m + 1 for m in members] + [0]) or None


def _group(g: str, states: dict[int, PGState], notes: list[str]) -> GroupState | None:
    pos: dict[int, int] = {}
    stuck: dict[int, int] = {}
    for r, pst in states.items():
        if pst.enqueued is not None:
            pos[r] = pst.enqueued
        elif pst.fp_seq is not None:
            pos[r] = pst.fp_seq + 1
        if pst.stuck_seq is not None:
            stuck[r] = pst.stuck_seq
        elif pst.enqueued is not None and pst.completed is not None and pst.enqueued > pst.completed \
                and pst.source != "flight_recorder":
            stuck[r] = pst.completed + 1
        elif pst.source == "flight_recorder" and pst.entry and pst.entry.get("state") in ("scheduled", "started") \
                and pst.entry.get("seq") is not None and pst.completed is not None and pst.entry["seq"] > pst.completed:
            stuck[r] = pst.entry["seq"]
        if r in stuck and r not in pos:
            pos[r] = stuck[r]
    if not _one_sequence(g, pos, stuck, notes):
        return None
    if stuck:
        counts = Counter(stuck.values())
        seq = max(counts, key=lambda s: (counts[s], s))
    else:
        seq = max(pos.values())
    waiting = sorted(r for r, p in pos.items() if p >= seq)
    behind = sorted(r for r, p in pos.items() if p < seq)
    sigs: dict[int, tuple] = {}
    detail: dict[int, dict] = {}
    for r in waiting:  # what each waiting rank runs at `seq`
        d = _op_at(states[r], seq)
        if d:
            detail[r] = d
            sigs[r] = (d.get("op"), d.get("size"), d.get("dtype"))
    mismatched, kind = _odd_ones(sigs, states)
    ref = next((detail[r] for r in waiting if r in detail and r not in mismatched), None)
    if ref is None and detail:
        ref = next(iter(detail.values()))
    ref = ref or {}
    locs = [states[r].loc for r in sorted(states) if states[r].loc]
    return GroupState(
        group=g, seq=seq, positions={r: pos[r] for r in sorted(pos)}, waiting=waiting, behind=behind,
        desc=next((states[r].desc for r in states if states[r].desc), None), op=ref.get("op"), size=ref.get("size"),
        dtype=ref.get("dtype"), mismatched=mismatched, mismatch_kind=kind, per_rank={r: detail[r] for r in sorted(detail)},
        timeout_ms=next((states[r].timeout_ms for r in states if states[r].timeout_ms), None),
        stack=ref.get("stack") or [], loc=locs[0] if locs else None,
        source=next((states[r].source for r in states if states[r].source), None))


def _one_sequence(g: str, pos: dict[int, int], stuck: dict[int, int], notes: list[str]) -> bool:
    """Keep in ``pos`` and ``stuck`` only the ranks whose positions can belong to one sequence.

    The stuck positions are split where they lie more than :data:`MAX_SEQ_GAP` apart; the part
    most ranks are stuck in is the group's, and a rank of another part, or one whose latest work
    lies further below it, is not compared (noted). False when nothing comparable is left, or when
    no part holds more ranks than the others (then nobody can say which run is this group's)."""
    if not pos:
        return False
    parts: list[list[int]] = []
    for r in sorted(stuck, key=lambda r: stuck[r]):
        if parts and stuck[r] - stuck[parts[-1][-1]] <= MAX_SEQ_GAP:
            parts[-1].append(r)
        else:
            parts.append([r])
    dropped: list[int] = []
    if len(parts) > 1:
        parts.sort(key=len, reverse=True)
        if len(parts[0]) == len(parts[1]):
            seqs = ", ".join(f"rank {r} at #{stuck[r]}" for p in parts for r in p[:4])
            notes.append(f"group {g}: the watchdog's collectives lie too far apart to be one run of one group "
                         f"({seqs}): several runs or groups in one log? No rank is named from them")
            return False
        dropped = [r for p in parts[1:] for r in p]
    if stuck:
        low = min(stuck[r] for r in parts[0]) - MAX_SEQ_GAP
        dropped += [r for r, p in pos.items() if r not in stuck and p < low]
    if dropped:
        notes.append(f"group {g}: rank(s) {fmt_ranks(dropped)} stand more than {MAX_SEQ_GAP} collectives from the "
                     "others; not the same run of this group, so not called behind")
        for r in dropped:
            pos.pop(r, None)
            stuck.pop(r, None)
    return bool(pos)


def _odd_ones(sigs: dict[int, tuple], states: dict[int, PGState]) -> tuple[list[int], str | None]:
    """The ranks whose (op, size, dtype) differs from the others', and what differs."""
    if len(sigs) < 2:
        return [], None
    common = Counter(sigs.values()).most_common()
    if len(common) < 2:
        return [], None
    if common[0][1] > common[1][1]:
        ref = common[0][0]
        mismatched = sorted(r for r, s in sigs.items() if s != ref)
        a, b = ref, sigs[mismatched[0]]
    else:  # a tie: the side that repeats what the group did just before is the normal one
        hist: Counter = Counter()
        for r in sigs:
            pe = states[r].prev_entry
            if pe:
                hist[(pe.get("op"), str(pe.get("input_sizes")), ",".join(pe.get("input_dtypes") or []) or None)] += 1
        tied = [c[0] for c in common if c[1] == common[0][1]]
        normal = [t for t in tied if hist.get(t)]
        if len(normal) == 1:
            mismatched = sorted(r for r, s in sigs.items() if s != normal[0])
            a, b = normal[0], sigs[mismatched[0]]
        else:
            mismatched = sorted(sigs)  # cannot tell which side is odd
            a, b = common[0][0], common[1][0]
    return mismatched, "op" if a[0] != b[0] else "size" if a[1] != b[1] else "dtype"


def _op_at(pst: PGState, seq: int) -> dict | None:
    for e in (pst.entry, pst.last_entry):
        if e and e.get("seq") == seq:
            size = e.get("input_sizes")
            return {"op": e.get("op"), "size": str(size) if size is not None else None,
                    "dtype": ",".join(e.get("input_dtypes") or []) or None, "state": e.get("state"),
                    "stack": e.get("stack") or []}
    if pst.stuck_seq == seq and pst.op:
        size = f"{pst.numel_in}->{pst.numel_out}" if pst.numel_in is not None else None
        return {"op": pst.op, "size": size, "dtype": None}
    if pst.fp_seq is not None and pst.fp_seq + 1 == seq:
        return {"op": pst.fp_op, "size": pst.fp_shape, "dtype": pst.fp_dtype}
    return None


def _opcount_group(rep: HangReport, streams: dict[int, Stream]) -> GroupState | None:
    """Positions from NCCL's opCount lines, per communicator, where they are consistent."""
    by_comm: dict[str, dict[int, dict]] = {}
    owner: dict[tuple[str, int], tuple[int, str]] = {}
    bad: set[str] = set()
    for r, st in streams.items():
        for ptr, c in st.comms.items():
            key = c.get("commId") or f"nranks{c.get('nranks')}"
            if c.get("contradictory"):
                bad.add(key)
            rank = c.get("rank", r) if c.get("commId") else r
            if not isinstance(rank, int) or ("opCount" not in c and "init" not in c):
                continue
            if owner.setdefault((key, rank), (id(st), ptr)) != (id(st), ptr):
                bad.add(key)  # two processes, or two communicators, claim one rank of one communicator
            by_comm.setdefault(key, {})[rank] = c
    for key in sorted(bad):
        rep.notes.append(f"communicator {key}: opCounts contradict each other (garbled, or several jobs in one file); "
                         "not used to name a rank")
    best = None
    for key, ranks in by_comm.items():
        counted = {r: c for r, c in ranks.items() if "opCount" in c}
        if key in bad or len(counted) < 2:
            continue
        pos = {r: c["opCount"] for r, c in counted.items()}
        seq = max(pos.values())
        waiting = sorted(r for r, p in pos.items() if p >= seq)
        # ranks that initialised this communicator but printed no collective near the end are behind too
        behind = sorted({r for r, p in pos.items() if p < seq} | (set(ranks) - set(counted)))
        ref = counted[waiting[0]]
        info = GroupState(group=f"nccl:{key}", seq=seq, positions=pos, waiting=waiting, behind=behind,
                          op=ref.get("op"), size=str(ref.get("count")), dtype=str(ref.get("datatype")),
                          loc=ref.get("op_loc"), source="nccl_opcount")
        if best is None or len(behind) > len(best.behind):
            best = info
    return best


def _first_failure(rep: HangReport, streams: dict[int, Stream]) -> None:
    cands: list[tuple] = []
    secondary_ts: list[float] = []
    for r, st in streams.items():
        for ev in st.events:
            if not ev.primary and ev.ts is not None:
                secondary_ts.append(ev.ts)
        ev = st.first_primary
        if ev is not None:
            cands.append((ev.ts is None, ev.ts or 0.0, KIND_ORDER.get(ev.kind, 9), r, ev))
    for r, rk in rep.ranks.items():
        ex = rk.exit
        if not ex or any(c[3] == r for c in cands):
            continue
        code = ex.get("exitcode")
        sig = ex.get("signal") or _SIGNALS.get(code)
        st = streams.get(r)
        only_secondary = st is not None and st.events and st.first_primary is None
        if code in (None, 0) or sig in ("SIGTERM", "SIGINT") or only_secondary:
            continue
        kind = "signal" if (code or 0) < 0 else "exit"
        text = f"exit code {code}" + (f" ({sig})" if sig else "")
        if sig == "SIGKILL":
            text += ": killed from outside, often the host's out-of-memory killer"
        ev = Event(kind, text, ex.get("ts"), ex.get("loc", ""), primary=True)
        cands.append((ev.ts is None, ev.ts or 0.0, KIND_ORDER.get(kind, 9), r, ev))
    if not cands:
        return
    cands.sort(key=lambda c: c[:4])
    _, _, _, r, ev = cands[0]
    before_timeouts = None
    if ev.ts is not None and secondary_ts:
        before_timeouts = ev.ts <= min(secondary_ts) + 1.0
    rep.first_failure = FirstFailure(rank=r, host=rep.ranks[r].host, kind=ev.kind, detail=ev.text, where=ev.loc,
                                     before_timeouts=before_timeouts,
                                     other_failed_ranks=sorted({c[3] for c in cands[1:]}))


def _mismatch_from_detail(rep: HangReport, streams: dict[int, Stream]) -> None:
    fps: dict[int, dict] = {}
    loc = None
    for st in streams.values():
        for m in st.mismatch:
            loc = loc or m.get("loc")
            if m.get("a") and m.get("rank_a") is not None:
                fps.setdefault(m["rank_a"], m["a"])
            if m.get("b") and m.get("rank_b") is not None:
                fps.setdefault(m["rank_b"], m["b"])
    if len(fps) < 2:
        if rep.main and rep.main.mismatched:
            rep.mismatch = Mismatch(rep.main.mismatched, rep.main.mismatch_kind, rep.main.per_rank, rep.main.loc)
        return
    sig = {r: (f.get("op"), f.get("shape"), f.get("dtype")) for r, f in fps.items()}
    common = Counter(sig.values()).most_common()
    ref = common[0][0]
    if len(common) > 1 and common[0][1] > common[1][1]:
        odd = sorted(r for r, s in sig.items() if s != ref)
    else:
        odd = sorted(sig)
    o = sig[odd[0]] if odd else ref
    kind = "op" if o[0] != ref[0] else "size" if o[1] != ref[1] else "dtype"
    rep.mismatch = Mismatch(odd, kind, fps, loc)


def _explicit_missing(rep: HangReport, streams: dict[int, Stream]) -> None:
    """Ranks other ranks name: monitored barrier, desync report, RAS."""
    named: set[int] = set()
    for st in streams.values():
        named |= set(st.barrier_missing)
    named |= set(rep.desync.get("never_joined", []))
    fnj, nj = rep.desync.get("joined_not_finished"), rep.desync.get("finished_not_joined")
    if nj and fnj:
        named |= set(fnj["ranks"]) if len(fnj["ranks"]) < len(nj["ranks"]) else set()
    ras, maj = rep.ras.get("ranks") or {}, rep.ras.get("majority") or []
    if ras and maj:
        top = max(maj, key=lambda m: m["count"])["op"]
        named |= {r for r, i in ras.items() if i["op"] < top}
    rep.named_missing = sorted(named)


def _clean_exits(rep: HangReport) -> None:
    failed_any = any(rk.exit and rk.exit.get("exitcode") not in (0, None) for rk in rep.ranks.values())
    waiting = bool(rep.main and rep.main.waiting) or "watchdog" in rep.kinds
    if failed_any or waiting:
        rep.exited_cleanly = sorted(r for r, rk in rep.ranks.items() if rk.exit and rk.exit.get("exitcode") == 0)


def _silent(rep: HangReport, streams: dict[int, Stream]) -> None:
    """Ranks that said nothing about a failure while the others failed on communication."""
    complained = {r for r, st in streams.items() if st.events or any(
        p.stuck_seq is not None or p.enqueued is not None for p in st.pgs.values())}
    if complained and len(streams) >= 2:
        quiet = sorted(r for r, st in streams.items() if r not in complained and not st.is_dump)
        if quiet and len(quiet) < len(streams):
            rep.silent = quiet


def _hosts(rep: HangReport) -> dict[str, list[int]]:
    by_host: dict[str, list[int]] = {}
    for r, rk in rep.ranks.items():
        if rk.host:
            by_host.setdefault(rk.host, []).append(r)
    return {h: sorted(rs) for h, rs in sorted(by_host.items())}


def _conclude(rep: HangReport) -> None:
    main = rep.main
    behind = set(main.behind if main else []) | set(rep.named_missing)
    waiting = set(main.waiting if main else []) - behind
    ff = rep.first_failure
    dead = ({ff.rank} | set(ff.other_failed_ranks)) if ff else set()
    gone = behind | dead | set(rep.silent)
    if len(rep.by_host) >= 2:  # a whole node missing: every rank of a host is behind / dead / silent, others wait
        for host, rs in rep.by_host.items():
            if rs and set(rs) <= gone and any(set(o) - gone for h, o in rep.by_host.items() if h != host):
                rep.missing_hosts.append(host)
    for d in rep.ras.get("dead", []) or []:
        if d.get("host") and d["host"] not in rep.missing_hosts:
            rep.missing_hosts.append(d["host"])
    reason, ranks, detail = _reason(rep, behind)
    if rep.missing_hosts and reason in ("never_joined", "silent", "crashed_first", None):
        hosts_ranks = sorted({r for h in rep.missing_hosts for r in rep.by_host.get(h, [])})
        if hosts_ranks or reason is None:
            ranks = hosts_ranks or ranks
            if reason != "crashed_first":
                reason = "node_missing"
                detail = f"every rank on {', '.join(rep.missing_hosts)} ({fmt_ranks(ranks)}) is missing from the collective"
    if reason:
        hosts = sorted({rep.ranks[r].host for r in ranks if r in rep.ranks and rep.ranks[r].host})
        rep.culprit = Culprit(ranks=ranks, hosts=hosts, reason=reason, detail=detail)
    quiet = set(rep.silent) if reason in ("silent", "node_missing", "never_joined", None) else set()
    if reason == "crashed_first":
        rep.missing = sorted(behind | set(ranks))
    else:
        odd = set(rep.mismatch.ranks) if rep.mismatch and reason == "different_collective" else set()
        rep.missing = sorted((behind | quiet | odd) - waiting)
    rep.waiting = sorted(waiting - set(rep.missing))


def _reason(rep: HangReport, behind: set[int]) -> tuple[str | None, list[int], str]:
    ff = rep.first_failure
    if ff and ff.before_timeouts in (True, None):
        return "crashed_first", [ff.rank], f"rank {ff.rank} failed first ({ff.kind}): {ff.detail}"
    if rep.mismatch and rep.mismatch.ranks:
        ranks = list(rep.mismatch.ranks)
        return "different_collective", ranks, f"rank(s) {fmt_ranks(ranks)} issued a different collective ({rep.mismatch.kind} differs)"
    if behind:
        ranks = sorted(behind)
        seq = rep.main.seq if rep.main else None
        return "never_joined", ranks, (f"rank(s) {fmt_ranks(ranks)} never entered collective #{seq}" if seq is not None
                                       else f"rank(s) {fmt_ranks(ranks)} did not reach the collective the others wait in")
    if rep.exited_cleanly:
        ranks = list(rep.exited_cleanly)
        return "exited_early", ranks, f"rank(s) {fmt_ranks(ranks)} exited normally while the others still waited"
    if rep.silent:
        ranks = list(rep.silent)
        return "silent", ranks, f"rank(s) {fmt_ranks(ranks)} reported nothing while the others failed waiting on them"
    if ff:
        return "crashed_first", [ff.rank], f"rank {ff.rank} failed ({ff.kind}): {ff.detail}"
    return None, [], ""


def fmt_ranks(ranks) -> str:
    """"0, 1, 2" (at most 12, then how many more)."""
    ranks = sorted(ranks)
    if len(ranks) > 12:
        return ", ".join(map(str, ranks[:12])) + f" (+{len(ranks) - 12} more)"
    return ", ".join(map(str, ranks))
