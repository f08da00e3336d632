"""The environment that distributed communication reads: debugging knobs and launcher settings."""
from __future__ import annotations

from collections.abc import Mapping

from ..registry import Context

DEBUG_KNOBS = ("NCCL_PROTO", "NCCL_ALGO", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_IB_DISABLE",
               "NCCL_NET_DISABLE", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_BUFFSIZE", "NCCL_NTHREADS",
               "NCCL_LAUNCH_MODE", "NCCL_CHECKS_DISABLE", "NCCL_NVLS_ENABLE", "CUDA_LAUNCH_BLOCKING")


def probe_env(ctx: Context) -> None:
    env = ctx.env
    ifname = env.get("NCCL_SOCKET_IFNAME")
    ctx.fact("nccl_socket_ifname_set", ifname is not None)
    if ifname is not None:
        ctx.fact("nccl_socket_ifname", ifname)
    knobs = [f"{k}={env[k]}" for k in DEBUG_KNOBS if k in env and not (k == "NCCL_NVLS_ENABLE" and env[k] == "1")]
    ctx.fact("probe_debug_knobs_set", bool(knobs))
    if knobs:
        ctx.find("debugging-only settings are set: " + ", ".join(knobs))
    problems = dist_env_problems(env)
    ctx.fact("probe_dist_env_problem", bool(problems))
    for p in problems:
        ctx.find(p)
    if "SLURM_JOB_ID" in env:
        ctx.fact("orchestrator", "slurm")
    shown = {k: v for k, v in sorted(env.items()) if not k.startswith(("LD_", "KUBERNETES_", "NVIDIA_"))}
    ctx.data["env"] = shown
    if shown:
        ctx.find("relevant variables: " + ", ".join(f"{k}={v}" for k, v in list(shown.items())[:25])
                 + (" ..." if len(shown) > 25 else ""))
    else:
        ctx.find("no NCCL_/TORCH_/MASTER_/GLOO_/FI_/OMPI_/SLURM_ variables are set")


def _int(env: Mapping[str, str], name: str) -> int | None:
    try:
        return int(env[name])
    except (KeyError, ValueError):
        return None


def dist_env_problems(env: Mapping[str, str]) -> list[str]:
    """Launcher variables that contradict each other or are not numbers."""
    out = []
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_PORT"):
        if name in env and _int(env, name) is None:
            out.append(f"{name}={env[name]!r} is not an integer")
    rank, world = _int(env, "RANK"), _int(env, "WORLD_SIZE")
    if rank is not None and world is not None and not 0 <= rank < world:
        out.append(f"RANK={rank} is outside 0..WORLD_SIZE-1 (WORLD_SIZE={world})")
    lrank, lworld = _int(env, "LOCAL_RANK"), _int(env, "LOCAL_WORLD_SIZE")
    if lrank is not None and lworld is not None and not 0 <= lrank < lworld:
        out.append(f"LOCAL_RANK={lrank} is outside 0..LOCAL_WORLD_SIZE-1 (LOCAL_WORLD_SIZE={lworld})")
    port = _int(env, "MASTER_PORT")
    if port is not None and not 0 < port < 65536:
        out.append(f"MASTER_PORT={port} is not a valid TCP port")
    ntasks = _int(env, "SLURM_NTASKS")
    if world is not None and ntasks is not None and world != ntasks and "TORCHELASTIC_RUN_ID" not in env:
        out.append(f"WORLD_SIZE={world} differs from SLURM_NTASKS={ntasks}")
    return out
