"""(d) Two "hosts" made of network namespaces joined by a veth pair, with a firewall between them.

Host A (10.231.x.1) listens on MASTER_PORT; a DROP rule in A's INPUT chain blocks TCP to it.
The host.master probe, run inside host B, must report that A is up (ICMP/ARP) but TCP is
dropped, and the engine must rank firewall_blocks_ports first. Namespaces (and with them the
veth pair and the rules, which live inside A's namespace) are removed even on failure.
Needs root, `ip`, and `iptables` or `nft` (CI installs the iptables package).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.root]
PORT = 29555


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    if shutil.which("ip") is None:
        return "needs `ip` (iproute2)"
    if shutil.which("iptables") is None and shutil.which("nft") is None:
        return "needs iptables or nft to block traffic (install the iptables package, as .ci/run does)"
    return None


def _sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=20, check=check)


@pytest.fixture
def two_hosts():
    reason = _skip_reason()
    if reason:
        print(f"SKIP: {reason}")
        pytest.skip(reason)
    tag = uuid.uuid4().hex[:6]
    a, b = f"nd-a-{tag}", f"nd-b-{tag}"
    net = 10 + int(tag[:2], 16) % 200
    ip_a, ip_b = f"10.231.{net}.1", f"10.231.{net}.2"
    listener = None
    try:
        _sh("ip", "netns", "add", a)
        _sh("ip", "netns", "add", b)
        _sh("ip", "link", "add", f"va{tag}", "type", "veth", "peer", "name", f"vb{tag}")
        _sh("ip", "link", "set", f"va{tag}", "netns", a)
        _sh("ip", "link", "set", f"vb{tag}", "netns", b)
        for ns, dev, addr in ((a, f"va{tag}", ip_a), (b, f"vb{tag}", ip_b)):
            _sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            _sh("ip", "-n", ns, "link", "set", dev, "up")
            _sh("ip", "-n", ns, "link", "set", "lo", "up")
        listener = subprocess.Popen(["ip", "netns", "exec", a, sys.executable, "-c",
                                     "import socket, time\n"
                                     f"s = socket.socket(); s.bind(('{ip_a}', {PORT})); s.listen()\n"
                                     "while True:\n    c, _ = s.accept(); c.close()\n"])
        yield {"a": a, "b": b, "ip_a": ip_a, "ip_b": ip_b}
    finally:
        if listener is not None:
            listener.kill()
            listener.wait()
        for ns in (a, b):
            _sh("ip", "netns", "del", ns, check=False)


def _block(ns: str) -> None:
    if shutil.which("iptables"):
        _sh("ip", "netns", "exec", ns, "iptables", "-A", "INPUT", "-p", "tcp", "--dport", str(PORT), "-j", "DROP")
    else:
        _sh("ip", "netns", "exec", ns, "nft", "add table inet ndtest")
        _sh("ip", "netns", "exec", ns, "nft",
            "add chain inet ndtest input { type filter hook input priority 0 ; policy accept ; }")
        _sh("ip", "netns", "exec", ns, "nft", f"add rule inet ndtest input tcp dport {PORT} drop")


def _probe_in(ns: str, ip_a: str) -> dict:
    code = ("import json\nfrom nccl_doctor.probes import run_probes\n"
            f"[r] = run_probes(['host.master'], env={{'MASTER_ADDR': '{ip_a}', 'MASTER_PORT': '{PORT}'}})\n"
            "print(json.dumps(r.to_dict()))\n")
    start = time.monotonic()
    out = _sh("ip", "netns", "exec", ns, sys.executable, "-c", code)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["wall"] = time.monotonic() - start
    return result


def _session(doctor, result):
    from nccl_doctor.probes.api import ProbeResult, apply_results

    session = doctor.session()
    session.tell("two-node training hangs at init_process_group")
    apply_results(session, [ProbeResult(result["name"], result["status"], result["facts"], result["findings"])])
    return session


def test_d_firewall_between_two_hosts_ranked_first(two_hosts, doctor):
    time.sleep(0.3)  # the listener binds
    open_result = _probe_in(two_hosts["b"], two_hosts["ip_a"])
    assert open_result["facts"]["probe_master_tcp"] == "open", open_result
    assert [d.id for d in _session(doctor, open_result).diagnoses()[:1]] != ["firewall_blocks_ports"]

    _block(two_hosts["a"])
    blocked = _probe_in(two_hosts["b"], two_hosts["ip_a"])
    facts = blocked["facts"]
    assert facts["probe_master_tcp"] == "timeout", blocked
    assert facts["probe_master_host_reachable"] is True
    assert blocked["status"] == "failed"
    assert any("firewall" in f and str(PORT) in f for f in blocked["findings"]), blocked["findings"]
    assert blocked["wall"] < 20  # the probe gives up at its own deadline instead of hanging
    session = _session(doctor, blocked)
    assert session.diagnoses()[0].id == "firewall_blocks_ports", [d.id for d in session.diagnoses()[:3]]
