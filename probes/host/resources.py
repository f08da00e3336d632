"""Machine resources NCCL depends on: /dev/shm, ulimits, and whether this is a container."""
from __future__ import annotations

import os
import re
import resource

from ..registry import Context


def probe_shm(ctx: Context) -> None:
    try:
        st = os.statvfs(ctx.path("/dev/shm"))
    except OSError:
        ctx.fact("probe_shm_size_mb", 0)
        ctx.fail("/dev/shm does not exist: NCCL's shared-memory transport cannot work")
        return
    size = st.f_blocks * st.f_frsize // 2**20
    free = st.f_bavail * st.f_frsize // 2**20
    ctx.fact("probe_shm_size_mb", size)
    ctx.fact("probe_shm_free_mb", free)
    stale = ctx.glob("/dev/shm/nccl-*")
    ctx.data["nccl_segments"] = len(stale)
    line = f"/dev/shm: {size} MB, {free} MB free"
    if stale:
        line += f", {len(stale)} nccl-* segments present"
    if size < 512:
        ctx.fail(line + " — too small for NCCL with several GPUs (Docker's default is 64 MB)")
    else:
        ctx.find(line)


def probe_limits(ctx: Context) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ctx.fact("probe_ulimit_nofile", soft if soft != resource.RLIM_INFINITY else 1 << 30)
    ml_soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    unlimited = ml_soft == resource.RLIM_INFINITY
    ctx.fact("probe_memlock_unlimited", unlimited)
    if not unlimited:
        ctx.fact("probe_memlock_kb", ml_soft // 1024)
    nofile = "unlimited" if soft == resource.RLIM_INFINITY else str(soft)
    ctx.find(f"open files (ulimit -n): {nofile} (hard {hard if hard != resource.RLIM_INFINITY else 'unlimited'}); "
             f"locked memory (ulimit -l): {'unlimited' if unlimited else f'{ml_soft // 1024} KB'}")
    ctx.find("limits are this process's; check them through your launcher too (srun/mpirun bash -c 'ulimit -a')")


def probe_container(ctx: Context) -> None:
    cgroup = ctx.read("/proc/1/cgroup") + "\n" + ctx.read("/proc/self/cgroup")
    env = ctx.env
    kind = "none"
    if ctx.path("/.dockerenv").exists() or re.search(r"docker|containerd", cgroup):
        kind = "docker"
    elif ctx.path("/run/.containerenv").exists() or env.get("container") == "podman":
        kind = "podman"
    elif any(k in os.environ for k in ("APPTAINER_CONTAINER", "SINGULARITY_CONTAINER")):
        kind = "apptainer"
    elif "ENROOT_ROOTFS" in os.environ or env.get("container") == "enroot":
        kind = "enroot"
    elif env.get("container") or re.search(r"kubepods|lxc|libpod", cgroup):
        kind = "other"
    k8s = "KUBERNETES_SERVICE_HOST" in env or ctx.path("/var/run/secrets/kubernetes.io/serviceaccount").exists()
    if k8s and kind == "none":
        kind = "other"
    ctx.fact("container", kind)
    if k8s:
        ctx.fact("orchestrator", "kubernetes")
    ctx.find(("not in a container" if kind == "none" else f"inside a container ({kind})")
             + ("; running under Kubernetes" if k8s else ""))


