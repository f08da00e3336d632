"""The cluster probe: run it on every rank under your own launcher.

One process per node is enough to check the nodes against each other; one per GPU also checks
every GPU::

    torchrun --nnodes=2 --nproc-per-node=1 --rdzv-backend=c10d --rdzv-endpoint=HOST0:29500 \\
        -m nccl_doctor.probes.cluster --out /shared/nccl-doctor
    srun -N2 --ntasks-per-node=1 env MASTER_ADDR=HOST0 MASTER_PORT=29511 \\
        python -m nccl_doctor.probes.cluster --out /shared/nccl-doctor
    mpirun -np 2 -H host0,host1 -x MASTER_ADDR=host0 -x MASTER_PORT=29511 \\
        python -m nccl_doctor.probes.cluster --out /shared/nccl-doctor
    diagnose --facts /shared/nccl-doctor/REPORT.json

What happens: every rank first writes ``rankN.json`` (so a failure is still visible), runs the
host probes, and publishes what it found through the c10d TCP store at MASTER_ADDR:MASTER_PORT.
Rank 0 waits (with a deadline) for every rank, names the ranks that never joined, compares the
ranks (versions, NCCL_*/GLOO_*/FI_* settings, interfaces, /dev/shm, GPU counts), then all ranks
run init, barrier, all_reduce, all_gather, broadcast and send/recv, each under a hard deadline,
with algbw/busbw as nccl-tests defines them. Rank 0 writes ``REPORT.json`` naming the culprit
rank and host. Nothing waits forever: a hung operation is abandoned at its deadline.

What a failure means: a rank missing at the store (firewall, wrong MASTER_ADDR, a node that did
not start); a difference between ranks (mismatched images or settings); an operation that hangs
on every rank (a path between nodes is blocked) or on all but one (that rank is the culprit).

This module runs the rank's life and rank 0's verdict; ``cluster_rank`` is one rank's identity,
state file and host information, ``cluster_ops`` the timed collectives, ``cluster_compare`` the
cross-rank checks.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import timedelta
from typing import Any

from .cluster_compare import compare
from .cluster_ops import OPS, run_ops
from .cluster_rank import ProbeRank, host_info

__all__ = ["main", "run_rank", "probe_stub"]


def _poll_keys(store, keys: list[str], until: float) -> list[str]:
    """Keys still missing at ``until`` (polling, never blocking past it)."""
    missing = list(keys)
    while missing and time.monotonic() < until:
        try:
            missing = [k for k in missing if not store.check([k])]
        except Exception:  # noqa: BLE001 - the store went away (rank 0 finished or died)
            return missing
        if missing:
            time.sleep(0.05)
    return missing


def _get(store, key: str, default: Any = None) -> Any:
    try:
        if store.check([key]):
            return json.loads(store.get(key).decode())
    except Exception:  # noqa: BLE001
        pass
    return default


def run_rank(args, env) -> int:
    r = ProbeRank(args, env)
    t0 = time.monotonic()
    r.save(phase="collecting host facts")
    r.injected("start")
    info = host_info(r)
    r.save(phase="host facts collected", host_info=info)
    import torch.distributed as dist

    addr, port = env.get("MASTER_ADDR"), env.get("MASTER_PORT")
    if not addr or not port:
        r.save(phase="failed", error="MASTER_ADDR and MASTER_PORT must be set (torchrun sets them)")
        print("nccl-doctor cluster probe: set MASTER_ADDR and MASTER_PORT", file=sys.stderr)
        return 2
    agent = env.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    r.key = f"nccl_doctor/{env.get('TORCHELASTIC_RUN_ID', 'run')}/{env.get('TORCHELASTIC_RESTART_COUNT', '0')}/"
    r.save(phase=f"connecting to the store at {addr}:{port}")
    try:
        store = dist.TCPStore(addr, int(port), None, r.rank == 0 and not agent,
                              timedelta(seconds=args.deadline), wait_for_workers=False)
    except Exception as exc:  # noqa: BLE001
        r.save(phase="failed", error=f"cannot reach the store at {addr}:{port}: {exc}")
        print(f"rank {r.rank}: cannot reach the store at {addr}:{port}: {exc}", file=sys.stderr)
        return 2
    store.set(f"{r.key}host/{r.rank}", json.dumps(info, default=str))
    if r.rank == 0:
        return _rank0(r, store, info, t0)
    r.save(phase="waiting for rank 0")
    go = None
    until = time.monotonic() + args.deadline * 2 + 5
    while go is None and time.monotonic() < until:
        go = _get(store, f"{r.key}go")
        if go is None:
            time.sleep(0.05)
    if go is None:
        r.save(phase="failed", error="rank 0 did not answer")
        return 0
    if go.get("run_ops"):
        ops = run_ops(r, store, go["backend"])
        store.set(f"{r.key}ops/{r.rank}", json.dumps(ops))
    r.save(phase="done")
    if not _poll_keys(store, [f"{r.key}done"], time.monotonic() + args.deadline + 5):
        try:
            store.add(f"{r.key}bye", 1)
        except Exception:  # noqa: BLE001
            pass
    return 0


def _rank0(r: ProbeRank, store, info: dict[str, Any], t0: float) -> int:
    args, n = r.args, r.world
    r.save(phase="waiting for all ranks to join")
    rendezvous_started = time.time()
    missing_keys = _poll_keys(store, [f"{r.key}host/{k}" for k in range(n)], time.monotonic() + args.deadline)
    missing = sorted(int(k.rsplit("/", 1)[1]) for k in missing_keys)
    infos = {k: _get(store, f"{r.key}host/{k}") for k in range(n) if k not in missing}
    infos = {k: v for k, v in infos.items() if v}
    facts, findings, diffs = compare(infos)
    facts["probe_cluster_world_size"] = n
    hosts = {v.get("host") for v in infos.values()}
    facts["num_nodes"] = len(hosts)
    facts["multi_node"] = len(hosts) > 1
    facts["probe_cluster_ranks_missing"] = len(missing)
    culprits: list[dict[str, Any]] = []
    if missing:
        findings.insert(0, f"{len(missing)} of {n} rank(s) never joined within {args.deadline:g} s: ranks "
                           f"{', '.join(map(str, missing[:16]))} (check that they started, that MASTER_ADDR/"
                           f"MASTER_PORT reach this host from theirs, and the firewall)")
        culprits += [{"rank": k, "host": "?", "reason": "never joined the rendezvous"} for k in missing]
    backend = args.backend
    if backend == "auto":
        gpus = info.get("gpus", 0)
        nccl_ok = bool(info["versions"].get("nccl"))
        backend = "nccl" if gpus and nccl_ok and all(i.get("gpus", 0) > i.get("local_rank", 0) for i in infos.values()) else "gloo"
    run = not missing
    store.set(f"{r.key}go", json.dumps({"run_ops": run, "backend": backend}))
    ops_by_rank: dict[int, list[dict[str, Any]]] = {}
    if run:
        ops_by_rank[0] = run_ops(r, store, backend)
        own_end = time.monotonic()
        failed0 = next((o["op"] for o in ops_by_rank[0] if o["status"] != "ok"), None)
        if failed0 is None:
            _poll_keys(store, [f"{r.key}ops/{k}" for k in range(1, n)], own_end + args.deadline)
        else:
            # The others hit the same deadline at about the same time; a rank that never
            # entered the failed operation will not report at all, so do not wait for it.
            _wait_reports(r, store, n, OPS.index(failed0), own_end + min(1.0, args.deadline / 2))
        for k in range(1, n):
            got = _get(store, f"{r.key}ops/{k}")
            if got is not None:
                ops_by_rank[k] = got
        culprits += _collective_verdict(r, store, infos, ops_by_rank, facts, findings, backend)
    if diffs and not culprits:
        odd = sorted({k for d in diffs for k in d.get("odd_ranks", [])})
        culprits += [{"rank": k, "host": infos.get(k, {}).get("host", "?"), "reason": "differs from the other ranks"}
                     for k in odd[:8]]
    if culprits:
        facts["probe_cluster_culprit_rank"] = culprits[0]["rank"]
        facts["failing_rank"] = culprits[0]["rank"]
    report = {
        "format": "nccl-doctor-probe-report", "version": 1, "status": "ok" if not (culprits or diffs) else "failed",
        "world_size": n, "backend": backend, "seconds": round(time.monotonic() - t0, 3),
        "missing_ranks": missing, "culprits": culprits, "differences": diffs, "findings": findings,
        "facts": facts, "collectives": {str(k): v for k, v in sorted(ops_by_rank.items())},
        "ranks": {str(k): {"host": v["host"], "versions": v.get("versions"), "gpus": v.get("gpus"),
                           "shm_mb": v.get("shm_mb"), "findings": v.get("findings", [])} for k, v in sorted(infos.items())},
        "rendezvous_started": round(rendezvous_started, 3), "written": round(time.time(), 3),
    }
    path = r.out / "REPORT.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=1, default=str))
    os.replace(tmp, path)
    store.set(f"{r.key}done", "1")
    r.save(phase="done", report=str(path))
    stop = time.monotonic() + 2.0  # let the others read "done" before this store goes away
    alive = len([k for k in infos if k != 0 and (not run or k in ops_by_rank)])
    while time.monotonic() < stop and alive:
        try:
            if store.add(f"{r.key}bye", 0) >= alive:
                break
        except Exception:  # noqa: BLE001
            break
        time.sleep(0.02)
    print(f"nccl-doctor cluster probe: {'OK' if report['status'] == 'ok' else 'PROBLEMS FOUND'}; report: {path}")
    for line in findings:
        print("  - " + line)
    return 0 if report["status"] == "ok" else 1


def _wait_reports(r: ProbeRank, store, n: int, failed_index: int, until: float) -> None:
    pending = set(range(1, n))
    while pending and time.monotonic() < until:
        for k in list(pending):
            try:
                if store.check([f"{r.key}ops/{k}"]):
                    pending.discard(k)
                    continue
                prog = store.get(f"{r.key}prog/{k}").decode() if store.check([f"{r.key}prog/{k}"]) else ""
            except Exception:  # noqa: BLE001
                return
            if prog in OPS and OPS.index(prog) < failed_index:
                pending.discard(k)  # stuck before the operation that failed: it will not report
        if pending:
            time.sleep(0.02)


def _collective_verdict(r, store, infos, ops_by_rank, facts, findings, backend) -> list[dict[str, Any]]:
    n = r.world
    culprits = []
    bad = {k: next((o for o in ops if o["status"] != "ok"), None) for k, ops in ops_by_rank.items()}
    bad = {k: v for k, v in bad.items() if v}
    silent = [k for k in range(n) if k not in ops_by_rank]
    ok = not bad and not silent
    facts["probe_cluster_collective_ok"] = ok
    if ok:
        ops0 = ops_by_rank.get(0, [])
        bw = [f"{o['op']} busbw {o['busbw_gbps']} GB/s" for o in ops0 if "busbw_gbps" in o]
        findings.append(f"all {n} ranks completed {', '.join(o['op'] for o in ops0)} over {backend}"
                        + (f" ({'; '.join(bw)}; {r.args.size} bytes)" if bw else ""))
        return culprits
    first = min(bad.values(), key=lambda o: OPS.index(o["op"])) if bad else None
    op = first["op"] if first else "?"
    facts["probe_cluster_failed_op"] = op
    facts["collective_op"] = op.upper().replace("_", "")
    hung = [k for k, o in bad.items() if o["status"] == "timeout"]
    facts["probe_cluster_hung"] = bool(hung) or bool(silent)
    for k in silent:
        prog = store.get(f"{r.key}prog/{k}").decode() if store.check([f"{r.key}prog/{k}"]) else "none"
        entered = first is not None and prog in OPS and OPS.index(prog) >= OPS.index(op)
        reason = (f"stopped reporting inside {prog}" if entered else
                  f"never reached {op} (last operation started: {prog})")
        culprits.append({"rank": k, "host": infos.get(k, {}).get("host", "?"), "reason": reason})
        findings.append(f"rank {k} ({infos.get(k, {}).get('host', '?')}) {reason}")
    for k, o in sorted(bad.items()):
        findings.append(f"rank {k} ({infos.get(k, {}).get('host', '?')}): {o['op']} {o['status']}"
                        + (f" — {o['error']}" if o.get("error") else ""))
    if not culprits:
        failed = [k for k, o in bad.items() if o["status"] in ("failed", "wrong_result")]
        if failed:
            culprits = [{"rank": k, "host": infos.get(k, {}).get("host", "?"), "reason": f"{bad[k]['op']} {bad[k]['status']}"}
                        for k in failed[:4]]
        elif len(hung) == n:
            findings.append(f"every rank entered {op} and none finished: a path between ranks is blocked "
                            "(firewall, wrong interface) rather than one rank being late")
    return culprits


def probe_stub(ctx) -> None:  # the registry entry; run under a launcher instead
    from .registry import Skip

    raise Skip("run `python -m nccl_doctor.probes.cluster` under torchrun/srun/mpirun on every node")


def parse_args(argv: list[str] | None):
    p = argparse.ArgumentParser(prog="python -m nccl_doctor.probes.cluster", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--out", default="nccl-doctor-report", help="folder for rankN.json and REPORT.json (shared, ideally)")
    p.add_argument("--deadline", type=float, default=30.0, help="seconds for the rendezvous and for each operation")
    p.add_argument("--host-deadline", type=float, default=5.0, help="seconds for the host probes")
    p.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto")
    p.add_argument("--size", type=int, default=1 << 20, help="bytes per collective (default 1 MiB)")
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--no-host-probes", action="store_true", help="skip the host probes (versions/env still compared)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    code = run_rank(args, dict(os.environ))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # never wait on an abandoned, hung collective thread


if __name__ == "__main__":
    main()
