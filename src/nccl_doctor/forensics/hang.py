"""What the hang analysis says, for each reader: the ``hang`` JSON object, facts for the engine,
sentences for the plain output, and what to collect next time."""
from __future__ import annotations

from .analyze import KIND_ORDER, GroupState, HangReport, fmt_ranks

__all__ = ["hang_dict", "hang_facts", "summary_lines", "collect_next", "FR_ENV"]

FR_ENV = {"TORCH_FR_BUFFER_SIZE": "2000", "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000",
          "TORCH_NCCL_DUMP_ON_TIMEOUT": "1", "TORCH_FR_DUMP_TEMP_FILE": "/shared/fr/nccl_trace_rank_"}


def _where(rep: HangReport, *locs: str | None) -> str:
    for loc in locs:
        if loc:
            return loc
    return rep.paths[0] if rep.paths else "logs"


def hang_facts(rep: HangReport) -> dict[str, tuple]:
    """fact -> (value, "file:line") for the engine; empty without hang evidence."""
    if not rep.has_evidence():
        return {}
    out: dict[str, tuple] = {}
    main, c, ff = rep.main, rep.culprit, rep.first_failure
    where_main = _where(rep, main.loc if main else None)
    out["hang_evidence_found"] = (True, where_main)
    if main and main.op:
        out["hang_collective"] = (str(main.op), where_main)
        out["collective_op"] = (str(main.op).upper(), where_main)
    if main and main.seq is not None:
        out["hang_collective_seq"] = (int(main.seq), where_main)
    n = len(rep.ranks) or (rep.world or 0)
    if c:
        where_c = _where(rep, ff.where if c.reason == "crashed_first" and ff else None,
                         rep.mismatch.where if c.reason == "different_collective" and rep.mismatch else None,
                         main.loc if main else None)
        out["hang_culprit_rank"] = (int(c.ranks[0]), where_c)
        out["failing_rank"] = (int(c.ranks[0]), where_c)
        if c.hosts:
            out["hang_culprit_host"] = (c.hosts[0], where_c)
        out["hang_culprit_reason"] = (c.reason, where_c)
        if c.reason in ("never_joined", "silent", "exited_early", "node_missing"):
            out["hang_ranks_behind_count"] = (len(c.ranks), where_c)
            if c.reason != "node_missing" and (not n or len(c.ranks) * 2 < max(n, 2) or len(c.ranks) == 1):
                out["hang_one_rank_behind"] = (True, where_c)
                out["hang_rank0_behind"] = (c.ranks == [0], where_c)
        if c.reason == "different_collective":
            out["hang_ranks_disagree_on_collective"] = (True, where_c)
            if rep.mismatch and rep.mismatch.kind:
                out["hang_mismatch_kind"] = (rep.mismatch.kind, where_c)
        if c.reason == "crashed_first" and ff:
            out["hang_rank_exited_first"] = (True, where_c)
            out["hang_first_failure_kind"] = (ff.kind if ff.kind in KIND_ORDER else "exception", where_c)
        if c.reason == "exited_early":
            out["hang_rank_exited_cleanly"] = (True, where_c)
    if rep.missing_hosts:
        out["hang_node_missing"] = (True, where_main)
        if len(rep.by_host) >= 2:
            out["multi_node"] = (True, where_main)
    if main and not main.behind and not main.mismatched and len(main.waiting) >= 2 and not rep.named_missing \
            and not (c and c.reason in ("crashed_first", "different_collective")) \
            and (not rep.world or len(main.waiting) >= rep.world):
        out["hang_all_ranks_same_seq"] = (True, where_main)
    return out


def hang_dict(rep: HangReport) -> dict | None:
    """The ``hang`` JSON object (None without hang evidence)."""
    if not rep.has_evidence():
        return None
    main, ff, c = rep.main, rep.first_failure, rep.culprit
    out = {
        "group": (main.group + (f" ({main.desc})" if main.desc else "")) if main else None,
        "op": main.op if main else None,
        "seq": main.seq if main else None,
        "sizes": main.size if main else None,
        "dtype": main.dtype if main else None,
        "timeout_ms": main.timeout_ms if main else None,
        "waiting_ranks": rep.waiting,
        "missing_ranks": rep.missing,
        "mismatched_ranks": rep.mismatch.ranks if rep.mismatch else [],
        "mismatch_kind": rep.mismatch.kind if rep.mismatch else None,
        "first_failure": ({"rank": ff.rank, "host": ff.host, "detail": ff.detail, "kind": ff.kind, "where": ff.where,
                           "before_timeouts": ff.before_timeouts} if ff else None),
        "culprit": ({"ranks": c.ranks, "hosts": c.hosts, "reason": c.reason, "detail": c.detail} if c else None),
        "missing_hosts": rep.missing_hosts,
        "exited_cleanly": rep.exited_cleanly,
        "hosts": dict(rep.by_host),
        "call_site": call_site(rep),
        "groups": [_group_json(g) for g in rep.groups],
        "ranks_seen": sorted(rep.ranks),
        "world_size": rep.world,
        "evidence_kinds": sorted(rep.kinds),
        "files": len(rep.paths),
        "problems": rep.problems,
        "notes": rep.notes,
        "collect_next": collect_next(rep),
    }
    if rep.desync:
        out["desync_report"] = rep.desync
    return out


def _group_json(g: GroupState) -> dict:
    return {"group": g.group, "desc": g.desc, "op": g.op, "seq": g.seq, "sizes": g.size, "dtype": g.dtype,
            "waiting_ranks": g.waiting, "behind_ranks": g.behind, "mismatched_ranks": g.mismatched,
            "positions": {str(k): v for k, v in g.positions.items()}, "source": g.source, "where": g.loc}


