"""Host probes: matching rules, canned tool output, and real fault injection on this machine."""
from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
from types import SimpleNamespace

import pytest

from nccl_doctor.probes import apply_results, load_report, run_probes
from nccl_doctor.probes.api import ProbeResult
from nccl_doctor.probes.host import gpu, network, versions
from nccl_doctor.probes.ifmatch import Interface, gloo_match, mpi_match, nccl_auto_pick, nccl_match, same_subnet_pairs
from nccl_doctor.probes.registry import Context, Skip
from nccl_doctor.probes.runner import CmdResult, run_command

IFACES = [
    Interface("lo", ipv4=["127.0.0.1/8"], ipv6=["::1/128"], loopback=True),
    Interface("eth0", ipv4=["10.0.0.5/24"]),
    Interface("eth1", ipv4=["10.0.0.6/24"]),
    Interface("docker0", ipv4=["172.17.0.1/16"]),
    Interface("ib0", up=False, ipv4=["192.168.1.5/24"]),
    Interface("ens5"),  # up, no address
]


# ----------------------------------------------------------------------------- matching rules
@pytest.mark.parametrize("value, expected", [
    ("eth", ["eth0", "eth1"]),            # prefixes
    ("eth0", ["eth0"]),
    ("=eth", []),                          # exact
    ("=eth1", ["eth1"]),
    ("^docker,lo", ["eth0", "eth1"]),      # exclusion
    ("^=docker0", ["lo", "eth0", "eth1"]),
    ("ib", []),                            # ib0 is down
    ("ens", []),                           # ens5 has no address
    ("eth0:5000", ["eth0"]),               # name:port
    ("doesnotexist0", []),
])
def test_nccl_matching_rules(value, expected):
    assert nccl_match(value, IFACES) == expected


def test_nccl_auto_pick_skips_docker_and_lo():
    assert nccl_auto_pick(IFACES) == ["eth0", "eth1"]
    assert nccl_auto_pick([IFACES[0], IFACES[3]]) == ["docker0"]


def test_gloo_takes_exact_names_only():
    assert gloo_match("eth0", IFACES) == (["eth0"], [])
    assert gloo_match("eth", IFACES) == ([], ["eth"])
    assert gloo_match("eth0,eth1", IFACES) == (["eth0", "eth1"], [])


def test_open_mpi_names_and_cidrs():
    assert mpi_match("10.0.0.0/24", IFACES) == (["eth0", "eth1"], [])
    assert mpi_match("eth1,192.168.9.0/24", IFACES) == (["eth1"], ["192.168.9.0/24"])
    assert mpi_match("eth", IFACES) == ([], ["eth"])


def test_two_nics_same_subnet():
    assert same_subnet_pairs(IFACES) == [("eth0", "eth1", "10.0.0.0/24")]


# ----------------------------------------------------------------------------- canned tools
def _fake(outputs: dict[str, CmdResult]):
    def runner(args, timeout):
        key = " ".join(args)
        for prefix, res in outputs.items():
            if key.startswith(prefix):
                return res
        return CmdResult(tuple(args), None, error="not found")
    return runner


def _addr(family, address, netmask):
    return SimpleNamespace(family=family, address=address, netmask=netmask)


def test_interfaces_from_psutil_state_and_addresses():
    addrs = {
        "lo": [_addr(socket.AF_INET, "127.0.0.1", "255.0.0.0"), _addr(socket.AF_INET6, "::1", "ffff:" * 7 + "ffff")],
        "ens5": [_addr(socket.AF_INET, "10.1.2.3", "255.255.0.0"),
                 _addr(socket.AF_INET6, "fe80::1%ens5", "ffff:ffff:ffff:ffff::"),
                 _addr(getattr(socket, "AF_PACKET", 17), "02:00:00:00:00:01", None)],
        "ib0": [_addr(socket.AF_INET, "192.168.1.5", None)],
    }
    stats = {"lo": SimpleNamespace(isup=True, flags="up,loopback,running"),
             "ens5": SimpleNamespace(isup=True, flags="up,broadcast,running,multicast"),
             "ib0": SimpleNamespace(isup=True, flags="up,broadcast,multicast")}  # up but not running
    by = {i.name: i for i in network.interfaces_from(addrs, stats)}
    assert by["lo"].loopback and by["lo"].up and by["lo"].ipv6 == ["::1/128"]
    assert by["ens5"].ipv4 == ["10.1.2.3/16"] and by["ens5"].ipv6 == ["fe80::1/64"] and by["ens5"].up
    assert not by["ib0"].up and by["ib0"].ipv4 == ["192.168.1.5/32"]


