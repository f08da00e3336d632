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
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

__all__ = ["main", "OPS", "bus_factor"]

OPS = ("init", "barrier", "all_reduce", "all_gather", "broadcast", "send_recv")
_PER_RANK_VARS = {"RANK", "LOCAL_RANK", "GROUP_RANK", "NODE_RANK", "CUDA_VISIBLE_DEVICES", "SLURM_PROCID",
                  "SLURM_LOCALID", "SLURM_NODEID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                  "OMPI_COMM_WORLD_NODE_RANK", "PMI_RANK", "PMIX_RANK"}
_COMPARED_PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_", "GLOO_", "FI_", "UCX_", "OMPI_MCA_btl",
                      "OMPI_MCA_pml", "OMPI_MCA_oob", "MASTER_")
_COMPARED_NAMES = ("WORLD_SIZE", "LD_PRELOAD")
INJECT_VAR = "NCCL_DOCTOR_PROBE_INJECT"  # test hook: "hang:<op>:<rank>" or "exit:<op>:<rank>"


def bus_factor(op: str, n: int) -> float:
    """busbw = algbw × this factor (nccl-tests' definition)."""
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter"):
        return (n - 1) / n
    return 1.0


def _first_int(env, *names) -> int | None:
    for name in names:
        if name in env:
            try:
                return int(env[name])
            except ValueError:
                return None
    return None


def identity(env) -> tuple[int, int, int]:
    rank = _first_int(env, "RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")
    world = _first_int(env, "WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
    local = _first_int(env, "LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID")
    if rank is None or world is None:
        raise SystemExit("nccl-doctor cluster probe: no RANK/WORLD_SIZE (or SLURM_PROCID/SLURM_NTASKS, "
                         "OMPI_COMM_WORLD_RANK/SIZE): run it under torchrun, srun or mpirun")
    return rank, world, local if local is not None else 0


class _Rank:
    def __init__(self, args, env):
        self.args, self.env = args, env
        self.rank, self.world, self.local_rank = identity(env)
        self.host = socket.gethostname()
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.file = self.out / f"rank{self.rank}.json"
        self.state: dict[str, Any] = {"rank": self.rank, "world_size": self.world, "host": self.host,
                                      "local_rank": self.local_rank, "phase": "started", "ops": [],
                                      "started": time.time()}
        inject = env.get(INJECT_VAR, "")
        parts = inject.split(":")
        self.inject = (parts[0], parts[1], int(parts[2])) if len(parts) == 3 and parts[2].isdigit() else None

    def save(self, **changes) -> None:
        self.state.update(changes)
        tmp = self.file.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state, indent=1, default=str))
        os.replace(tmp, self.file)

    def injected(self, op: str) -> None:
        if self.inject and self.inject[1] == op and self.inject[2] == self.rank:
            self.save(phase=f"injected {self.inject[0]} before {op}")
            if self.inject[0] == "exit":
                os._exit(3)
            while True:
                time.sleep(3600)


# ----------------------------------------------------------------------------- host information
def host_info(r: _Rank) -> dict[str, Any]:
    """What this rank knows about its host (host probes isolated under a deadline)."""
    from .api import relevant_env, run_probes
    from .host.network import list_interfaces
    from .host.versions import nccl_version

    env = relevant_env(r.env)
    info: dict[str, Any] = {"rank": r.rank, "host": r.host, "local_rank": r.local_rank,
                            "env": {k: v for k, v in env.items() if _compared(k)}}
    info["interfaces"] = [vars(i) for i in list_interfaces()]
    try:
        st = os.statvfs("/dev/shm")
        info["shm_mb"] = st.f_blocks * st.f_frsize // 2**20
    except OSError:
        info["shm_mb"] = 0
    import torch  # the rank needs it anyway for the collectives

    info["versions"] = {"torch": torch.__version__, "cuda": torch.version.cuda or "",
                        "nccl": nccl_version(torch) if torch.distributed.is_nccl_available() else ""}
    info["gpus"] = torch.cuda.device_count() if torch.cuda.is_available() else 0
    info["facts"], info["findings"] = {}, []
    if not r.args.no_host_probes:
        results = run_probes(None, deadline=r.args.host_deadline, env=r.env)
        for res in results:
            info["facts"].update(res.facts)
            info["findings"].extend(f"{res.name}: {f}" for f in res.findings)
            if res.status in ("timeout", "crashed"):
                info["findings"].append(f"{res.name}: {res.status} ({res.detail})")
        # Under a launcher MASTER_PORT is bound by the launcher's own store (or ours): expected.
        info["facts"].pop("probe_master_port_bound_here", None)
        if "driver_version" in info["facts"]:
            info["versions"]["driver"] = str(info["facts"]["driver_version"])
    return info


