"""One rank of the cluster probe: who it is (from the launcher's environment), its state file
``rankN.json`` (written at every step, so a failure is still visible) and what it knows about
its host."""
from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

__all__ = ["INJECT_VAR", "ProbeRank", "host_info", "identity"]

_PER_RANK_VARS = {"RANK", "LOCAL_RANK", "GROUP_RANK", "NODE_RANK", "CUDA_VISIBLE_DEVICES", "SLURM_PROCID",
                  "SLURM_LOCALID", "SLURM_NODEID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                  "OMPI_COMM_WORLD_NODE_RANK", "PMI_RANK", "PMIX_RANK"}
_COMPARED_PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_", "GLOO_", "FI_", "UCX_", "OMPI_MCA_btl",
                      "OMPI_MCA_pml", "OMPI_MCA_oob", "MASTER_")
_COMPARED_NAMES = ("WORLD_SIZE", "LD_PRELOAD")
INJECT_VAR = "NCCL_DOCTOR_PROBE_INJECT"  # test hook: "hang:<op>:<rank>" or "exit:<op>:<rank>"


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


class ProbeRank:
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


def host_info(r: ProbeRank) -> dict[str, Any]:
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
