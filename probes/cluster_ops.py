"""The cluster probe's collectives: init, barrier, all_reduce, all_gather, broadcast and
send/recv, each timed under a hard deadline in a thread that can be abandoned, with algbw and
busbw as nccl-tests defines them."""
from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

from .cluster_rank import ProbeRank

__all__ = ["OPS", "bus_factor", "run_ops"]

OPS = ("init", "barrier", "all_reduce", "all_gather", "broadcast", "send_recv")


def bus_factor(op: str, n: int) -> float:
    """busbw = algbw × this factor (nccl-tests' definition)."""
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter"):
        return (n - 1) / n
    return 1.0


def _device(backend: str, local_rank: int):
    import torch

    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def run_ops(r: ProbeRank, store, backend: str) -> list[dict[str, Any]]:
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