def _compared(name: str) -> bool:
    return ((name.startswith(_COMPARED_PREFIXES) or name in _COMPARED_NAMES) and name not in _PER_RANK_VARS
            and not name.startswith("NCCL_DOCTOR_"))


# ----------------------------------------------------------------------------- collectives
def _device(backend: str, local_rank: int):
    import torch

    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def run_ops(r: _Rank, store, backend: str) -> list[dict[str, Any]]:
    """Each operation under a hard deadline, in a thread we can abandon; stops at the first failure."""
    import torch
    import torch.distributed as dist

    n, rank = r.world, r.rank
    elems = max(r.args.size // 4, n)
    elems -= elems % n
    device = _device(backend, r.local_rank)
    results: list[dict[str, Any]] = []

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def timed(op: str, fn, nbytes: int, check) -> dict[str, Any]:
        fn()  # warm-up
        sync()
        start = time.perf_counter()
        for _ in range(r.args.iters):
            fn()
        sync()
        seconds = (time.perf_counter() - start) / r.args.iters
        entry: dict[str, Any] = {"seconds": seconds}
        if nbytes:
            algbw = nbytes / seconds / 1e9
            entry.update(bytes=nbytes, algbw_gbps=round(algbw, 3), busbw_gbps=round(algbw * bus_factor(op, n), 3))
        entry["correct"] = bool(check())
        return entry

    def do(op: str) -> dict[str, Any]:
        if op == "init":
            start = time.perf_counter()
            from torch.distributed import PrefixStore

            dist.init_process_group(backend, store=PrefixStore("pg", store), rank=rank, world_size=n,
                                    timeout=timedelta(seconds=max(r.args.deadline * 3, 30)))
            return {"seconds": time.perf_counter() - start}
        if op == "barrier":
            start = time.perf_counter()
            if backend == "nccl":
                dist.barrier(device_ids=[r.local_rank])
            else:
                dist.barrier()
            sync()
            return {"seconds": time.perf_counter() - start}
        if op == "all_reduce":
            t = torch.empty(elems, device=device)

            def fn():
                t.fill_(rank + 1)
                dist.all_reduce(t)
            return timed(op, fn, elems * 4, lambda: bool((t == n * (n + 1) / 2).all()))
        if op == "all_gather":
            piece = elems // n
            src = torch.full((piece,), float(rank + 1), device=device)
            outs = [torch.empty(piece, device=device) for _ in range(n)]
            return timed(op, lambda: dist.all_gather(outs, src), piece * n * 4,
                         lambda: all(bool((o == i + 1).all()) for i, o in enumerate(outs)))
        if op == "broadcast":
            t = torch.empty(elems, device=device)

            def fn():
                t.fill_(42.0 if rank == 0 else 0.0)
                dist.broadcast(t, 0)
            return timed(op, fn, elems * 4, lambda: bool((t == 42.0).all()))
        if op == "send_recv":
            if n < 2:
                return {"seconds": 0.0, "skipped": "one rank"}
            send = torch.full((elems,), float(rank), device=device)
            recv = torch.empty(elems, device=device)

            def fn():
                ops = [dist.P2POp(dist.isend, send, (rank + 1) % n), dist.P2POp(dist.irecv, recv, (rank - 1) % n)]
                for req in dist.batch_isend_irecv(ops):
                    req.wait()
            return timed(op, fn, elems * 4, lambda: bool((recv == (rank - 1) % n).all()))
        raise ValueError(op)

    for op in OPS:
        r.injected(op)
        store.set(f"{r.key}prog/{rank}", op)
        box: dict[str, Any] = {}

        def target(op=op):
            try:
                box["entry"] = do(op)
            except BaseException as exc:  # noqa: BLE001 - reported, never raised
                box["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"

        started = time.monotonic()
        started_at = time.time()
        worker = threading.Thread(target=target, name=f"probe-{op}", daemon=True)
        worker.start()
        worker.join(r.args.deadline)
        entry: dict[str, Any] = {"op": op, "started_at": round(started_at, 3)}
        if worker.is_alive():
            entry.update(status="timeout", seconds=round(time.monotonic() - started, 3),
                         error=f"no result within the deadline of {r.args.deadline:g} s")
        elif "error" in box:
            entry.update(status="failed", seconds=round(time.monotonic() - started, 3), error=box["error"])
        else:
            entry.update(box["entry"])
            entry["status"] = "ok" if entry.get("correct", True) else "wrong_result"
            entry["seconds"] = round(entry["seconds"], 6)
        results.append(entry)
        r.save(ops=results, phase=f"{op}: {entry['status']}")
        if entry["status"] != "ok":
            break
    return results


# ----------------------------------------------------------------------------- cross-rank checks
def _odd_ones(values: dict[int, Any]) -> list[int]:
    """Ranks whose value differs from the most common value."""
    groups: dict[str, list[int]] = {}
    for rank, value in values.items():
        groups.setdefault(json.dumps(value, sort_keys=True, default=str), []).append(rank)
    if len(groups) < 2:
        return []
    common = max(groups.values(), key=lambda g: (len(g), -min(g)))
    return sorted(r for g in groups.values() if g is not common for r in g)


def compare(infos: dict[int, dict[str, Any]]) -> tuple[dict[str, Any], list[str], list[dict[str, Any]]]:
    """Facts, findings and differences from all ranks' host information."""
    from .ifmatch import Interface, nccl_match

    facts: dict[str, Any] = {}
    findings: list[str] = []
    diffs: list[dict[str, Any]] = []

    def note(kind: str, what: str, values: dict[int, Any]) -> None:
        odd = _odd_ones(values)
        if not odd:
            return
        hosts = {r: infos[r]["host"] for r in odd}
        diffs.append({"kind": kind, "what": what, "values": {str(k): v for k, v in values.items()}, "odd_ranks": odd})
        shown = ", ".join(f"rank {r} ({hosts[r]}): {values[r]!r}" for r in odd[:4])
        common = next(v for k, v in values.items() if k not in odd)
        findings.append(f"{what} differs across ranks: {shown}; others: {common!r}")

    ranks = sorted(infos)
    versions_before = len(diffs)
    for part in ("torch", "cuda", "nccl", "driver"):
        vals = {r: infos[r].get("versions", {}).get(part) for r in ranks}
        if any(v for v in vals.values()):
            note("version", f"{part} version", vals)
    facts["probe_cluster_versions_differ"] = len(diffs) > versions_before
    env_before = len(diffs)
    names = sorted({k for r in ranks for k in infos[r].get("env", {})})
    for name in names:
        note("env", name, {r: infos[r].get("env", {}).get(name, "<unset>") for r in ranks})
    facts["probe_cluster_nccl_env_differs"] = len(diffs) > env_before
    mismatch: dict[int, bool] = {}
    for r in ranks:
        value = infos[r].get("env", {}).get("NCCL_SOCKET_IFNAME")
        if value is not None:
            ifaces = [Interface(**i) for i in infos[r].get("interfaces", [])]
            mismatch[r] = bool(nccl_match(value, ifaces))
    if mismatch:
        bad = [r for r, ok in mismatch.items() if not ok]
        facts["probe_cluster_ifname_mismatch"] = bool(bad) and len(bad) < len(mismatch)
        if bad:
            findings.append("NCCL_SOCKET_IFNAME matches no interface on " + ", ".join(
                f"rank {r} ({infos[r]['host']}, has {', '.join(i['name'] for i in infos[r].get('interfaces', []))})"
                for r in bad[:4]))
            diffs.append({"kind": "interface", "what": "NCCL_SOCKET_IFNAME matches nothing", "odd_ranks": bad})
    gpus = {r: infos[r].get("gpus", 0) for r in ranks}
    per_host: dict[str, int] = {}
    for r in ranks:
        per_host.setdefault(infos[r]["host"], gpus[r])
    note("gpus", "GPU count", gpus)
    facts["probe_cluster_gpu_counts_differ"] = len(set(per_host.values())) > 1
    shm = {r: infos[r].get("shm_mb", 0) for r in ranks}
    small, big = min(shm.values(), default=0), max(shm.values(), default=0)
    facts["probe_cluster_shm_differs"] = big > 2 * max(small, 1)
    if facts["probe_cluster_shm_differs"]:
        note("shm", "/dev/shm size (MB)", shm)
    # Host facts: the common value, or the odd rank's value where they differ.
    merged: dict[str, Any] = {}
    for name in sorted({k for r in ranks for k in infos[r].get("facts", {})}):
        vals = {r: infos[r]["facts"][name] for r in ranks if name in infos[r].get("facts", {})}
        odd = _odd_ones(vals)
        merged[name] = vals[odd[0]] if odd else next(iter(vals.values()))
    facts = {**merged, **facts}
    return facts, findings, diffs


# ----------------------------------------------------------------------------- the rank's life
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
    r = _Rank(args, env)
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


def _rank0(r: _Rank, store, info: dict[str, Any], t0: float) -> int:
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


def _wait_reports(r: _Rank, store, n: int, failed_index: int, until: float) -> None:
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