def test_this_machines_interfaces_come_from_psutil():
    names = {i.name for i in network.list_interfaces()}
    assert names == set(os.listdir("/sys/class/net")) or not os.path.isdir("/sys/class/net")


def test_interface_settings_checked_against_interfaces():
    ifaces = [Interface("lo", ipv4=["127.0.0.1/8"], loopback=True), Interface("ens5", ipv4=["10.1.2.3/16"])]
    ctx = Context(env={"NCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "^docker0",
                       "OMPI_MCA_btl_tcp_if_include": "10.1.0.0/16"})
    network.judge_interfaces(ctx, ifaces)
    assert ctx.facts["probe_nccl_ifname_matches"] is False
    assert ctx.facts["probe_gloo_ifname_caret"] is True
    assert ctx.facts["probe_mpi_if_include_matches"] is True
    assert any("NCCL_SOCKET_IFNAME=eth0 matches no interface" in f and "ens5" in f for f in ctx.findings)
    assert ctx.failed


def test_no_interfaces_is_a_skip():
    with pytest.raises(Skip):
        network.judge_interfaces(Context(env={}), [])


NVSMI_Q = """
GPU 00000000:07:00.0
    Fabric
        State                             : In Progress
        Status                            : N/A
"""


def test_gpu_probe_from_nvidia_smi_output(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # no NVML: nvidia-smi is read instead
    ctx = Context(env={}, runner=_fake({
        "nvidia-smi --query-gpu": CmdResult(("nvidia-smi",), 0,
                                            "NVIDIA H100 80GB HBM3, 550.54.15, Disabled, 0\n"
                                            "NVIDIA H100 80GB HBM3, 550.54.15, Enabled, 2\n"),
        "nvidia-smi -q": CmdResult(("nvidia-smi",), 0, NVSMI_Q),
        "nvidia-smi nvlink -s": CmdResult(("nvidia-smi",), 0, "GPU 0: H100\n\t Link 0: 26.562 GB/s\n\t Link 1: <inactive>\n"),
    }))
    gpu.probe_gpu(ctx)
    f = ctx.facts
    assert f["num_gpus"] == 2 and f["driver_version"] == "550.54.15" and f["gpu_class"] == "datacenter"
    assert f["probe_gpu_mig_enabled"] is True and f["probe_gpu_ecc_uncorrected"] == 2
    assert f["probe_gpu_fabric_state"] == "in_progress" and f["probe_gpu_nvlink_inactive"] == 1


def test_gpu_probe_skips_without_tools(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    ctx = Context(env={}, runner=_fake({}))
    with pytest.raises(Skip, match="nvidia-smi"):
        gpu.probe_gpu(ctx)


def test_acs_from_lspci_output():
    lspci = "00:01.0 PCI bridge\n\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+\n"
    ctx = Context(env={}, runner=_fake({"lspci": CmdResult(("lspci",), 0, lspci)}))
    versions.probe_p2p(ctx)
    assert ctx.facts["probe_acs_enabled"] is True


def test_run_command_uses_argument_lists_and_timeouts():
    assert run_command(["definitely-not-a-command-xyz"], 1).error == "not found"
    res = run_command(["sleep", "5"], 0.3)
    assert res.error.startswith("timeout") and not res.ok
    assert run_command(["echo", "a b; c"], 2).stdout.strip() == "a b; c"  # no shell


# ----------------------------------------------------------------------------- real machine
def test_host_probes_all_run_here():
    results = run_probes(deadline=60.0)  # a generous deadline: this checks what they find, not how fast (a loaded machine)
    by = {r.name: r for r in results}
    assert set(by) >= {"host.env", "host.interfaces", "host.master", "host.shm", "host.limits",
                       "host.container", "host.rdma", "host.gpu", "host.versions", "host.p2p"}
    assert all(r.status in ("ok", "failed", "skipped") for r in results), [(r.name, r.status, r.detail) for r in results]
    assert "probe_shm_size_mb" in by["host.shm"].facts
    assert all(r.findings or r.status == "skipped" for r in results)


def test_b_missing_interface_named_and_ranked_first(doctor):
    env = dict(os.environ, NCCL_SOCKET_IFNAME="doesnotexist0")
    results = run_probes(["host.env", "host.interfaces"], env=env)
    interfaces = next(r for r in results if r.name == "host.interfaces")
    assert interfaces.facts["probe_nccl_ifname_matches"] is False
    assert any("doesnotexist0" in f and "matches no interface" in f for f in interfaces.findings)
    session = doctor.session()
    session.tell("ncclInvalidUsage at init")
    apply_results(session, results)
    top = session.diagnoses()[0]
    assert top.id == "nccl_ifname_wrong", [d.id for d in session.diagnoses()[:3]]
    record = session.facts()["probe_nccl_ifname_matches"]
    assert record.source.kind == "probe" and record.source.detail == "host.interfaces"


def test_c_master_port_in_use_reported(doctor):
    with contextlib.closing(socket.socket()) as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        port = busy.getsockname()[1]
        [result] = run_probes(["host.master"], env={"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    assert result.facts["probe_master_port_bound_here"] is True
    assert any(f"port {port}" in f and "already in use" in f and f"pid {os.getpid()}" in f for f in result.findings)
    session = doctor.session()
    session.tell("torchrun fails at startup")
    apply_results(session, [result])
    assert session.diagnoses()[0].id == "master_port_in_use"


def test_free_master_port_reported_free():
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    [result] = run_probes(["host.master"], env={"MASTER_PORT": str(port)})
    assert result.facts["probe_master_port_bound_here"] is False


def test_unresolvable_master_addr():
    [result] = run_probes(["host.master"], env={"MASTER_ADDR": "no-such-host.invalid", "MASTER_PORT": "29500"})
    assert result.facts["probe_master_addr_resolves"] is False and result.status == "failed"


def test_gloo_caret_and_debug_knobs():
    results = run_probes(["host.interfaces", "host.env"],
                         env={"GLOO_SOCKET_IFNAME": "^docker0,lo", "NCCL_P2P_DISABLE": "1", "RANK": "4", "WORLD_SIZE": "2"})
    facts = {k: v for r in results for k, v in r.facts.items()}
    assert facts["probe_gloo_ifname_caret"] is True
    assert facts["probe_debug_knobs_set"] is True and facts["probe_dist_env_problem"] is True


# ----------------------------------------------------------------------------- into a session
def test_apply_results_skips_unknown_facts_and_bad_values(doctor):
    session = doctor.session()
    apply_results(session, [ProbeResult("x", "ok", {"not_a_fact": 1, "probe_shm_size_mb": "lots", "probe_shm_free_mb": 10})])
    facts = session.facts()
    assert "not_a_fact" not in facts and "probe_shm_size_mb" not in facts
    assert facts["probe_shm_free_mb"].value == 10


def test_load_report_forms(tmp_path):
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"facts": {"probe_shm_size_mb": 64, "multi_node": True}}))
    [r] = load_report(str(plain))
    assert r.name == "report" and r.facts == {"probe_shm_size_mb": 64, "multi_node": True}
    saved = tmp_path / "results.json"
    saved.write_text(json.dumps({"results": [ProbeResult("host.shm", "ok", {"probe_shm_size_mb": 64}, ["small"]).to_dict()]}))
    assert load_report(str(saved))[0].findings == ["small"]
    report = tmp_path / "REPORT.json"
    report.write_text(json.dumps({"format": "nccl-doctor-probe-report", "facts": {"x": {"value": 1, "source": {}}},
                                  "findings": ["rank 2 never joined"], "status": "failed"}))
    [r] = load_report(str(report))
    assert r.name == "cluster" and r.status == "failed" and r.facts == {"x": 1}


@pytest.mark.parametrize("content, message", [
    ("not json", "is not JSON"),
    ("[1, 2]", "expected a JSON object"),
    ('{"other": 1}', "no \"facts\" or \"results\""),
    ('{"facts": [1]}', "must be an object"),
    ('{"facts": {"a": [1]}}', "facts.a must be"),
    ('{"results": [{"name": "x", "status": "weird"}]}', "unknown status"),
])
def test_load_report_rejects_bad_input(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        load_report(str(path))


def test_load_report_missing_file(tmp_path):
    with pytest.raises(ValueError, match="cannot read"):
        load_report(str(tmp_path / "nope.json"))
