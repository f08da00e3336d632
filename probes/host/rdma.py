"""RDMA: InfiniBand / RoCE / EFA devices, their ports, device files, GPUDirect RDMA, net plugins."""
from __future__ import annotations

import os
import re

from ..registry import Context

PLUGIN_DIRS = ("/opt/amazon/ofi-nccl/lib", "/opt/amazon/ofi-nccl/lib64", "/opt/aws-ofi-nccl/lib",
               "/usr/local/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
               "/opt/hpcx/nccl_rdma_sharp_plugin/lib")


def probe_rdma(ctx: Context) -> None:
    devs = ctx.glob("/sys/class/infiniband/*")
    kinds, active, ports = set(), 0, 0
    for d in devs:
        name = os.path.basename(d)
        driver = os.path.basename(os.path.realpath(f"{d}/device/driver")) if os.path.exists(f"{d}/device/driver") else ""
        for port_dir in ctx.glob(f"/sys/class/infiniband/{name}/ports/*"):
            ports += 1
            where = f"/sys/class/infiniband/{name}/ports/{os.path.basename(port_dir)}"
            layer = ctx.read(f"{where}/link_layer")
            state = ctx.read(f"{where}/state")
            if "ACTIVE" in state:
                active += 1
            kinds.add("efa" if driver == "efa" or name.startswith("efa") else
                      "roce" if layer == "Ethernet" else "infiniband")
            ctx.find(f"{name} port {os.path.basename(port_dir)}: {layer or '?'} {state or '?'}")
    kind = "efa" if "efa" in kinds else "infiniband" if "infiniband" in kinds else "roce" if "roce" in kinds else "none"
    ctx.fact("probe_rdma_kind", kind)
    ctx.fact("probe_rdma_devices", len(devs))
    uverbs = bool(ctx.glob("/dev/infiniband/uverbs*"))
    ctx.fact("probe_uverbs_present", uverbs)
    if not devs:
        ctx.find("no InfiniBand/RoCE/EFA devices (/sys/class/infiniband is empty): NCCL will use TCP sockets")
        return
    ctx.fact("probe_rdma_ports_active", active)
    if active == 0:
        ctx.fail(f"{len(devs)} RDMA device(s) but no port is ACTIVE")
    if not uverbs:
        ctx.fail("RDMA devices exist but /dev/infiniband/uverbs* is missing (not passed into the container?)")
    modules = ctx.read("/proc/modules")
    peermem = (bool(re.search(r"^(nvidia_peermem|nv_peer_mem) ", modules, re.M))
               or ctx.path("/sys/module/nvidia_peermem").exists()
               or ctx.path("/sys/kernel/mm/memory_peers/nv_mem/version").exists())
    ctx.fact("probe_peermem_loaded", peermem)
    ctx.find("GPUDirect RDMA module (nvidia_peermem) " + ("loaded" if peermem else "NOT loaded"))
    dirs = [d for d in ctx.env.get("LD_LIBRARY_PATH", "").split(":") if d] + list(PLUGIN_DIRS)
    plugins = sorted({os.path.basename(f) for d in dirs for f in ctx.glob(os.path.join(d, "libnccl-net*.so*"))})
    ctx.fact("probe_nccl_net_plugin_found", bool(plugins))
    ctx.find("NCCL net plugin: " + (", ".join(plugins) if plugins else "none found (libnccl-net*.so)"))


