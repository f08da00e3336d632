"""GPUs: inventory, driver, MIG, NVSwitch fabric state, NVLink, uncorrected ECC errors.

Read through NVML (``pip install 'nccl-doctor[gpu]'`` installs nvidia-ml-py, imported as
``pynvml``) when it loads, else from ``nvidia-smi`` output; a probe with neither is skipped.
"""
from __future__ import annotations

import contextlib
import re
from typing import Any

from ..registry import Context, Skip

CONSUMER = re.compile(r"GeForce|RTX \d{4}(?! Ada)|TITAN", re.I)
# nvmlGpuFabricState_t; NOT_SUPPORTED (0) means no NVSwitch fabric to register with.
FABRIC_STATES = {1: "Not Started", 2: "In Progress", 3: "Completed"}

Row = tuple[str, str, str, str]  # name, driver, MIG mode, uncorrected ECC errors


def probe_gpu(ctx: Context) -> None:
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        pynvml = None
    if pynvml is not None:
        try:
            _from_nvml(ctx, pynvml)
            ctx.data["source"] = "nvml"
            return
        except Exception as exc:  # noqa: BLE001 - no driver or an old one: fall back to nvidia-smi
            ctx.data["nvml_error"] = f"{type(exc).__name__}: {exc}"
    ctx.step("running nvidia-smi")
    res = ctx.run(["nvidia-smi", "--query-gpu=name,driver_version,mig.mode.current,ecc.errors.uncorrected.volatile.total",
                   "--format=csv,noheader"], timeout=3.0)
    if res.error == "not found":
        raise Skip("no NVIDIA tools: neither NVML (pip install 'nccl-doctor[gpu]') nor nvidia-smi is available")
    if not res.ok:
        ctx.fact("num_gpus", 0)
        ctx.fail(f"nvidia-smi failed: {(res.stderr or res.stdout or res.error).strip()[:200]}")
        return
    ctx.data["source"] = "nvidia-smi"
    rows = [[c.strip() for c in line.split(",")] for line in res.stdout.strip().splitlines() if line.strip()]
    _gpu_facts(ctx, [(r[0], r[1], r[2] if len(r) > 2 else "", r[3] if len(r) > 3 else "") for r in rows])
    q = ctx.run(["nvidia-smi", "-q"], timeout=3.0)
    if q.ok:
        states = re.findall(r"Fabric\s*\n\s*State\s*:\s*(.+)\n\s*Status\s*:\s*(.+)", q.stdout)
        _fabric(ctx, [(s.strip(), st.strip()) for s, st in states])
    link = ctx.run(["nvidia-smi", "nvlink", "-s"], timeout=3.0)
    if link.ok and link.stdout.strip():
        inactive = len(re.findall(r"Link \d+: <inactive>", link.stdout))
        ctx.fact("probe_gpu_nvlink_inactive", inactive)
        if inactive:
            ctx.fail(f"{inactive} NVLink link(s) inactive (nvidia-smi nvlink -s)")


def _gpu_facts(ctx: Context, rows: list[Row]) -> None:
    ctx.fact("num_gpus", len(rows))
    ctx.fact("probe_gpu_count", len(rows))
    if not rows:
        ctx.find("no GPUs visible")
        return
    names = [r[0] for r in rows]
    ctx.fact("gpu_model", names[0])
    ctx.fact("driver_version", rows[0][1])
    ctx.fact("gpu_class", "consumer" if CONSUMER.search(names[0]) else "datacenter")
    mig = any(r[2].lower() == "enabled" for r in rows)
    ctx.fact("probe_gpu_mig_enabled", mig)
    ecc = sum(int(r[3]) for r in rows if r[3].isdigit())
    ctx.fact("probe_gpu_ecc_uncorrected", ecc)
    ctx.find(f"{len(rows)} GPU(s): {', '.join(sorted(set(names)))}; driver {rows[0][1]}"
             + ("; MIG enabled" if mig else ""))
    if ecc:
        ctx.fail(f"{ecc} uncorrected ECC error(s) since the driver loaded: drain this node")


def _fabric(ctx: Context, states: list[tuple[str, str]]) -> None:
    if not states or all(s.lower().startswith("n/a") for s, _ in states):
        return
    bad = [(s, st) for s, st in states if not (s.lower() == "completed" and st.lower() == "success")]
    if not bad:
        ctx.fact("probe_gpu_fabric_state", "ok")
        ctx.find("NVSwitch fabric: registered (fabric manager working)")
        return
    state = bad[0][0].lower()
    ctx.fact("probe_gpu_fabric_state", "in_progress" if "progress" in state else
             "not_started" if "not" in state else "failed")
    ctx.fail(f"NVSwitch fabric not ready on {len(bad)} GPU(s): state {bad[0][0]}, status {bad[0][1]} "
             "(is nvidia-fabricmanager running, same version as the driver?)")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _from_nvml(ctx: Context, nv: Any) -> None:
    """The same facts from NVML; raises when NVML cannot start (no driver), so the caller falls back."""
    import ctypes

    ctx.step("initialising NVML")
    nv.nvmlInit()
    try:
        driver = _text(nv.nvmlSystemGetDriverVersion())
        rows: list[Row] = []
        fabric: list[tuple[str, str]] = []
        inactive = 0
        for i in range(nv.nvmlDeviceGetCount()):
            ctx.step(f"querying GPU {i} through NVML")
            handle = nv.nvmlDeviceGetHandleByIndex(i)
            mig = ecc = ""
            with contextlib.suppress(nv.NVMLError):
                mig = "Enabled" if nv.nvmlDeviceGetMigMode(handle)[0] == nv.NVML_DEVICE_MIG_ENABLE else "Disabled"
            with contextlib.suppress(nv.NVMLError):
                ecc = str(nv.nvmlDeviceGetTotalEccErrors(handle, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                                         nv.NVML_VOLATILE_ECC))
            rows.append((_text(nv.nvmlDeviceGetName(handle)), driver, mig, ecc))
            with contextlib.suppress(nv.NVMLError):
                info = nv.c_nvmlGpuFabricInfo_t()
                nv.nvmlDeviceGetGpuFabricInfo(handle, ctypes.byref(info))
                if int(info.state) in FABRIC_STATES:
                    status = "Success" if int(info.status) == nv.NVML_SUCCESS else f"error {int(info.status)}"
                    fabric.append((FABRIC_STATES[int(info.state)], status))
            for link in range(nv.NVML_NVLINK_MAX_LINKS):
                try:
                    if nv.nvmlDeviceGetNvLinkState(handle, link) != nv.NVML_FEATURE_ENABLED:
                        inactive += 1
                except nv.NVMLError:  # no such link on this GPU
                    continue
        _gpu_facts(ctx, rows)
        _fabric(ctx, fabric)
        ctx.fact("probe_gpu_nvlink_inactive", inactive)
        if inactive:
            ctx.fail(f"{inactive} NVLink link(s) inactive")
    finally:
        with contextlib.suppress(Exception):
            nv.nvmlShutdown()