def call_site(rep: HangReport) -> list[str]:
    """The Python stack of the culprit (or any rank) at the collective, when a log or dump has it."""
    order = (rep.culprit.ranks if rep.culprit else []) + sorted(rep.ranks)
    for r in order:
        st = rep.ranks[r].stream if r in rep.ranks else None
        if st and st.stack:
            return st.stack[:8]
        if st:
            for p in st.pgs.values():
                for e in (p.entry, p.last_entry):
                    if e and e.get("stack"):
                        return e["stack"][:8]
    return (rep.main.stack if rep.main else [])[:8]


def collect_next(rep: HangReport) -> list[dict]:
    """What to turn on before the next run so that the next hang names its culprit."""
    tips: list[dict] = []
    c = rep.culprit
    have_fr = "flight_recorder" in rep.kinds
    solid = c and c.reason in ("crashed_first", "different_collective", "never_joined") \
        and (have_fr or c.reason != "never_joined" or "watchdog" in rep.kinds or "pg_status" in rep.kinds)
    if not have_fr and not solid:
        tips.append({"what": "PyTorch Flight Recorder dumps from every rank", "env": dict(FR_ENV),
                     "why": "on a watchdog timeout each rank writes its last collectives (sequence number, op, "
                            "sizes, state, Python stack) to <TORCH_FR_DUMP_TEMP_FILE><rank>; comparing them names "
                            "the rank that never entered the collective and its call site. Use a directory all "
                            "nodes can write (TORCH_FR_BUFFER_SIZE is the newer name of "
                            "TORCH_NCCL_TRACE_BUFFER_SIZE)."})
    ranks_with_logs = len([r for r in rep.ranks.values() if r.stream])
    if rep.world and ranks_with_logs < rep.world:
        tips.append({"what": "a log file per rank", "env": {"NCCL_DEBUG_FILE": "/shared/logs/nccl.%h.%p"},
                     "commands": ["torchrun --log-dir /shared/logs --redirects 3 --tee 3 ...",
                                  "srun --output=/shared/logs/%x-%j-%t.out ..."],
                     "why": f"only {ranks_with_logs} of {rep.world} ranks left a log here; the rank that hangs "
                            "is often the one whose log is missing"})
    if "nccl_init" not in rep.kinds and "opcount" not in rep.kinds:
        tips.append({"what": "NCCL's own log, one file per process",
                     "env": {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET",
                             "NCCL_DEBUG_FILE": "/shared/logs/nccl.%h.%p"},
                     "why": "shows which communicators initialised on which host (Init COMPLETE), the network "
                            "NCCL chose, and its warnings before the hang"})
    if not rep.mismatch and "detail" not in rep.kinds and not (c and c.reason == "crashed_first"):
        tips.append({"what": "collective fingerprint checks on a reproduction run",
                     "env": {"TORCH_DISTRIBUTED_DEBUG": "DETAIL", "TORCH_CPP_LOG_LEVEL": "INFO"},
                     "why": "checks before every collective that all ranks call the same op with the same shapes "
                            "and dtypes, and names the rank that differs instead of hanging (slow: use it to "
                            "reproduce, not in production)"})
    if c and c.reason in ("never_joined", "silent") and not call_site(rep):
        tips.append({"what": "the stack of the rank that never joined, while it hangs",
                     "commands": ["py-spy dump --native --pid <pid of the culprit rank>"],
                     "why": "shows what that rank is doing instead of the collective (evaluation, checkpoint, "
                            "data loading, a different collective)"})
    return tips


def summary_lines(rep: HangReport) -> list[str]:
    """Sentences for the plain output (empty without hang evidence)."""
    if not rep.has_evidence():
        return []
    lines: list[str] = []
    main, c, ff = rep.main, rep.culprit, rep.first_failure
    if main and rep.waiting:
        what = f"{main.op or 'a collective'} #{main.seq}"
        grp = f" in process group {main.group}" + (f" ({main.desc})" if main.desc else "")
        who = f"Rank {rep.waiting[0]} waits" if len(rep.waiting) == 1 else f"Ranks {fmt_ranks(rep.waiting)} wait"
        lines.append(f"{who} in {what}{grp}.")
    if c:
        host = f" on {', '.join(c.hosts)}" if c.hosts else ""
        lines.append(f"Culprit: rank {fmt_ranks(c.ranks)}{host} -- {c.detail}.")
    if ff and (not c or c.reason != "crashed_first"):
        lines.append(f"Rank {ff.rank} also failed ({ff.kind}): {ff.detail}.")
    if rep.mismatch and c and c.reason == "different_collective":
        for r, fp in sorted(rep.mismatch.per_rank.items())[:6]:
            if fp:
                lines.append(f"  rank {r}: {fp.get('op')} shape={fp.get('shape') or fp.get('size')} dtype={fp.get('dtype')}")
    if rep.missing_hosts:
        lines.append(f"Every rank on {', '.join(rep.missing_hosts)} is missing: suspect that node "
                     "(crash, GPU fault, network).")
    cs = call_site(rep)
    if cs:
        lines.append("Call site: " + " <- ".join(cs[:4]))
    for tip in collect_next(rep)[:3]:
        env = " ".join(f"{k}={v}" for k, v in tip.get("env", {}).items())
        lines.append(f"Next time: {tip['what']}" + (f" ({env})" if env else "") + ".")
    for p in rep.problems[:5]:
        lines.append(f"Skipped: {p}")
    return lines
