"""A stand-in for nvidia-ml-py's ``pynvml`` on machines without a GPU (tests only).

It keeps the real module's names, signatures and conventions (ctypes structures filled through
``byref``, ``NVMLError`` subclasses, the same constants); the machine it describes is read from
``$FAKE_NVML`` as JSON: ``{"init_error": "LibraryNotFound"}`` or ``{"driver": ..., "gpus": [{"name",
"mig", "ecc", "fabric": [state, status], "links": [1, 0, ...]}]}``.
"""
from __future__ import annotations

import ctypes
import json
import os

NVML_SUCCESS = 0
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_DEVICE_MIG_DISABLE = 0
NVML_DEVICE_MIG_ENABLE = 1
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_FEATURE_DISABLED = 0
NVML_FEATURE_ENABLED = 1
NVML_NVLINK_MAX_LINKS = 36
NVML_GPU_FABRIC_STATE_NOT_SUPPORTED = 0
NVML_GPU_FABRIC_STATE_NOT_STARTED = 1
NVML_GPU_FABRIC_STATE_IN_PROGRESS = 2
NVML_GPU_FABRIC_STATE_COMPLETED = 3


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value


class NVMLError_NotSupported(NVMLError):  # noqa: N801 - the real module's name
    def __init__(self) -> None:
        super().__init__(NVML_ERROR_NOT_SUPPORTED)


class NVMLError_InvalidArgument(NVMLError):  # noqa: N801
    def __init__(self) -> None:
        super().__init__(NVML_ERROR_INVALID_ARGUMENT)


class NVMLError_LibraryNotFound(NVMLError):  # noqa: N801
    def __init__(self) -> None:
        super().__init__(NVML_ERROR_LIBRARY_NOT_FOUND)


class c_nvmlGpuFabricInfo_t(ctypes.Structure):  # noqa: N801
    _fields_ = [("clusterUuid", ctypes.c_ubyte * 16), ("status", ctypes.c_uint),
                ("cliqueId", ctypes.c_uint), ("state", ctypes.c_uint)]


_MACHINE: dict = {}
_STARTED = False


def _gpu(handle):
    if not _STARTED:
        raise NVMLError(1)  # NVML_ERROR_UNINITIALIZED
    return _MACHINE["gpus"][handle]


def nvmlInit():
    global _MACHINE, _STARTED
    _MACHINE = json.loads(os.environ.get("FAKE_NVML", "{}"))
    if _MACHINE.get("init_error") == "LibraryNotFound":
        raise NVMLError_LibraryNotFound()
    _STARTED = True


def nvmlShutdown():
    global _STARTED
    _STARTED = False


def nvmlSystemGetDriverVersion():
    return _MACHINE["driver"]


def nvmlDeviceGetCount():
    return len(_MACHINE["gpus"])


def nvmlDeviceGetHandleByIndex(index):
    if not 0 <= index < len(_MACHINE["gpus"]):
        raise NVMLError_InvalidArgument()
    return index


def nvmlDeviceGetName(handle):
    return _gpu(handle)["name"]


def nvmlDeviceGetMigMode(device):
    mode = NVML_DEVICE_MIG_ENABLE if _gpu(device).get("mig") else NVML_DEVICE_MIG_DISABLE
    return [mode, mode]


def nvmlDeviceGetTotalEccErrors(handle, errorType, counterType):  # noqa: N803 - the real names
    assert (errorType, counterType) == (NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC)
    return _gpu(handle).get("ecc", 0)


def nvmlDeviceGetGpuFabricInfo(device, gpuFabricInfo):  # noqa: N803
    fabric = _gpu(device).get("fabric")
    if fabric is None:
        raise NVMLError_NotSupported()
    info = gpuFabricInfo._obj  # a byref() to a c_nvmlGpuFabricInfo_t, as the C call takes
    info.state, info.status = fabric
    return NVML_SUCCESS


def nvmlDeviceGetNvLinkState(device, link):
    links = _gpu(device).get("links", [])
    if link >= len(links):
        raise NVMLError_NotSupported()
    return links[link]
