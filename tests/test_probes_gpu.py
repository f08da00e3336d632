"""The GPU probe's NVML path, run for real in a probe child against a fake NVML (no GPU here)."""
from __future__ import annotations

import importlib.util
import inspect
import json
from pathlib import Path

import pytest

from nccl_doctor.probes import run_probes

FAKE_NVML_DIR = Path(__file__).parent / "fakes" / "nvml"
MACHINE = {
    "driver": "550.54.15",
    "gpus": [
        {"name": "NVIDIA H100 80GB HBM3", "mig": False, "ecc": 0, "fabric": [3, 0], "links": [1] * 18},
        {"name": "NVIDIA H100 80GB HBM3", "mig": True, "ecc": 2, "fabric": [2, 0], "links": [1] * 16 + [0, 0]},
    ],
}


def _gpu_probe(monkeypatch, tmp_path, machine: dict, smi_output: str | None = None):
    monkeypatch.setenv("PYTHONPATH", str(FAKE_NVML_DIR))
    monkeypatch.setenv("FAKE_NVML", json.dumps(machine))
    if smi_output is not None:  # an nvidia-smi that prints the CSV query's answer
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        tool = bin_dir / "nvidia-smi"
        tool.write_text(f"#!/bin/sh\ncase \"$1\" in --query-gpu*) printf '{smi_output}' ;; *) exit 1 ;; esac\n")
        tool.chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    [result] = run_probes(["host.gpu"], deadline=30)
    return result


def test_nvml_path_reads_inventory_mig_ecc_fabric_and_nvlink(monkeypatch, tmp_path):
    result = _gpu_probe(monkeypatch, tmp_path, MACHINE)
    assert result.data.get("source") == "nvml", (result.status, result.detail, result.data)
    facts = result.facts
    assert facts["num_gpus"] == 2 and facts["driver_version"] == "550.54.15"
    assert facts["gpu_model"] == "NVIDIA H100 80GB HBM3" and facts["gpu_class"] == "datacenter"
    assert facts["probe_gpu_mig_enabled"] is True and facts["probe_gpu_ecc_uncorrected"] == 2
    assert facts["probe_gpu_fabric_state"] == "in_progress"  # state 2 is IN_PROGRESS in nvmlGpuFabricState_t
    assert facts["probe_gpu_nvlink_inactive"] == 2
    assert result.status == "failed"  # ECC errors, fabric not ready, links down


def test_nvml_fabric_completed_is_ok(monkeypatch, tmp_path):
    machine = {"driver": "535.1", "gpus": [{"name": "NVIDIA A100-SXM4-80GB", "fabric": [3, 0], "links": [1] * 12}]}
    result = _gpu_probe(monkeypatch, tmp_path, machine)
    assert result.facts["probe_gpu_fabric_state"] == "ok" and result.status == "ok", result


def test_without_a_driver_nvml_falls_back_to_nvidia_smi(monkeypatch, tmp_path):
    result = _gpu_probe(monkeypatch, tmp_path, {"init_error": "LibraryNotFound"},
                        smi_output="NVIDIA GeForce RTX 4090, 550.1, [N/A], [N/A]\\n")
    assert result.data.get("source") == "nvidia-smi" and "LibraryNotFound" in result.data["nvml_error"]
    assert result.facts["num_gpus"] == 1 and result.facts["gpu_class"] == "consumer"


def test_the_fake_keeps_the_real_modules_signatures():
    if importlib.util.find_spec("pynvml") is None:
        pytest.skip("nvidia-ml-py is not installed (pip install '.[gpu]')")
    import pynvml as real

    spec = importlib.util.spec_from_file_location("fake_pynvml", FAKE_NVML_DIR / "pynvml.py")
    fake = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fake)
    for name, value in vars(fake).items():
        if name.startswith("nvml") and callable(value):
            assert list(inspect.signature(value).parameters) == list(inspect.signature(getattr(real, name)).parameters), name
        elif name.startswith("NVML_"):
            assert getattr(real, name) == value, name
    assert fake.c_nvmlGpuFabricInfo_t._fields_[1:] == real.c_nvmlGpuFabricInfo_t._fields_[1:]
    assert issubclass(real.NVMLError_LibraryNotFound, real.NVMLError)
