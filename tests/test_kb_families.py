"""Families of causes: a failure described by the concrete call or launcher convention involved
maps to the general cause, and the fix shown names that call - plus a regression floor for the
round-8 incidents of the program and launcher areas and the program-level incidents of rounds 9 and
10, scored through the session API.

Those incidents were collected blind, but the KB was changed for them afterwards; the floor guards
against regressions, it does not measure generalisation.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

KB = Path(__file__).resolve().parents[1] / "kb"

# (what the user says, the family cause, words the shown fix must contain)
FAMILY_INSTANCES = [
    ("my DeepSpeed training hangs inside engine.save_checkpoint, which I call on rank 0 only",
     "hidden_collective_on_some_ranks", ["save_checkpoint", "every rank"]),
    ("training hangs inside save_checkpoint", "hidden_collective_on_some_ranks", ["save_checkpoint"]),
    ("it gets stuck at accelerator.save_state(out_dir)", "hidden_collective_on_some_ranks", ["save_state", "every process"]),
    ("evaluation hangs at gather_for_metrics inside if accelerator.is_main_process",
     "hidden_collective_on_some_ranks", ["gather_for_metrics"]),
    ("Lightning DDP freezes; I call self.log('t', t) inside if self.global_rank == 0",
     "hidden_collective_on_some_ranks", ["rank_zero_only=True"]),
    ("metrics.compute() of a torchmetrics collection hangs; the test loop only runs on rank 0",
     "hidden_collective_on_some_ranks", ["sync_on_compute=False"]),
    ("FSDP: calling model.state_dict() on rank 0 only hangs", "hidden_collective_on_some_ranks", ["state_dict", "all ranks"]),
    ("model.generate(do_sample=True) with DeepSpeed ZeRO-3 hangs on some ranks",
     "hidden_collective_on_some_ranks", ["synced_gpus=True"]),
    ("the checkpoint path includes a timestamp and multi-process training hangs at the first checkpoint",
     "rank_state_diverges", ["broadcast_object_list"]),
    ("vLLM with tensor_parallel_size=2 under WSL2 hangs at startup", "custom_allreduce_fails", ["--disable-custom-all-reduce"]),
    ("Ray Train placed two workers on one GPU with num_gpus=0.5 and NCCL reports Duplicate GPU detected",
     "ray_gpu_assignment_wrong", ["num_gpus=1"]),
    ("deepspeed multi-node with pdsh; our nodes use a custom SSH port and the launcher cannot reach them",
     "deepspeed_runner_misconfigured", ["--ssh_port"]),
    ("a stale NODE_RANK from the previous job was still exported and the job hangs", "stale_launcher_env", ["unset NODE_RANK"]),
    ("train.py: error: unrecognized arguments: --local-rank=0", "rank_env_mapping_wrong", ["LOCAL_RANK"]),
    ("workers start minutes apart because of node autoscaling and then fail with RendezvousClosedError",
     "rendezvous_join_window_too_short", ["last_call_timeout"]),
    # Failure modes added for what blind rounds 9 and 10 missed (said in other words than the cases).
    ("SFT with TRL 0.15 on 4 GPUs freezes right at the start when packing=False",
     "framework_known_bug", ["packing=True", "upgrade TRL"]),
    ("after upgrading accelerate our two-node launch hangs at start", "framework_known_bug", ["upgrade accelerate"]),
    ("non-colocated GRPO hangs at the first weight sync as soon as I use pipeline parallelism; with PP=1 it works",
     "weight_sync_out_of_step", ["single weight-sync source"]),
    ("the vLLM server times out at a gloo barrier while the other rank is still autotuning FlashInfer kernels",
     "warmup_skew_exceeds_timeout", ["autotune"]),
    ("two-node evaluation hangs in collect_results_cpu; each node has its own local disk",
     "no_shared_filesystem", ["gpu_collect=True"]),
    ("it hangs and then fails: trying to initialize the default process group twice",
     "process_group_initialized_twice", ["init_process_group", "is_initialized"]),
    ("PPO experience generation with a ZeRO-3 actor hangs; it depends on the batch size",
     "rank_divergent_generation", ["max_length", "synced_gpus=True"]),
    ("validation hangs again on the third evaluation; py-spy shows one rank waiting in the dataloader worker queue",
     "dataloader_worker_hang", ["num_workers=0"]),
    ("two processes using UCC for GPU collectives hang at the first allreduce", "ucc_team_layer_fails", ["UCC_CL_BASIC_TLS"]),
    ("a JAX job on a hostNetwork pod dies during jax.distributed initialization",
     "coordinator_bind_address", ["JAX_COORDINATOR_BIND_ADDRESS"]),
    ("the job sometimes hangs; runs that avoid a particular machine work fine; not all nodes are identical",
     "prebuilt_extension_wrong_host", ["TORCH_EXTENSIONS_DIR"]),
    # Round 11a: serving-engine layouts, shapes per rank, JAX start-up, teardown after an error.
    ("SGLang with --enable-dp-attention deadlocks once traffic is mixed", "engine_parallel_layout_bug",
     ["is_extend_in_batch"]),
    ("vllm serve with --pipeline-parallel-size 2 and --tensor-parallel-size 4 freezes while capturing CUDA graphs",
     "engine_parallel_layout_bug", ["fused all-reduce + RMSNorm"]),
    ("the all_gather of the model outputs hangs; I pad dynamically in each batch", "collective_mismatch_conditional",
     ["pad_across_processes"]),
    ("jax.distributed.initialize fails with DEADLINE_EXCEEDED on RegisterTask after a preemption restart",
     "rendezvous_join_window_too_short", ["initialization_timeout"]),
    ("LLM(model=m, data_parallel_size=4) never returns any output", "engine_dp_single_process", ["VLLM_DP_RANK"]),
    ("training under mpirun crashes at start, but with torchrun it works", "rank_env_mapping_wrong", ["LOCAL_RANK"]),
    ("a rank failed with an NCCL error and the slurm job stayed running for hours as a zombie holding GPU memory",
     "teardown_hang", ["os._exit"]),
    # Round 14 (infrastructure): release families and the new failure modes, told in words only.
    ("our network runs periodic security scans against the nodes; with NCCL 2.26.2 init fails now and then",
     "nccl_known_version_bug", ["2.27.3"]),
    ("on AWS with EFA some ranks hang while the old communicator is being closed after an abort",
     "ofi_plugin_known_bug", ["1.16.0"]),
    ("nccl-tests across two g6e nodes with EFA: bus bandwidth tops out around 3 GB/s", "efa_instance_without_gdr",
     ["p5"]),
    ("after upgrading PyTorch, all-reduce on a g5 instance with A10G GPUs is twice as slow",
     "nccl_more_ctas_slower_on_pcie", ["NCCL_MAX_CTAS"]),
    ("on GB200 NVL72 racks ncclCommInitRank segfaults whenever the job uses 44 or more GPUs of the rack; 36 or 40 GPUs work",
     "mnnvl_fabric_degraded", ["NCCL_MNNVL_ENABLE=0"]),
    ("the NVIDIA DRA driver's ComputeDomain never becomes ready; the host's own nvidia-imex service is active",
     "imex_domain_conflict", ["systemctl disable nvidia-imex"]),
    # Hidden collectives drawn from the frameworks' own source and docs (session 6, breadth-prog).
    ("with ZeRO-3 my export step calls engine.save_16bit_model only on the main rank and the job never finishes",
     "hidden_collective_on_some_ranks", ["save_16bit_model", "every rank"]),
    ("I save the optimizer with FSDP.optim_state_dict inside if rank == 0 and the run hangs",
     "hidden_collective_on_some_ranks", ["optim_state_dict"]),
    ("the main process alone calls dcp.save for the checkpoint and it blocks forever",
     "hidden_collective_on_some_ranks", ["checkpoint_id"]),
    ("in my Ray TorchTrainer loop only world rank 0 calls ray.train.report and the workers hang",
     "hidden_collective_on_some_ranks", ["same number of times"]),
    ("Lightning DDP: after trainer.fit I call trainer.test(model) only when trainer.is_global_zero, and it hangs",
     "hidden_collective_on_some_ranks", ["trainer.test()"]),
    ("the sample-generation callback wraps generate in unwrap_model_for_generation on the main process only and GRPO hangs",
     "hidden_collective_on_some_ranks", ["unwrap_model_for_generation"]),
    ("our 3-node job runs torchrun --standalone --nnodes=3 on every node and never gets past startup",
     "nodes_form_separate_worlds", ["--standalone"]),
    # Timeouts set but lost on the way (the first init wins, a Trainer's own Accelerator, new_group defaults).
    ("ddp_timeout=7200 in my TrainingArguments has no effect with DeepSpeed ZeRO-3, the all_reduce still times out at 600000 ms",
     "timeout_settings_misconfigured", ["zero.Init", "new_group"]),
    # Round 15 (infrastructure): the new failure modes and release instances, told in words only.
    ("inside a VMware VM with NVIDIA vGPUs NCCL init fails: init.cc:426 NCCL WARN Cuda failure 'operation not supported'",
     "vgpu_uvm_disabled", ["enable_uvm"]),
    ("vLLM with --tensor-parallel-size 2 never starts on GPUs shared through volcano-vgpu-device-plugin",
     "gpu_sharing_interposer", ["libvgpu.so"]),
    ("a gfx1200 and a gfx1201 card in one box: the first RCCL all-reduce aborts with HIP invalid device function",
     "rocm_mixed_gpu_arch", ["HSA_OVERRIDE_GFX_VERSION"]),
    ("rccl-tests inside a Docker container: Test HIP failure common.cu:1129 'hipErrorInvalidDevice'",
     "rocm_devices_not_in_container", ["/dev/kfd"]),
    ("rccl-tests alltoall and sendrecv fail with out of memory; if I export HSA_FORCE_FINE_GRAIN_PCIE=1 they pass",
     "rccl_known_version_bug", ["5.7"]),
    ("bootstrap.cc:279 NCCL WARN [Rem Allocator] Allocation failed (segment 0, fd 130) then Cuda failure 'out of memory'",
     "nccl_known_version_bug", ["downgrade"]),
    # Round 16 (program and launch): the new failure modes and release instances, told in words only.
    ("Horovod 0.18.1: horovodrun -np 16 --hostfile ./hosts, two machines written as 'node1 slots=8', will not launch",
     "framework_known_bug", ["0.19", "PR 1607"]),
    ("mpirun -np 8 with Horovod hangs forever on one box; the Open MPI there is 3.1.3",
     "mpi_stack_known_bug", ["3.1.2", "4.0.0"]),
    ("DDP hangs with gpus=[0,3] while [0,1] is fine", "missing_set_device", ["device_ids"]),
    ("I started torchrun with nohup from my ssh session and the job dies some time after I log out",
     "sighup_kills_launcher", ["tmux", "setsid"]),
    ("horovodrun fails at once on our new box; its host name contains an underscore",
     "mpi_hostname_invalid", ["hostnamectl"]),
    ("PyTorch DDP on 4 GPUs crashes in the first all_reduce since the script imports tensorflow_datasets",
     "tensorflow_holds_gpus", ["tensorflow-cpu"]),
    ("GRPO with vllm_mode server: the trainer times out after 300 s connecting to the weight sync group",
     "side_group_port_conflict", ["vllm_group_port"]),
    ("torchrun --nproc_per_node 4 serve.py, where serve.py builds LLM(model=m, tensor_parallel_size=4), crashes at start",
     "launched_twice", ["external_launcher"]),
    # Round 16 (infrastructure, inference): release, engine and library instances and the new failure modes,
    # told in words only.
    ("after moving to NCCL 2.29 every tensor-parallel group on our H200 node fails in ncclCommInitRank; one GPU per process starts fine",
     "nccl_known_version_bug", ["NCCL_NVLS_ENABLE=0"]),
    ("SGLang with tensor parallel 2 crashes inside NCCL during warm-up", "nccl_known_version_bug", ["nvidia-nccl-cu12"]),
    ("the TensorRT-LLM server with tensor parallelism freezes in a generation step", "custom_allreduce_fails",
     ["FORCE_NCCL_ALL_REDUCE_STRATEGY=1"]),
    ("our ROCm image builds RCCL from source and now import torch fails with undefined symbol: ncclCommRegister",
     "nccl_library_conflict", ["RCCL package of the ROCm release"]),
    ("jax.distributed works on x86 nodes but on our Grace Hopper nodes creating the NCCL communicator from an MPI-broadcast unique id fails",
     "aarch64_char_signedness", ["Cchar"]),
    ("importing torch kills python with a bus error while it loads libnccl.so.2", "nccl_library_file_corrupt",
     ["--force-reinstall"]),
    ("torch.compile inside our docker container fails: /usr/bin/ld: cannot find -lcuda", "libcuda_not_linkable",
     ["TRITON_LIBCUDA_PATH"]),
    ("on an 8x H100 box nccl-tests hangs at startup and the last NCCL line is NVLS Bind mem", "fabric_manager_nvls",
     ["NCCL_NVLS_ENABLE=0"]),
    ("all_reduce_perf on our 4-GPU workstation prints the table header and then nothing, forever", "p2p_acs_iommu",
     ["ACS"]),
    # Round 18 (infrastructure, MPI / Slurm, inference, versions): the new failure modes told in words only,
    # none in the words of the round's threads.
    ("MPI jobs launched with srun fail in MPI_Init on our cluster, but mpirun inside the same allocation works",
     "srun_pmi_support_missing", ["--with-pmix"]),
    ("srun --mpi=pmix is refused on our new Slurm install: cannot find mpi plugin for mpi/pmix", "srun_pmi_support_missing",
     ["srun --mpi=list"]),
    ("after we moved our MPIJob image to Open MPI 5, all ranks run on the launcher pod", "openmpi5_orte_settings_ignored",
     ["PRTE_MCA_prte_default_hostfile"]),
    ("Megatron --tp-comm-overlap on 8x A100 stops at start-up with an assertion that CUDA multicast is not supported",
     "cuda_multicast_unsupported", ["UB_SKIPMC=1"]),
    ("training is stuck while building the fused kernels and then every other rank times out in the first all-reduce",
     "jit_extension_build_stuck", ["torch_extensions"]),
    ("TensorRT-LLM run.py fails at once with an assertion about mpiSize", "engine_rank_count_mismatch", ["mpirun -n"]),
    ("on our GB300 NVL72 rack NCCL shows MNNVL 0 for the cross-tray communicators and traffic goes over IB",
     "cumem_disabled_legacy_ipc", ["NCCL_CUMEM_ENABLE"]),
    ("two RX 7900 XTX in a Ryzen desktop, rocminfo also lists the integrated GPU, and the RCCL all-reduce hangs",
     "rocm_mixed_gpu_arch", ["iGPU"]),
    ("JAX pmap works with default memory settings but the all-reduce fails as soon as we set XLA_PYTHON_CLIENT_MEM_FRACTION=1.0",
     "cuda_oom_in_collective", ["XLA_PYTHON_CLIENT_MEM_FRACTION"]),
    ("our SageMaker job on ml.p5en.48xlarge hangs in NCCL init; the same setup on p4d works", "efa_plugin_missing",
     ["FI_PROVIDER=efa"]),
    ("in our docker container the DeepSpeed job crashes with 8 GPUs but with 4 GPUs it trains fine", "shm_too_small",
     ["--shm-size"]),
    # round 20's new failure modes, told in other words than the incidents
    ("I run CUDA_VISIBLE_DEVICES=0,1,2,3 python train.py for data-parallel training and only one GPU is busy, the other GPUs are idle",
     "not_launched_distributed", ["torchrun", "paddle.distributed.launch"]),
    ("mpirun in our MPIJob launcher pod cannot reach the workers: Permission denied (publickey); the ssh keys are mounted from a Kubernetes Secret",
     "ssh_launcher_login_fails", ["defaultMode"]),
    ("deepspeed with a hostfile of two nodes fails: bash: deepspeed: command not found on the second node, although an interactive login finds it",
     "ssh_launcher_login_fails", ["non-interactive"]),
    ("osu_latency between two hosts with Open MPI and UCX fails during wireup: no remote ep address for lane[2]->remote_lane[2]",
     "ucx_config_differs_across_hosts", ["mpirun -x"]),
    ('the nvidia-fabricmanager service on our DGX B200 will not start: Kernel module "ib_umad" has not been loaded, fabric manager cannot be started',
     "fabric_manager_nvls", ["ib_umad"]),
    ("on our HPE Slingshot cluster two-node NCCL all_reduce is slow and GPUDirect RDMA is not used", "efa_plugin_missing",
     ["aws-ofi-nccl"]),
    ("DDP training of a language model with adaptive softmax hangs after a few hundred steps", "ddp_unused_parameters_diverge",
     ["find_unused_parameters"]),
    ("we start the job with NCCL_P2P_DISABLE=1 NCCL_DEBUG=INFO torchrun --nproc_per_node=8 train.py and the all_reduce in a sub-group hangs",
     "debug_knobs_left_set", ["NCCL_P2P_DISABLE"]),
]


def _fix_text(diagnosis) -> str:
    parts = []
    for fix in diagnosis.fixes:
        parts.append(str(fix.get("title", "")))
        parts.extend(str(s) for s in fix.get("steps") or [])
        parts.extend(str(c) for c in fix.get("commands") or [])
    return "\n".join(parts)


@pytest.mark.parametrize(("text", "cause", "words"), FAMILY_INSTANCES, ids=[c for _, c, _ in FAMILY_INSTANCES])
def test_instance_maps_to_family_and_fix_names_it(doctor, text, cause, words):
    session = doctor.session()
    session.tell(text)
    diagnoses = session.diagnoses()
    assert diagnoses and diagnoses[0].id == cause, [d.id for d in diagnoses[:3]]
    shown = _fix_text(diagnoses[0])
    for word in words:
        assert word in shown, f"{cause}'s fix does not name {word!r}"


def _incidents(name: str) -> list[dict]:
    return yaml.safe_load((KB / "incidents" / name).read_text())["incidents"]


def _rank(leave_one_out, incident: dict) -> int | None:
    # Left out of the library while it is scored, so an incident is never its own evidence (the
    # diagnoses are shared with test_real_cases' floor, which scores every incident so).
    patterns = [re.compile(p, re.IGNORECASE) for p in incident["expected_remedy_any"]]
    for rank, diagnosis in enumerate(leave_one_out.diagnoses(incident)):
        if any(p.search(_fix_text(diagnosis)) for p in patterns):
            return rank
    return None


# Each blind round's incidents, scored leave-one-out, keep the KB changes made for them: the
# floors sit a little under today's figures (round 11 was scored blind at 48 % / 62 % for program
# and launch, 35 % / 58 % for infrastructure, before the KB changed for it; round 12's program and
# launch cases at 36 % / 48 %, then 32 of 33 first leave-one-out once the KB changed for them; round
# 12's infrastructure cases at 26 % / 58 %, then 18 of 19 first; round 13's program and launch cases
# at 35 % / 58 %, then 26 of 26 first; round 13's infrastructure cases at 41 % / 55 %, then 22 of 22
# first; round 14's program and launch cases at 54 % / 81 %, then 25 of 25 first; round 14's infrastructure
# cases at 42 % / 50 %, then 24 of 24 first; round 15's program and launch cases at 54 % / 67 %, then 20 of
# 23 first; round 15's infrastructure cases at 33 % / 56 % and 9 % / 45 %, then 15 of 17 first; round 16's
# program and launch cases - all of program-launch.yaml and eight launcher / MPI / framework cases of the other
# two files - at 52 % / 60 % of those 25, then every one first); round 16's
# infrastructure and inference cases at 39 % / 56 % and 44 % / 56 % blind, then 27 of 28 first; round 17's
# program and launch cases - all of program-launch.yaml and five launcher / serving-framework cases of
# inference-mixed.yaml - at 8 % / 31 % of those 13 blind (program-launch.yaml alone 0 % / 25 %), then 13 of 13 first;
# round 17's infrastructure cases - all 16 of infra.yaml and four serving-engine cases of inference-mixed.yaml - at
# 56 % / 62 % and 25 % / 25 % blind, then 18 of 20 first (the two not first rest on a commenter's fix);
# round 18's program and launch cases at 47 % / 60 % of 15 blind, then 15 of 15 first; round 18's infrastructure,
# MPI / Slurm, inference and version cases - all of infra.yaml and inference-versions.yaml - at 45 % / 55 % and
# 57 % / 71 % blind (main at 6ca3733), then 25 of 25 first leave-one-out); round 20's program, framework and launcher
# cases (mainstream.yaml and frameworks.yaml) at 38 % / 75 % and 36 % / 50 % blind, its cluster cases at 36 % / 57 %
# (main at 0d57c1a), then 33 of 36 first leave-one-out (the three left are named in round-20-program.yaml's header).
# Rounds 9-10's infrastructure cases are lower: several hold their deciding fact only in `knows`.
@pytest.mark.parametrize("name, floor", [
    ("round-8-program.yaml", (0.85, 0.9)), ("round-8-launch.yaml", (0.85, 0.9)),
    ("round-8-network.yaml", (0.85, 0.9)), ("round-8-versions.yaml", (0.85, 0.9)),
    ("round-9-10-program.yaml", (0.85, 0.9)), ("round-9-10-infra.yaml", (0.65, 0.75)),
    ("round-11-program.yaml", (0.8, 0.9)), ("round-11-infra.yaml", (0.85, 0.9)),
    ("round-12-program.yaml", (0.95, 0.95)), ("round-12-infra.yaml", (0.9, 0.95)),
    ("round-13-program.yaml", (0.9, 0.95)), ("round-13-infra.yaml", (0.9, 0.95)),
    ("round-14-program.yaml", (0.9, 0.95)), ("round-14-infra.yaml", (0.9, 0.95)),
    ("round-15-program.yaml", (0.85, 0.85)),
    ("round-15-infra.yaml", (0.85, 0.9)),
    ("round-16-program.yaml", (0.9, 0.95)),
    ("round-16-infra.yaml", (0.9, 0.95)),
    ("round-17-program.yaml", (0.9, 0.95)),
    ("round-17-infra.yaml", (0.85, 0.85)),
    ("round-18-program.yaml", (0.9, 0.95)),
    ("round-18-infra.yaml", (0.9, 0.95)),
    ("round-20-program.yaml", (0.75, 0.8)),
    ("round-20-infra.yaml", (0.85, 0.9)),
])
def test_blind_round_incidents_floor(leave_one_out, name, floor):
    incidents = _incidents(name)
    ranks = {i["id"]: _rank(leave_one_out, i) for i in incidents}
    top1 = sum(r == 0 for r in ranks.values()) / len(ranks)
    top3 = sum(r is not None and r < 3 for r in ranks.values()) / len(ranks)
    misses = ", ".join(f"{k}: {r}" for k, r in ranks.items() if r != 0)
    assert top1 >= floor[0] and top3 >= floor[1], f"top1 {top1:.0%} top3 {top3:.0%}; not first: {misses}"

