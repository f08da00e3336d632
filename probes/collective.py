"""The local collective probe: N ranks on this machine run the cluster probe's operations.

gloo on CPU, or NCCL when at least two GPUs are visible. Each operation has a hard deadline;
the result names the operation and rank that hung or failed, and algbw/busbw as nccl-tests
defines them (busbw = algbw × 2(n-1)/n for all_reduce, (n-1)/n for all_gather, 1 for
broadcast and send/recv).
"""
from __future__ import annotations

import contextlib
import glob
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from .registry import Context, Skip


def free_port() -> int:
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def visible_gpus(env) -> int:
    gpus = len(glob.glob("/proc/driver/nvidia/gpus/*"))
    vis = env.get("CUDA_VISIBLE_DEVICES")
    if vis is not None:
        gpus = min(gpus, len([v for v in vis.split(",") if v.strip() and v.strip() != "-1"]))
    return gpus


def launch_local(world: int, out: str, *, deadline: float, backend: str, extra_env: dict[int, dict[str, str]] | None = None,
                 skip_ranks: tuple[int, ...] = (), args: tuple[str, ...] = ()) -> list[subprocess.Popen]:
    """Start ``world`` local ranks of the cluster probe (ranks in ``skip_ranks`` are never started)."""
    from .api import python_command

    port = free_port()
    procs = []
    for rank in range(world):
        if rank in skip_ranks:
            continue
        env = dict(os.environ)
        env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), PYTHONUNBUFFERED="1")
        env.pop("TORCHELASTIC_USE_AGENT_STORE", None)
        env.update((extra_env or {}).get(rank, {}))
        cmd = python_command("nccl_doctor.probes.cluster", "--out", out, "--deadline", f"{deadline:g}",
                             "--backend", backend, "--no-host-probes", *args)
        procs.append(subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
    return procs


def probe_local(ctx: Context) -> None:
    try:
        import importlib.util

        if importlib.util.find_spec("torch") is None:
            raise ImportError
    except ImportError:
        raise Skip("torch is not installed: the collective probe needs torch.distributed") from None
    gpus = visible_gpus(ctx.env)
    backend, world = ("nccl", min(gpus, 8)) if gpus >= 2 else ("gloo", 2)
    op_deadline = max(2.0, min(10.0, (ctx.deadline - 10) / 3))
    with tempfile.TemporaryDirectory(prefix="nccl-doctor-local-") as out:
        ctx.step(f"starting {world} local ranks ({backend}, {op_deadline:g} s per operation)")
        procs = launch_local(world, out, deadline=op_deadline, backend=backend)
        report = Path(out) / "REPORT.json"
        stop = time.monotonic() + ctx.deadline - 1.0
        try:
            while time.monotonic() < stop and not report.exists():
                if all(p.poll() is not None for p in procs):
                    break
                time.sleep(0.05)
                phases = []
                for f in sorted(glob.glob(f"{out}/rank*.json")):
                    with contextlib.suppress(ValueError, OSError):
                        phases.append(f"rank {json.loads(Path(f).read_text())['rank']}: "
                                      f"{json.loads(Path(f).read_text())['phase']}")
                if phases:
                    ctx.step("; ".join(phases))
        finally:
            for p in procs:
                with contextlib.suppress(OSError):
                    p.send_signal(signal.SIGKILL)
                with contextlib.suppress(Exception):
                    p.wait(timeout=2)
        if not report.exists():
            ranks = {}
            for f in glob.glob(f"{out}/rank*.json"):
                with contextlib.suppress(ValueError, OSError):
                    d = json.loads(Path(f).read_text())
                    ranks[d["rank"]] = d.get("phase", "?")
            ctx.fact("probe_local_collective_ok", False)
            ctx.fail("local ranks wrote no report; last phases: "
                     + ("; ".join(f"rank {k}: {v}" for k, v in sorted(ranks.items())) or "none (they did not start)"))
            return
        data = json.loads(report.read_text())
    ctx.data["report"] = {k: data.get(k) for k in ("collectives", "culprits", "backend", "world_size")}
    facts = data.get("facts", {})
    ok = bool(facts.get("probe_cluster_collective_ok"))
    ctx.fact("probe_local_collective_ok", ok)
    ctx.fact("probe_local_backend", backend)
    if facts.get("probe_cluster_failed_op"):
        ctx.fact("probe_local_collective_failed_op", facts["probe_cluster_failed_op"])
    ops0 = data.get("collectives", {}).get("0", [])
    ar = next((o for o in ops0 if o.get("op") == "all_reduce" and "busbw_gbps" in o), None)
    if ar:
        ctx.fact("probe_local_busbw_gbps", ar["busbw_gbps"])
    for line in data.get("findings", []):
        (ctx.find if ok else ctx.fail)(line)
