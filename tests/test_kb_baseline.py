"""Clean baselines: a healthy cluster's facts and a long, healthy NCCL_DEBUG=INFO log raise no cause."""
from __future__ import annotations

import random

HEALTHY_FACTS = {
    "multi_node": True,
    "num_nodes": 2,
    "container": "none",
    "orchestrator": "slurm",
    "launcher": "torchrun",
    "backend": "nccl",
    "internode_network": "infiniband",
    "gpu_class": "datacenter",
    "gpu_interconnect": "nvswitch",
    "os": "linux",
    "nccl_version": "2.21.5",
    "torch_version": "2.5.1",
    "cuda_version": "12.4",
    "symptom_hang": False,
    "symptom_timeout": False,
    "symptom_crash": False,
    "ping_works": True,
    # not single_node_works: its question ("does the same job work on one machine?") presupposes
    # that the multi-node job fails, so rules rightly read it as a failure report.
}


def healthy_log(ranks: int = 16, steps: int = 400) -> list[str]:
    """An NCCL_DEBUG=INFO run that initialises, trains and shuts down cleanly."""
    rng = random.Random(3)
    lines = []
    for r in range(ranks):
        host, dev, pid = f"gpu-node{r // 8:02d}", r % 8, 4000 + r
        p = f"{host}:{pid}:{pid}"
        lines += [
            f"{p} [{dev}] NCCL INFO Bootstrap : Using ib0:10.10.0.{r // 8 + 1}<0>",
            f"{p} [{dev}] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: No such file or directory No plugin found (libnccl-net.so), using internal implementation",
            f"{p} [{dev}] NCCL INFO cudaDriverVersion 12040",
            f"{p} [{dev}] NCCL INFO NCCL version 2.21.5+cuda12.4",
            f"{p} [{dev}] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB ; OOB ib0:10.10.0.{r // 8 + 1}<0>",
            f"{p} [{dev}] NCCL INFO Using non-device net plugin version 0",
            f"{p} [{dev}] NCCL INFO Using network IB",
            f"{p} [{dev}] NCCL INFO comm 0x5581c0 rank {r} nranks {ranks} cudaDev {dev} nvmlDev {dev} busId {dev + 1}8000 commId 0x7d4fa3 - Init START",
            f"{p} [{dev}] NCCL INFO Setting affinity for GPU {dev} to ffffff,ffffffff",
            f"{p} [{dev}] NCCL INFO NVLS multicast support is available on dev {dev}",
            f"{p} [{dev}] NCCL INFO comm 0x5581c0 rank {r} nRanks {ranks} nNodes {ranks // 8} localRanks 8 localRank {dev} MNNVL 0",
            f"{p} [{dev}] NCCL INFO Channel 00/32 :    0   1   2   3   4   5   6   7   8   9  10  11  12  13  14  15",
            f"{p} [{dev}] NCCL INFO Trees [0] {r + 1}/-1/-1->{r}->{max(r - 1, -1)} [1] -1/-1/-1->{r}->{r + 1}",
            f"{p} [{dev}] NCCL INFO P2P Chunksize set to 524288",
            f"{p} [{dev}] NCCL INFO Channel 00/0 : {r}[{dev}] -> {(r + 1) % ranks}[{(dev + 1) % 8}] via P2P/CUMEM/read",
            f"{p} [{dev}] NCCL INFO Channel 01/0 : {r}[{dev}] -> {(r + 8) % ranks}[{dev}] [send] via NET/IB/0/GDRDMA",
            f"{p} [{dev}] NCCL INFO Connected all rings",
            f"{p} [{dev}] NCCL INFO Connected all trees",
            f"{p} [{dev}] NCCL INFO NVLS comm 0x5581c0 headRank 0 nHeads 8 buffSize 1048576 memSize 2097152 nvlsPerRankSize 201326592 nvlsTotalSize 1610612736",
            f"{p} [{dev}] NCCL INFO threadThresholds 8/8/64 | 128/8/64 | 512 | 512",
            f"{p} [{dev}] NCCL INFO 32 coll channels, 32 collnet channels, 16 nvls channels, 32 p2p channels, 32 p2p channels per peer",
            f"{p} [{dev}] NCCL INFO comm 0x5581c0 rank {r} nranks {ranks} cudaDev {dev} nvmlDev {dev} busId {dev + 1}8000 commId 0x7d4fa3 - Init COMPLETE",
            f"{p} [{dev}] NCCL INFO Init timings: rank {r} nranks {ranks} total 1.21 (kernels 0.18, bootstrap 0.44, allgathers 0.02, topo 0.31, graphs 0.01, connections 0.21, rest 0.04)",
        ]
    for step in range(steps):
        lines.append(f"[rank0]: {{'loss': {2.5 - step / steps:.4f}, 'grad_norm': {rng.uniform(0.5, 2):.3f}, 'learning_rate': 2e-05, 'epoch': {step / 100:.2f}}}")
        if step % 50 == 0:
            lines.append(f"[rank0]: Saving model checkpoint to /checkpoints/step-{step}")
            lines.append(f"[rank0]: {step}/{steps} [{step * 3 // 60:02d}:{step * 3 % 60:02d}<00:10, 1.2it/s]")
    for r in range(ranks):
        lines.append(f"gpu-node{r // 8:02d}:{4000 + r}:{4000 + r} [{r % 8}] NCCL INFO comm 0x5581c0 rank {r} nranks {ranks} cudaDev {r % 8} busId {r % 8 + 1}8000 - Destroy COMPLETE")
    return lines


def test_healthy_facts_raise_no_cause(doctor):
    session = doctor.session()
    for name, value in HEALTHY_FACTS.items():
        session.set_fact(name, value)
    assert [d.id for d in session.diagnoses()] == []


def test_long_healthy_info_log_raises_no_cause(doctor):
    session = doctor.session()
    session.add_log(healthy_log(), name="healthy.log")
    raised = [(d.id, round(d.confidence, 2)) for d in session.diagnoses()]
    assert raised == [], raised


def test_healthy_log_with_the_healthy_facts_raises_no_cause(doctor):
    session = doctor.session()
    for name, value in HEALTHY_FACTS.items():
        session.set_fact(name, value)
    session.add_log(healthy_log(ranks=8, steps=50), name="healthy.log")
    assert [d.id for d in session.diagnoses()] == []
