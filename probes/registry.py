"""The named probes: what each establishes, what it needs, and where its code lives.

The KB refers to probes by these names (a fact's ``probes: [...]``), never to shell text.
Importing this module is cheap: probe code is imported only inside the child process that
runs it.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError, ProbeError
from .runner import CmdResult, Runner, run_command

__all__ = ["ProbeSpec", "Context", "Skip", "ProbeError", "SPECS", "spec", "host_probe_names"]


@dataclass(frozen=True)
class ProbeSpec:
    name: str
    title: str
    target: str  # "module:function", imported in the child
    facts: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    deadline: float = 4.0  # the least time it is given (seconds)
    kind: str = "host"  # host | collective | cluster | selftest
    hidden: bool = False


class Skip(Exception):
    """Raised by a probe that does not apply here (the message says why)."""


@dataclass
class Context:
    """What a probe function receives: the environment to judge, how to run commands, where the
    machine's files are (``root``: tests point it at a fake tree), and its outputs."""

    env: Mapping[str, str]
    deadline: float = 4.0
    runner: Runner = run_command
    root: Path = Path("/")
    facts: dict[str, Any] = field(default_factory=dict)
    findings: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)  # extra detail for the report
    on_step: Callable[[str], None] | None = None
    failed: bool = False

    def run(self, args: list[str], timeout: float = 3.0) -> CmdResult:
        """Run a command (argument list) through this context's runner, within the deadline."""
        return self.runner(args, min(timeout, max(self.deadline - 0.5, 0.5)))

    def path(self, path: str) -> Path:
        """``path`` on the machine being judged (under ``root``)."""
        return self.root / path.lstrip("/")

    def read(self, path: str, default: str = "") -> str:
        """The stripped text of a machine file (``default`` when it cannot be read)."""
        try:
            return self.path(path).read_text(errors="replace").strip()
        except OSError:
            return default

    def glob(self, pattern: str) -> list[str]:
        """Sorted paths matching ``pattern`` under ``root``."""
        import glob

        return sorted(glob.glob(str(self.path(pattern))))

    def step(self, what: str) -> None:
        """Say what the probe is doing now (shown if it hangs or crashes)."""
        if self.on_step is not None:
            self.on_step(what)

    def fact(self, name: str, value: Any) -> None:
        self.facts[name] = value

    def find(self, sentence: str) -> None:
        self.findings.append(sentence)

    def fail(self, sentence: str) -> None:
        """A finding that means the checked path is broken (status becomes "failed")."""
        self.failed = True
        self.findings.append(sentence)


_H = "nccl_doctor.probes.host"
_C = "nccl_doctor.probes.collective"
_T = "nccl_doctor.probes._selftest"

