"""From per-rank evidence to the rank everyone waits for.

Per process group: the collective most ranks are stuck in (sequence number, op, sizes), the ranks
that never entered it, the ranks that entered a different one, and the ranks that died before the
others timed out. A rank whose own (non-communication) error came first is the cause; timeouts and
"connection closed by peer" on the others are consequences.
"""
from __future__ import annotations

import os
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from .frdump import DumpProblem, looks_like_dump, scan_dump
from .scan import Event, FileScan, PGState, Stream, scan_file

__all__ = ["analyze_paths", "HangReport"]

_PARALLEL_MIN_BYTES = 16 << 20
_KIND_ORDER = {"xid": 0, "oom": 1, "host_oom": 2, "signal": 3, "exception": 4, "nccl_warn": 5, "exit": 6}
_HANG_KINDS = {"watchdog", "pg_status", "monitored_barrier", "mismatch", "desync", "ras", "flight_recorder",
               "elastic", "detail"}
_SIGNALS = {-9: "SIGKILL", -6: "SIGABRT", -11: "SIGSEGV", -7: "SIGBUS", -15: "SIGTERM", -2: "SIGINT",
            -4: "SIGILL", -8: "SIGFPE"}

_FR_ENV = {"TORCH_FR_BUFFER_SIZE": "2000", "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000",
           "TORCH_NCCL_DUMP_ON_TIMEOUT": "1", "TORCH_FR_DUMP_TEMP_FILE": "/shared/fr/nccl_trace_rank_"}


def _read_one(path: str) -> FileScan:
    try:
        with open(path, "rb") as f:
            head = f.read(65536)
    except OSError as exc:
        return FileScan(path=path, streams=[], problem=f"cannot open: {exc.strerror or exc}")
    if looks_like_dump(head):
        try:
            return scan_dump(path)
        except DumpProblem as exc:
            return FileScan(path=path, streams=[], problem=str(exc))
    if b"\x00" in head[:8192]:
        return FileScan(path=path, streams=[], problem=f"{path}: binary file, neither a log nor a Flight Recorder dump")
    return scan_file(path)


def _expand(paths: list[str]) -> list[str]:
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                out.extend(os.path.join(root, f) for f in sorted(files) if not f.startswith("."))
        else:
            out.append(p)
    return list(dict.fromkeys(out))


