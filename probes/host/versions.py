"""torch, CUDA and NCCL versions; GPU peer-to-peer access, IOMMU and PCIe ACS."""
from __future__ import annotations

import re

from ..registry import Context, Skip


def nccl_version(torch) -> str:
    try:
        v = torch.cuda.nccl.version()
    except Exception:  # noqa: BLE001 - no NCCL in this build
        return ""
    if isinstance(v, tuple):
        return ".".join(map(str, v))
    v = int(v)
    return f"{v // 10000}.{v // 100 % 100}.{v % 100}" if v >= 10000 else f"{v // 1000}.{v // 100 % 10}.{v % 100}"


def probe_versions(ctx: Context) -> None:
    ctx.step("importing torch")
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        raise Skip("torch is not installed in this Python") from None
    ctx.fact("torch_version", torch.__version__.split("+")[0])
    cuda = torch.version.cuda or ""
    if cuda:
        ctx.fact("cuda_version", cuda)
    has_nccl = bool(dist.is_available() and dist.is_nccl_available())
    ctx.fact("probe_torch_has_nccl", has_nccl)
    ctx.step("asking torch.cuda for devices")
    avail = bool(torch.cuda.is_available())
    ctx.fact("probe_torch_cuda_available", avail)
    nccl = nccl_version(torch) if has_nccl else ""
    if nccl:
        ctx.fact("nccl_version", nccl)
    ctx.find(f"torch {torch.__version__}, CUDA {cuda or 'none (CPU build)'}, NCCL {nccl or 'not built in'}, "
             f"gloo {'yes' if dist.is_available() and dist.is_gloo_available() else 'no'}"
             + (f", {torch.cuda.device_count()} GPU(s) visible to torch" if avail else ""))


def probe_p2p(ctx: Context) -> None:
    cmdline = ctx.read("/proc/cmdline")
    groups = ctx.glob("/sys/kernel/iommu_groups/*")
    passthrough = bool(re.search(r"\biommu=pt\b|\b(intel|amd)_iommu=off\b", cmdline))
    iommu = bool(groups) and not passthrough
    ctx.fact("probe_iommu_enabled", iommu)
    ctx.find(f"IOMMU: {'translating DMA' if iommu else 'passthrough' if groups else 'off'}"
             + (f" ({len(groups)} groups)" if groups else ""))
    res = ctx.run(["lspci", "-vvv"], timeout=3.0)
    if res.ok:
        acs = len(re.findall(r"ACSCtl:.*SrcValid\+", res.stdout))
        ctx.fact("probe_acs_enabled", acs > 0)
        ctx.find(f"PCIe ACS source validation enabled on {acs} bridge(s)" if acs else "PCIe ACS: not enabled")
    else:
        ctx.find("PCIe ACS: not readable (" + (res.error or "lspci failed") + "; run sudo lspci -vvv | grep ACSCtl)")
    if not ctx.glob("/proc/driver/nvidia/gpus/*"):
        ctx.find("no NVIDIA GPUs: P2P matrix not applicable")
        return
    ctx.step("importing torch for the P2P matrix")
    try:
        import torch
    except ImportError:
        ctx.find("torch not installed: P2P matrix not read")
        return
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    blocked = []
    for i in range(n):
        for j in range(n):
            if i != j and not torch.cuda.can_device_access_peer(i, j):
                blocked.append(f"{i}->{j}")
    ctx.fact("probe_p2p_pairs_blocked", len(blocked))
    if n > 1:
        ctx.find(f"P2P between {n} GPUs: " + (f"not possible for {', '.join(blocked[:8])}" if blocked else "all pairs"))