SPECS: tuple[ProbeSpec, ...] = (
    ProbeSpec("host.env", "Relevant environment variables", f"{_H}.env:probe_env",
              ("nccl_socket_ifname_set", "nccl_socket_ifname", "probe_debug_knobs_set", "probe_dist_env_problem",
               "orchestrator"), deadline=2.0),
    ProbeSpec("host.interfaces", "Network interfaces against NCCL/Gloo/Open MPI interface settings",
              f"{_H}.network:probe_interfaces",
              ("probe_nccl_ifname_matches", "probe_gloo_ifname_caret", "probe_gloo_ifname_matches",
               "probe_mpi_if_include_matches", "probe_nccl_auto_pick_virtual", "probe_same_subnet_nics"),
              needs=("psutil",), deadline=3.0),
    ProbeSpec("host.master", "MASTER_ADDR resolution, reachability of MASTER_PORT, port free here",
              f"{_H}.master:probe_master",
              ("probe_master_addr_resolves", "probe_master_addr_loopback", "probe_master_port_bound_here",
               "probe_master_tcp", "probe_master_host_reachable", "ping_works"),
              needs=("MASTER_ADDR/MASTER_PORT (defaults: this host, 29500)",), deadline=4.0),
    ProbeSpec("host.shm", "/dev/shm size and free space", f"{_H}.resources:probe_shm",
              ("probe_shm_size_mb", "probe_shm_free_mb"), deadline=2.0),
    ProbeSpec("host.limits", "ulimits: open files and locked memory", f"{_H}.resources:probe_limits",
              ("probe_ulimit_nofile", "probe_memlock_unlimited", "probe_memlock_kb"), deadline=2.0),
    ProbeSpec("host.container", "Container and Kubernetes detection", f"{_H}.resources:probe_container",
              ("container", "orchestrator"), deadline=2.0),
    ProbeSpec("host.rdma", "InfiniBand / RoCE / EFA devices, RDMA device files, GPUDirect peer-memory module",
              f"{_H}.rdma:probe_rdma",
              ("probe_rdma_kind", "probe_rdma_devices", "probe_rdma_ports_active", "probe_uverbs_present",
               "probe_peermem_loaded", "probe_nccl_net_plugin_found"), deadline=3.0),
    ProbeSpec("host.gpu", "GPU inventory, driver, MIG, fabric manager, NVLink, ECC", f"{_H}.gpu:probe_gpu",
              ("num_gpus", "probe_gpu_count", "driver_version", "gpu_model", "gpu_class", "probe_gpu_mig_enabled",
               "probe_gpu_fabric_state", "probe_gpu_nvlink_inactive", "probe_gpu_ecc_uncorrected"),
              needs=("nvidia-ml-py (the gpu extra) or nvidia-smi",), deadline=4.0),
    ProbeSpec("host.versions", "torch, CUDA and NCCL versions", f"{_H}.versions:probe_versions",
              ("torch_version", "cuda_version", "nccl_version", "probe_torch_has_nccl",
               "probe_torch_cuda_available"), needs=("torch",), deadline=4.5),
    ProbeSpec("host.p2p", "GPU peer-to-peer access matrix, IOMMU and PCIe ACS", f"{_H}.versions:probe_p2p",
              ("probe_iommu_enabled", "probe_acs_enabled", "probe_p2p_pairs_blocked"),
              needs=("torch with CUDA for the P2P matrix; lspci for ACS",), deadline=4.5),
    ProbeSpec("collective.local", "Local collectives (init, barrier, all_reduce, all_gather, broadcast, send/recv)",
              f"{_C}:probe_local",
              ("probe_local_collective_ok", "probe_local_backend", "probe_local_collective_failed_op",
               "probe_local_busbw_gbps"),
              needs=("torch",), deadline=40.0, kind="collective"),
    ProbeSpec("cluster", "Cross-node checks under your launcher (torchrun/srun/mpirun ... -m nccl_doctor.probes.cluster)",
              "nccl_doctor.probes.cluster:probe_stub",
              ("probe_cluster_ranks_missing", "probe_cluster_versions_differ", "probe_cluster_nccl_env_differs",
               "probe_cluster_ifname_mismatch", "probe_cluster_gpu_counts_differ", "probe_cluster_shm_differs",
               "probe_cluster_collective_ok", "probe_cluster_hung", "probe_cluster_culprit_rank", "multi_node",
               "num_nodes"),
              needs=("a launcher on every node",), deadline=2.0, kind="cluster"),
    # Self-tests of the isolation machinery (hidden from listings).
    ProbeSpec("selftest.ok", "Self-test: returns at once", f"{_T}:ok", deadline=2.0, kind="selftest", hidden=True),
    ProbeSpec("selftest.hang", "Self-test: hangs with a child of its own", f"{_T}:hang", deadline=2.0,
              kind="selftest", hidden=True),
    ProbeSpec("selftest.crash", "Self-test: segfaults", f"{_T}:crash", deadline=2.0, kind="selftest", hidden=True),
    ProbeSpec("selftest.raise", "Self-test: raises", f"{_T}:boom", deadline=2.0, kind="selftest", hidden=True),
)

_BY_NAME = {s.name: s for s in SPECS}


def spec(name: str) -> ProbeSpec:
    try:
        return _BY_NAME[name]
    except KeyError:
        known = ", ".join(s.name for s in SPECS if not s.hidden)
        raise InputError(f"unknown probe {name[:60]!r}; known probes: {known}") from None


def host_probe_names() -> list[str]:
    return [s.name for s in SPECS if s.kind == "host"]
