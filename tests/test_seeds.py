"""The five seed incidents, told as their reporters would, end to end through the CLI.

Each must rank its real cause in the top 3 with the write-up's fix in the plan. The wording
here is our own retelling of each write-up (English and Chinese), not the eval set's.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

SEEDS = [
    pytest.param(
        "000",
        ["在4台AWS p4d.24xlarge（每台8块A100，EFA网络）上用MMDetection 2.x做分布式训练，初始化阶段就卡住不动了",
         "multi-node mmdetection job on p4d instances hangs at startup"],
        "node0021:21858:22794 [5] graph/search.cc:765 NCCL WARN Could not find a path for pattern 4, falling back to simple order\n",
        "efa_security_group",
        [r"security[- ]group", r"authorize-security-group-(ingress|egress)"],
        id="000-efa-security-group",
    ),
    pytest.param(
        "001",
        ["OpenCLIP 多卡训练，测试集快跑完的时候多个rank报ALLGATHER超时（600秒），然后所有进程都被杀掉了。数据集是CSV格式，CUDA 9.1"],
        "[Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7153, OpType=ALLGATHER, Timeout(ms)=600000) ran for 600316 milliseconds before timing out.\n"
        "To avoid data inconsistency, we are taking the entire process down.\n",
        None,
        [r"webdataset", r"upgrade[^\n]*cuda|cuda[^\n]*(upgrade|newer)", r"timedelta|timeout"],
        id="001-openclip-eval-allgather-timeout",
    ),
    pytest.param(
        "002",
        ["Llama-Recipes 多节点微调（两台虚拟机），all_reduce 超时报 DistBackendError；设置 NCCL_SOCKET_IFNAME 之后直接报 ncclInvalidUsage，说找不到网络接口"],
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1691, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.20.5\n"
        "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\n"
        "Last error:\n"
        "Bootstrap : no socket interface found\n",
        "nccl_ifname_wrong",
        [r"NCCL_SOCKET_IFNAME", r"ping|iperf3", r"NCCL_PROTO=Simple|NCCL_PROTO"],
        id="002-llama-recipes-ifname",
    ),
    pytest.param(
        "003",
        ["custom alltoall with isend/irecv on 4 nodes x 8 GPUs fails: proxy errors then the communicator aborts; a simple p2p test fails too"],
        "node3:1234:1290 [1] proxy.cc:1458 NCCL WARN [Service thread] Accept failed Resource temporarily unavailable\n"
        "node3:1234:1290 [1] proxy.cc:1497 NCCL WARN [Service thread] Could not receive type from localRank 0, res=3, closed=0\n"
        "node3:1234:1290 [1] proxy.cc:1521 NCCL WARN [Proxy Service 1] Failed to execute operation Close from rank 1, retcode 3\n"
        "node3:1234:1234 [1] NCCL INFO comm 0x55d rank 1 nranks 2 cudaDev 0 busId 18000 - Abort COMPLETE\n",
        None,
        [r"set_device", r"(pair|match)[^\n]*(send|recv)|(send|recv)[^\n]*(pair|match)"],
        id="003-custom-alltoall",
    ),
    pytest.param(
        "004",
        ["TransformerEngine 用 MPI 启动并开启 --tp-comm-overlap，4节点 Docker 容器集群，训练约1小时后挂起，之后每个新任务一启动就挂起"],
        "",
        "mpi_btl_wrong_interface",
        [r"btl_tcp_if_include"],
        id="004-te-mpi-overlap",
    ),
]


def diagnose(symptoms: list[str], log: str, tmp_path) -> dict:
    args = [sys.executable, "-m", "nccl_doctor.cli"]
    for text in symptoms:
        args += ["--symptom", text]
    if log:
        path = tmp_path / "case.log"
        path.write_text(log)
        args += ["--log", str(path)]
    done = subprocess.run([*args, "--json", "--no-probes"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def fix_text(diagnosis: dict) -> str:
    return "\n".join(
        [f["title"] for f in diagnosis["fixes"]]
        + [s for f in diagnosis["fixes"] for s in f["steps"]]
        + [c for f in diagnosis["fixes"] for c in f["commands"]]
    )


@pytest.mark.parametrize("seed, symptoms, log, cause, remedies", SEEDS)
def test_seed_case_end_to_end(seed, symptoms, log, cause, remedies, tmp_path):
    out = diagnose(symptoms, log, tmp_path)
    top3 = out["diagnoses"][:3]
    assert top3, f"seed {seed}: nothing raised"
    if cause:
        assert cause in [d["id"] for d in top3], [d["id"] for d in top3]
    plan_text = json.dumps(out["plan"])
    first = re.compile(remedies[0], re.IGNORECASE)
    assert any(first.search(fix_text(d)) for d in top3), f"seed {seed}: {remedies[0]} not in top-3 fixes"
    for pattern in remedies:
        assert re.search(pattern, plan_text, re.IGNORECASE), f"seed {seed}: plan lacks {pattern}"
