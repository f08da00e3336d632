"""Error lines exactly as NCCL and torch.distributed print them (format strings from their source,
filled with realistic values) are recognised by a signature, and the cause they point to is among
the top three for the log alone. Each line here was unrecognised before the signature was added.
"""
from __future__ import annotations

import pytest

from nccl_doctor.engine.matching import scan_lines

P = "node1:1234:1290 [0] "

# (log line, the signature that must read it, a cause expected in the top three or None)
SOURCE_LINES = [
    (P + "misc/socket.cc:533 NCCL WARN socketPollConnect: Connect to 10.0.0.2<45231> returned 110(Connection timed out) "
         "errno 115(Operation now in progress)", "nw_sig_poll_connect_timed_out", "firewall_blocks_ports"),
    (P + "bootstrap.cc:577 NCCL WARN no device found matching eth9, verify NCCL_OOB_NET_IFNAME",
     "nw_sig_oob_ifname_no_device", "nccl_ifname_wrong"),
    (P + "misc/socket.cc:30 NCCL WARN socketProgressOpt: Call to recv from 10.0.0.2<45231> failed : Broken pipe",
     "nccl_socket_broken_pipe", "rank_crashed_first"),
    (P + "transport/net_socket.cc:636 NCCL WARN NET/Socket : peer 10.0.0.2<56021> message truncated : receiving "
         "1048576 bytes instead of 65536.", "nccl_socket_message_truncated", "collective_mismatch_conditional"),
    (P + "transport/net_ib.cc:1081 NCCL WARN NET/IB : req 0/1 tag 7 peer 10.1.1.2<51234> collective mismatch error, "
         "local size 1048576 remote size 524288", "nccl_ib_collective_mismatch", "collective_mismatch_conditional"),
    (P + "transport/net_ib.cc:95 NCCL WARN NET/IB : Got async event : port error", "ib_async_port_error", "ib_link_errors"),
    (P + "mnnvl.cc:63 NCCL WARN MNNVL (cliqueSize 4) is available but not working on this system. Check the IMEX "
         "channel configuration (/dev/nvidia-caps-imex-channels).", "mnnvl_not_working", "imex_channel_missing"),
    (P + "include/checks.h:18 NCCL WARN Cuda failure 'all CUDA-capable devices are busy or unavailable'",
     "cuda_devices_unavailable_old_wording", "gpu_exclusive_compute_mode"),
    (P + "misc/cudawrap.cc:285 NCCL WARN CUDA Driver version found is 11040. Minimum requirement is 12000",
     "nccl_cuda_driver_below_minimum", "outdated_cuda_nccl_stack"),
    ("[rank1]:[E1003 18:37:01.833621509 ProcessGroupNCCL.cpp:1709] [PG 0 (default_pg) Rank 1] Timeout at NCCL work: "
     "6463, last enqueued NCCL work: 6463, last completed NCCL work: 6462.", "watchdog_timeout_at_work", None),
    ("[E TCPStore.cpp:1097] [c10d] sendBytes failed on SocketImpl(fd=46, addr=[node-1]:53118, remote=[node-0]:29500): "
     "Broken pipe", "tcpstore_peer_gone", "rank_crashed_first"),
    ("torch.distributed.elastic.rendezvous.api.RendezvousGracefulExitError: The rendezvous 'job1' is closed, "
     "terminating pending rendezvous.", "rendezvous_closed_pending", None),
    (P + "init.cc:1339 NCCL WARN Detected mixed local Net device counts across ranks (min 4, max 8). Set "
         "NCCL_IGNORE_NET_MISMATCH=1 to continue.", "nccl_mixed_net_device_counts", "nic_sets_differ_across_nodes"),
    (P + "init.cc:1326 NCCL INFO Rank 9 has 1 local Net devices (max 2).", "nccl_mixed_net_device_counts",
     "nic_sets_differ_across_nodes"),
    (P + "transport/net_ib/init.cc:334 NCCL WARN NET/IB : Unable to open device mlx5_2", "nccl_ib_unable_to_open_device",
     None),
    (P + "transport.cc:464 NCCL WARN Cannot initialize CollNet, using point-to-point network instead",
     "collnet_init_fallback", "collnet_sharp_unavailable"),
    (P + "sharp_plugin.c:320 NCCL WARN NET/IB : SHARP coll init error: Cannot create SHARP job(-11)",
     "sharp_plugin_setup_error", "collnet_sharp_unavailable"),
    (P + "transport/net_ib.cc:1089 NCCL WARN NET/IB : req 0/1 tag 7 peer 10.1.1.2<51234> posted incorrect receive info: "
         "size 1048576 addr 7f1a00000000 rkey 1234", "nccl_ib_incorrect_receive_info", "nic_forced_relaxed_ordering"),
    (P + "graph/xml.cc:1257 NCCL WARN Could not open XML graph file /opt/microsoft/ncv4/graph.xml : No such file or "
         "directory", "nccl_graph_file_unreadable", "nccl_topo_file_mismatch"),
    (P + "misc/nvmlwrap.cc:142 NCCL WARN nvmlInit_v2() failed: Unknown Error", "nvml_init_unknown_error",
     "container_gpu_access_lost"),
    (P + "NCCL WARN NET/OFI Couldn't register memory region with regattr. RC: -12, ERROR: Cannot allocate memory",
     "mr_reg_enomem", "memlock_limit_too_low"),
]


@pytest.mark.parametrize("line,signature,cause", SOURCE_LINES, ids=[s for _, s, _ in SOURCE_LINES])
def test_source_line_is_recognised(doctor, line: str, signature: str, cause: str | None) -> None:
    hits = {hit.signature for hit in scan_lines(doctor.compiled, [line])}
    assert signature in hits
    if cause is not None:
        session = doctor.session()
        session.add_log([line], name="log")
        assert cause in [d.id for d in session.diagnoses(3)]


def test_watchdog_timeout_line_sets_a_timeout(doctor) -> None:
    session = doctor.session()
    session.add_log([SOURCE_LINES[9][0]], name="log")
    assert session.facts()["symptom_timeout"].value is True
