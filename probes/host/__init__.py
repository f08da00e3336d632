"""Host probes, one module per family; each probe is a function of a
:class:`~nccl_doctor.probes.registry.Context` that sets facts and says what it found.

- :mod:`.env`        relevant environment variables and launcher settings
- :mod:`.network`    interfaces against NCCL / Gloo / Open MPI interface settings
- :mod:`.master`     MASTER_ADDR resolution and reachability, MASTER_PORT taken here
- :mod:`.resources`  /dev/shm, ulimits, container detection
- :mod:`.rdma`       InfiniBand / RoCE / EFA devices and GPUDirect RDMA
- :mod:`.gpu`        GPU inventory, MIG, fabric manager, NVLink, ECC (NVML or nvidia-smi)
- :mod:`.versions`   torch / CUDA / NCCL versions, P2P, IOMMU and ACS

Probes read machine files through ``ctx.read`` / ``ctx.glob`` (under ``ctx.root``) and run
external tools only through ``ctx.run`` (argument lists, timeouts), so tests hand them a fake
tree and canned tool output. Modules here are imported only in the probe's child process.
"""