def analyze_paths(paths: list[str], *, jobs: int | None = None) -> "HangReport":
    """Read per-rank / per-node logs, one interleaved log, and/or Flight Recorder dumps."""
    files = _expand([str(p) for p in paths])
    jobs = jobs or os.cpu_count() or 1
    total = 0
    for p in files:
        try:
            total += os.path.getsize(p)
        except OSError:
            pass
    if jobs > 1 and len(files) > 1 and total >= _PARALLEL_MIN_BYTES:
        with ProcessPoolExecutor(max_workers=min(jobs, len(files))) as pool:
            scans = list(pool.map(_read_one, files, chunksize=max(1, len(files) // (jobs * 8))))
    else:
        scans = [_read_one(p) for p in files]
    return HangReport.build(scans)


# ----------------------------------------------------------------------------------------------
@dataclass
class _Rank:
    rank: int
    host: str | None = None
    stream: Stream | None = None
    exit: dict | None = None  # from torchelastic: exitcode, signal, ts, root_cause


@dataclass
class HangReport:
    """The conclusion of the forensics. ``to_dict()`` is None when there is no hang evidence."""

    scans: list[FileScan]
    ranks: dict[int, _Rank] = field(default_factory=dict)
    unranked: list[Stream] = field(default_factory=list)
    world: int | None = None
    kinds: set[str] = field(default_factory=set)
    groups: list[dict] = field(default_factory=list)
    main: dict | None = None
    first_failure: dict | None = None
    culprit: dict | None = None
    mismatch: dict | None = None
    missing_hosts: list[str] = field(default_factory=list)
    exited_cleanly: list[int] = field(default_factory=list)
    silent: list[int] = field(default_factory=list)
    desync: dict = field(default_factory=dict)
    ras: dict = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    _facts: dict = field(default_factory=dict)

    # -- building ------------------------------------------------------------------------------
    @classmethod
    def build(cls, scans: list[FileScan]) -> "HangReport":
        rep = cls(scans=scans)
        rep._merge()
        rep._analyze()
        return rep

    def _merge(self) -> None:
        pg_ranks: dict[str, set[int]] = {}
        widest = 0
        elastic: list[dict] = []
        for sc in self.scans:
            if sc.problem:
                self.problems.append(sc.problem if sc.path in sc.problem else f"{sc.path}: {sc.problem}")
            self.kinds |= sc.kinds
            for k, v in sc.desync.items():
                self.desync.setdefault(k, v)
            for k, v in sc.ras.items():
                if isinstance(v, dict):
                    self.ras.setdefault(k, {}).update(v)
                else:
                    self.ras.setdefault(k, []).extend(v)
            for g, rs in sc.pg_ranks.items():
                pg_ranks.setdefault(g, set()).update(rs)
            elastic.extend(sc.elastic)
            for st in sc.streams:
                for c in st.comms.values():
                    widest = max(widest, c.get("nranks", 0))
                if st.rank is None:
                    self.unranked.append(st)
                    continue
                r = self.ranks.get(st.rank)
                if r is None:
                    self.ranks[st.rank] = _Rank(rank=st.rank, host=st.host, stream=st)
                else:
                    r.stream.absorb(st)
                    r.host = r.host or st.host
        # torchelastic's failure summary: exit codes per global rank
        for rec in elastic:
            rank = rec.get("rank")
            if rank is None and rec.get("first"):
                cands = [r for r in self.ranks.values()
                         if r.stream and r.stream.local_rank == rec["local_rank"]]
                if len(cands) == 1:
                    rank = cands[0].rank
            if not isinstance(rank, int):
                continue
            r = self.ranks.setdefault(rank, _Rank(rank=rank))
            if r.exit is None or rec.get("root_cause"):
                r.exit = dict(rec)
            host = rec.get("host")
            if host and not r.host and host not in ("localhost",):
                r.host = host
        for rank, info in (self.ras.get("ranks") or {}).items():  # NCCL RAS names host per rank
            r = self.ranks.setdefault(rank, _Rank(rank=rank))
            r.host = r.host or info.get("host")
        members = set(self.ranks)
        for rs in pg_ranks.values():
            members |= rs
        members |= set(self.desync.get("never_joined", []))
        for st in [r.stream for r in self.ranks.values() if r.stream]:
            members |= set(st.barrier_missing)
        world = max([widest] + [m + 1 for m in members] + [0])
        self.world = world or None

    # -- analysis ------------------------------------------------------------------------------
    def _analyze(self) -> None:
        streams = {r.rank: r.stream for r in self.ranks.values() if r.stream is not None}
        # 1. per process group: positions and the collective most ranks wait in
        group_ids = sorted({g for st in streams.values() for g in st.pgs}, key=lambda g: (g != "0", g))
        for g in group_ids:
            info = self._group(g, {rk: st.pgs[g] for rk, st in streams.items() if g in st.pgs})
            if info:
                self.groups.append(info)
        # 2. NCCL opCount per communicator (commId) when PyTorch lines are absent
        if not self.groups:
            info = self._opcount_group(streams)
            if info:
                self.groups.append(info)
        # the group with the most telling disagreement is the main one
        def weight(gi: dict) -> tuple:
            return (bool(gi["behind"] or gi["mismatched"]), len(gi["waiting"]), gi["group"] == "0")
        if self.groups:
            self.main = max(self.groups, key=weight)
        self._first_failure(streams)
        self._mismatch_from_detail(streams)
        self._explicit_missing(streams)
        self._clean_exits()
        self._silent(streams)
        self._hosts()
        self._conclude()

    def _group(self, g: str, states: dict[int, PGState]) -> dict | None:
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
                    and pst.entry.get("seq") is not None and pst.completed is not None \
                    and pst.entry["seq"] > pst.completed:
                stuck[r] = pst.entry["seq"]
            if r in stuck and r not in pos:
                pos[r] = stuck[r]
        if not pos:
            return None
        if stuck:
            counts = Counter(stuck.values())
            seq = max(counts, key=lambda s: (counts[s], s))
        else:
            if len(set(pos.values())) <= 1:
                seq = max(pos.values())
            else:
                seq = max(pos.values())
        waiting = sorted(r for r, p in pos.items() if p >= seq)
        behind = sorted(r for r, p in pos.items() if p < seq)
        # what each waiting rank runs at `seq`
        sigs: dict[int, tuple] = {}
        detail: dict[int, dict] = {}
        for r in waiting:
            pst = states[r]
            d = self._op_at(pst, seq)
            if d:
                detail[r] = d
                sigs[r] = (d.get("op"), d.get("size"), d.get("dtype"))
        mismatched: list[int] = []
        kind = None
        if len(sigs) >= 2:
            common = Counter(sigs.values()).most_common()
            if len(common) > 1 and common[0][1] > common[1][1]:
                ref = common[0][0]
                mismatched = sorted(r for r, s in sigs.items() if s != ref)
                odd = sigs[mismatched[0]]
                kind = "op" if odd[0] != ref[0] else "size" if odd[1] != ref[1] else "dtype"
            elif len(common) > 1:
                # a tie: the side that repeats what the group did just before is the normal one
                hist = Counter()
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
                kind = "op" if a[0] != b[0] else "size" if a[1] != b[1] else "dtype"
        ref_detail = None
        for r in waiting:
            if r in detail and r not in mismatched:
                ref_detail = detail[r]
                break
        if ref_detail is None and detail:
            ref_detail = next(iter(detail.values()))
        desc = next((states[r].desc for r in states if states[r].desc), None)
        locs = [states[r].loc for r in sorted(states) if states[r].loc]
        return {"group": g, "desc": desc, "seq": seq, "op": (ref_detail or {}).get("op"),
                "size": (ref_detail or {}).get("size"), "dtype": (ref_detail or {}).get("dtype"),
                "positions": {r: pos[r] for r in sorted(pos)}, "waiting": waiting, "behind": behind,
                "mismatched": mismatched, "mismatch_kind": kind,
                "per_rank": {r: detail[r] for r in sorted(detail)},
                "timeout_ms": next((states[r].timeout_ms for r in states if states[r].timeout_ms), None),
                "stack": (ref_detail or {}).get("stack") or [], "loc": locs[0] if locs else None,
                "source": next((states[r].source for r in states if states[r].source), None)}

    @staticmethod
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

    def _opcount_group(self, streams: dict[int, Stream]) -> dict | None:
        by_comm: dict[str, dict[int, dict]] = {}
        for r, st in streams.items():
            for c in st.comms.values():
                if "opCount" in c:
                    key = c.get("commId") or f"nranks{c.get('nranks')}"
                    by_comm.setdefault(key, {})[c.get("rank", r) if c.get("commId") else r] = c
        best = None
        for key, ranks in by_comm.items():
            if len(ranks) < 2:
                continue
            pos = {r: c["opCount"] for r, c in ranks.items()}
            seq = max(pos.values())
            waiting = sorted(r for r, p in pos.items() if p >= seq)
            behind = sorted(r for r, p in pos.items() if p < seq)
            ref = ranks[waiting[0]]
            info = {"group": f"nccl:{key}", "desc": None, "seq": seq, "op": ref.get("op"),
                    "size": str(ref.get("count")), "dtype": str(ref.get("datatype")),
                    "positions": pos, "waiting": waiting, "behind": behind, "mismatched": [],
                    "mismatch_kind": None, "per_rank": {}, "timeout_ms": None, "stack": [],
                    "loc": ref.get("op_loc"), "source": "nccl_opcount"}
            if best is None or len(behind) > len(best["behind"]):
                best = info
        return best

    def _first_failure(self, streams: dict[int, Stream]) -> None:
        cands: list[tuple] = []
        secondary_ts: list[float] = []
        for r, st in streams.items():
            for ev in st.events:
                if not ev.primary and ev.ts is not None:
                    secondary_ts.append(ev.ts)
            ev = st.first_primary
            if ev is not None:
                cands.append((ev.ts is None, ev.ts or 0.0, _KIND_ORDER.get(ev.kind, 9), r, ev))
        for r, rk in self.ranks.items():
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
            cands.append((ev.ts is None, ev.ts or 0.0, _KIND_ORDER.get(kind, 9), r, ev))
        if not cands:
            return
        cands.sort(key=lambda c: c[:4])
        _, _, _, r, ev = cands[0]
        before_timeouts = None
        if ev.ts is not None and secondary_ts:
            before_timeouts = ev.ts <= min(secondary_ts) + 1.0
        self.first_failure = {"rank": r, "host": self.ranks[r].host, "kind": ev.kind, "detail": ev.text,
                              "where": ev.loc, "before_timeouts": before_timeouts,
                              "other_failed_ranks": sorted({c[3] for c in cands[1:]})}

    def _mismatch_from_detail(self, streams: dict[int, Stream]) -> None:
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
            if self.main and self.main["mismatched"]:
                self.mismatch = {"ranks": self.main["mismatched"], "kind": self.main["mismatch_kind"],
                                 "per_rank": self.main["per_rank"], "where": self.main.get("loc")}
            return
        sig = {r: (f.get("op"), f.get("shape"), f.get("dtype")) for r, f in fps.items()}
        common = Counter(sig.values()).most_common()
        if len(common) > 1 and common[0][1] > common[1][1]:
            odd = sorted(r for r, s in sig.items() if s != common[0][0])
            ref = common[0][0]
        else:
            odd = sorted(sig)
            ref = common[0][0]
        o = sig[odd[0]] if odd else ref
        kind = "op" if o[0] != ref[0] else "size" if o[1] != ref[1] else "dtype"
        self.mismatch = {"ranks": odd, "kind": kind, "per_rank": fps, "where": loc}

    def _explicit_missing(self, streams: dict[int, Stream]) -> None:
        """Ranks other ranks name: monitored barrier, desync report, RAS, dump signal."""
        named: set[int] = set()
        for st in streams.values():
            named |= set(st.barrier_missing)
        named |= set(self.desync.get("never_joined", []))
        fnj = self.desync.get("joined_not_finished")
        nj = self.desync.get("finished_not_joined")
        if nj and fnj:
            named |= set(fnj["ranks"]) if len(fnj["ranks"]) < len(nj["ranks"]) else set()
        ras = self.ras.get("ranks") or {}
        maj = self.ras.get("majority") or []
        if ras and maj:
            top = max(maj, key=lambda m: m["count"])["op"]
            named |= {r for r, i in ras.items() if i["op"] < top}
        self._named_missing = sorted(named)

    def _clean_exits(self) -> None:
        failed_any = any(rk.exit and rk.exit.get("exitcode") not in (0, None) for rk in self.ranks.values())
        waiting = bool(self.main and self.main["waiting"]) or "watchdog" in self.kinds
        if failed_any or waiting:
            self.exited_cleanly = sorted(r for r, rk in self.ranks.items() if rk.exit and rk.exit.get("exitcode") == 0)

    def _silent(self, streams: dict[int, Stream]) -> None:
        """Ranks that said nothing about a failure while the others failed on communication."""
        complained = {r for r, st in streams.items() if st.events or any(
            p.stuck_seq is not None or p.enqueued is not None for p in st.pgs.values())}
        if len(complained) >= 1 and len(streams) >= 2:
            quiet = sorted(r for r, st in streams.items() if r not in complained and not st.is_dump)
            if quiet and len(quiet) < len(streams):
                self.silent = quiet

    def _hosts(self) -> None:
        by_host: dict[str, list[int]] = {}
        for r, rk in self.ranks.items():
            if rk.host:
                by_host.setdefault(rk.host, []).append(r)
        self.by_host = {h: sorted(rs) for h, rs in sorted(by_host.items())}

    def _conclude(self) -> None:
        main = self.main or {}
        behind = set(main.get("behind", [])) | set(self._named_missing)
        waiting = set(main.get("waiting", [])) - behind
        dead = set()
        if self.first_failure:
            dead.add(self.first_failure["rank"])
            dead |= set(self.first_failure.get("other_failed_ranks", []))
        gone = behind | dead | set(self.silent)
        # a whole node missing: every rank of a host is behind / dead / silent, others wait
        if len(self.by_host) >= 2:
            for host, rs in self.by_host.items():
                if rs and set(rs) <= gone and any(set(o) - gone for h, o in self.by_host.items() if h != host):
                    self.missing_hosts.append(host)
        for d in self.ras.get("dead", []) or []:
            if d.get("host") and d["host"] not in self.missing_hosts:
                self.missing_hosts.append(d["host"])
        reason = None
        ranks: list[int] = []
        detail = ""
        if self.first_failure and (self.first_failure.get("before_timeouts") in (True, None)):
            ff = self.first_failure
            ranks, reason = [ff["rank"]], "crashed_first"
            detail = f"rank {ff['rank']} failed first ({ff['kind']}): {ff['detail']}"
        elif self.mismatch and self.mismatch["ranks"]:
            ranks, reason = list(self.mismatch["ranks"]), "different_collective"
            detail = f"rank(s) {_fmt(ranks)} issued a different collective ({self.mismatch['kind']} differs)"
        elif behind:
            ranks, reason = sorted(behind), "never_joined"
            seq = main.get("seq")
            detail = f"rank(s) {_fmt(ranks)} never entered collective #{seq}" if seq is not None else \
                f"rank(s) {_fmt(ranks)} did not reach the collective the others wait in"
        elif self.exited_cleanly:
            ranks, reason = list(self.exited_cleanly), "exited_early"
            detail = f"rank(s) {_fmt(ranks)} exited normally while the others still waited"
        elif self.silent:
            ranks, reason = list(self.silent), "silent"
            detail = f"rank(s) {_fmt(ranks)} reported nothing while the others failed waiting on them"
        elif self.first_failure:
            ff = self.first_failure
            ranks, reason = [ff["rank"]], "crashed_first"
            detail = f"rank {ff['rank']} failed ({ff['kind']}): {ff['detail']}"
        if self.missing_hosts and reason in ("never_joined", "silent", "crashed_first", None):
            hosts_ranks = sorted({r for h in self.missing_hosts for r in self.by_host.get(h, [])})
            if hosts_ranks or reason is None:
                ranks = hosts_ranks or ranks
                reason = "node_missing" if reason != "crashed_first" else reason
                detail = f"every rank on {', '.join(self.missing_hosts)} ({_fmt(ranks)}) is missing from the collective" \
                    if reason == "node_missing" else detail
        if reason:
            hosts = sorted({self.ranks[r].host for r in ranks if r in self.ranks and self.ranks[r].host})
            self.culprit = {"ranks": ranks, "hosts": hosts, "reason": reason, "detail": detail}
        quiet = set(self.silent) if reason in ("silent", "node_missing", "never_joined", None) else set()
        if reason == "crashed_first":
            self._missing = sorted(behind | set(ranks))
        else:
            odd = set(self.mismatch["ranks"]) if self.mismatch and reason == "different_collective" else set()
            self._missing = sorted((behind | quiet | odd) - waiting)
        self._waiting = sorted(waiting - set(self._missing))

    # -- outputs -------------------------------------------------------------------------------
    def has_evidence(self) -> bool:
        if self.kinds & _HANG_KINDS:
            return True
        if self.groups and any(g["behind"] or g["mismatched"] for g in self.groups):
            return True
        failing = [r for r, rk in self.ranks.items() if rk.stream and rk.stream.events]
        return len(failing) >= 2 or (self.first_failure is not None and len(self.ranks) >= 2)

    def _where(self, *locs) -> str:
        for loc in locs:
            if loc:
                return loc
        return self.scans[0].path if self.scans else "logs"

    def facts(self) -> dict[str, tuple]:
        """fact -> (value, "file:line") for the engine."""
        if not self.has_evidence():
            return {}
        out: dict[str, tuple] = {}
        main = self.main or {}
        where_main = self._where(main.get("loc"))
        out["hang_evidence_found"] = (True, where_main)
        c = self.culprit
        if main.get("op"):
            out["hang_collective"] = (str(main["op"]), where_main)
            out["collective_op"] = (str(main["op"]).upper(), where_main)
        if main.get("seq") is not None:
            out["hang_collective_seq"] = (int(main["seq"]), where_main)
        n = len(self.ranks) or (self.world or 0)
        if c:
            where_c = self._where(
                (self.first_failure or {}).get("where") if c["reason"] == "crashed_first" else None,
                (self.mismatch or {}).get("where") if c["reason"] == "different_collective" else None,
                main.get("loc"))
            out["hang_culprit_rank"] = (int(c["ranks"][0]), where_c)
            out["failing_rank"] = (int(c["ranks"][0]), where_c)
            if c["hosts"]:
                out["hang_culprit_host"] = (c["hosts"][0], where_c)
            out["hang_culprit_reason"] = (c["reason"], where_c)
            if c["reason"] in ("never_joined", "silent", "exited_early", "node_missing"):
                out["hang_ranks_behind_count"] = (len(c["ranks"]), where_c)
                if c["reason"] != "node_missing" and (not n or len(c["ranks"]) * 2 < max(n, 2) or len(c["ranks"]) == 1):
                    out["hang_one_rank_behind"] = (True, where_c)
                    out["hang_rank0_behind"] = (c["ranks"] == [0], where_c)
            if c["reason"] == "different_collective":
                out["hang_ranks_disagree_on_collective"] = (True, where_c)
                if self.mismatch and self.mismatch.get("kind"):
                    out["hang_mismatch_kind"] = (self.mismatch["kind"], where_c)
            if c["reason"] == "crashed_first":
                ff = self.first_failure
                out["hang_rank_exited_first"] = (True, where_c)
                out["hang_first_failure_kind"] = (ff["kind"] if ff["kind"] in _KIND_ORDER else "exception", where_c)
            if c["reason"] == "exited_early":
                out["hang_rank_exited_cleanly"] = (True, where_c)
        if self.missing_hosts:
            out["hang_node_missing"] = (True, self._where(main.get("loc")))
            if len(self.by_host) >= 2:
                out["multi_node"] = (True, self._where(main.get("loc")))
        if main and not main["behind"] and not main["mismatched"] and len(main["waiting"]) >= 2 and \
                not self._named_missing and not (c and c["reason"] in ("crashed_first", "different_collective")) \
                and (not self.world or len(main["waiting"]) >= self.world):
            out["hang_all_ranks_same_seq"] = (True, where_main)
        return out

    def to_dict(self) -> dict | None:
        if not self.has_evidence():
            return None
        main = self.main or {}
        ff = self.first_failure
        out = {
            "group": (f"{main['group']}" + (f" ({main['desc']})" if main.get("desc") else "")) if main else None,
            "op": main.get("op"),
            "seq": main.get("seq"),
            "sizes": main.get("size"),
            "dtype": main.get("dtype"),
            "timeout_ms": main.get("timeout_ms"),
            "waiting_ranks": self._waiting,
            "missing_ranks": self._missing,
            "mismatched_ranks": (self.mismatch or {}).get("ranks", []),
            "mismatch_kind": (self.mismatch or {}).get("kind"),
            "first_failure": ({"rank": ff["rank"], "host": ff["host"], "detail": ff["detail"], "kind": ff["kind"],
                               "where": ff["where"], "before_timeouts": ff["before_timeouts"]} if ff else None),
            "culprit": self.culprit,
            "missing_hosts": self.missing_hosts,
            "exited_cleanly": self.exited_cleanly,
            "hosts": {h: rs for h, rs in self.by_host.items()},
            "call_site": self._call_site(),
            "groups": [self._group_json(g) for g in self.groups],
            "ranks_seen": sorted(self.ranks),
            "world_size": self.world,
            "evidence_kinds": sorted(self.kinds),
            "files": len(self.scans),
            "problems": self.problems,
            "collect_next": self.collect_next(),
        }
        if self.desync:
            out["desync_report"] = self.desync
        return out

    @staticmethod
    def _group_json(g: dict) -> dict:
        return {"group": g["group"], "desc": g.get("desc"), "op": g.get("op"), "seq": g.get("seq"),
                "sizes": g.get("size"), "dtype": g.get("dtype"), "waiting_ranks": g["waiting"],
                "behind_ranks": g["behind"], "mismatched_ranks": g["mismatched"],
                "positions": {str(k): v for k, v in g["positions"].items()}, "source": g.get("source"),
                "where": g.get("loc")}

    def _call_site(self) -> list[str]:
        c = self.culprit
        order = (c["ranks"] if c else []) + sorted(self.ranks)
        for r in order:
            st = self.ranks[r].stream if r in self.ranks else None
            if st and st.stack:
                return st.stack[:8]
            if st:
                for p in st.pgs.values():
                    for e in (p.entry, p.last_entry):
                        if e and e.get("stack"):
                            return e["stack"][:8]
        return (self.main or {}).get("stack", [])[:8]

    def collect_next(self) -> list[dict]:
        tips: list[dict] = []
        have_fr = "flight_recorder" in self.kinds
        solid = self.culprit and self.culprit["reason"] in ("crashed_first", "different_collective", "never_joined") \
            and (have_fr or self.culprit["reason"] != "never_joined" or "watchdog" in self.kinds or "pg_status" in self.kinds)
        if not have_fr and not solid:
            tips.append({"what": "PyTorch Flight Recorder dumps from every rank",
                         "env": dict(_FR_ENV),
                         "why": "on a watchdog timeout each rank writes its last collectives (sequence number, op, "
                                "sizes, state, Python stack) to <TORCH_FR_DUMP_TEMP_FILE><rank>; comparing them names "
                                "the rank that never entered the collective and its call site. Use a directory all "
                                "nodes can write (TORCH_FR_BUFFER_SIZE is the newer name of "
                                "TORCH_NCCL_TRACE_BUFFER_SIZE)."})
        ranks_with_logs = len([r for r in self.ranks.values() if r.stream])
        if self.world and ranks_with_logs < self.world:
            tips.append({"what": "a log file per rank",
                         "env": {"NCCL_DEBUG_FILE": "/shared/logs/nccl.%h.%p"},
                         "commands": ["torchrun --log-dir /shared/logs --redirects 3 --tee 3 ...",
                                      "srun --output=/shared/logs/%x-%j-%t.out ..."],
                         "why": f"only {ranks_with_logs} of {self.world} ranks left a log here; the rank that hangs "
                                "is often the one whose log is missing"})
        if "nccl_init" not in self.kinds and "opcount" not in self.kinds:
            tips.append({"what": "NCCL's own log, one file per process",
                         "env": {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET",
                                 "NCCL_DEBUG_FILE": "/shared/logs/nccl.%h.%p"},
                         "why": "shows which communicators initialised on which host (Init COMPLETE), the network "
                                "NCCL chose, and its warnings before the hang"})
        if not self.mismatch and "detail" not in self.kinds and not (self.culprit and self.culprit["reason"] == "crashed_first"):
            tips.append({"what": "collective fingerprint checks on a reproduction run",
                         "env": {"TORCH_DISTRIBUTED_DEBUG": "DETAIL", "TORCH_CPP_LOG_LEVEL": "INFO"},
                         "why": "checks before every collective that all ranks call the same op with the same shapes "
                                "and dtypes, and names the rank that differs instead of hanging (slow: use it to "
                                "reproduce, not in production)"})
        if self.culprit and self.culprit["reason"] in ("never_joined", "silent") and not self._call_site():
            tips.append({"what": "the stack of the rank that never joined, while it hangs",
                         "commands": ["py-spy dump --native --pid <pid of the culprit rank>"],
                         "why": "shows what that rank is doing instead of the collective (evaluation, checkpoint, "
                                "data loading, a different collective)"})
        return tips

    def summary_lines(self) -> list[str]:
        if not self.has_evidence():
            return []
        lines: list[str] = []
        main = self.main or {}
        if main:
            what = f"{main.get('op') or 'a collective'} #{main.get('seq')}"
            grp = f" in process group {main['group']}" + (f" ({main['desc']})" if main.get("desc") else "")
            if self._waiting:
                who = f"Rank {self._waiting[0]} waits" if len(self._waiting) == 1 else f"Ranks {_fmt(self._waiting)} wait"
                lines.append(f"{who} in {what}{grp}.")
        c = self.culprit
        if c:
            host = f" on {', '.join(c['hosts'])}" if c["hosts"] else ""
            lines.append(f"Culprit: rank {_fmt(c['ranks'])}{host} -- {c['detail']}.")
        if self.first_failure and (not c or c["reason"] != "crashed_first"):
            ff = self.first_failure
            lines.append(f"Rank {ff['rank']} also failed ({ff['kind']}): {ff['detail']}.")
        if self.mismatch and c and c["reason"] == "different_collective":
            for r, fp in sorted(self.mismatch["per_rank"].items())[:6]:
                if fp:
                    lines.append(f"  rank {r}: {fp.get('op')} shape={fp.get('shape') or fp.get('size')} "
                                 f"dtype={fp.get('dtype')}")
        if self.missing_hosts:
            lines.append(f"Every rank on {', '.join(self.missing_hosts)} is missing: suspect that node "
                         "(crash, GPU fault, network).")
        cs = self._call_site()
        if cs:
            lines.append("Call site: " + " <- ".join(cs[:4]))
        for tip in self.collect_next()[:3]:
            env = " ".join(f"{k}={v}" for k, v in tip.get("env", {}).items())
            lines.append(f"Next time: {tip['what']}" + (f" ({env})" if env else "") + ".")
        for p in self.problems[:5]:
            lines.append(f"Skipped: {p}")
        return lines


def _fmt(ranks) -> str:
    ranks = sorted(ranks)
    if len(ranks) > 12:
        return ", ".join(map(str, ranks[:12])) + f" (+{len(ranks) - 12} more)"
    return ", ".join(map(str, ranks))
