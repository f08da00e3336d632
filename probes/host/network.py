"""Network interfaces (from psutil) judged against NCCL, Gloo and Open MPI interface settings."""
from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping, Sequence
from typing import Any

from ..ifmatch import Interface, gloo_match, is_virtual, mpi_match, nccl_auto_pick, nccl_match, same_subnet_pairs
from ..registry import Context, Skip


def list_interfaces() -> list[Interface]:
    """This machine's interfaces with their state and addresses."""
    import psutil

    return interfaces_from(psutil.net_if_addrs(), psutil.net_if_stats())


def interfaces_from(addrs: Mapping[str, Sequence[Any]], stats: Mapping[str, Any]) -> list[Interface]:
    """:class:`Interface` objects from ``psutil.net_if_addrs()`` and ``psutil.net_if_stats()``.

    Up means IFF_UP and IFF_RUNNING, which is what NCCL asks of an interface.
    """
    out = []
    for name in sorted(set(addrs) | set(stats)):
        stat = stats.get(name)
        flags = set(getattr(stat, "flags", "").split(",")) if stat is not None else set()
        up = bool(stat is not None and stat.isup and "running" in flags)
        iface = Interface(name, up=up, loopback="loopback" in flags)
        for entry in addrs.get(name, ()):
            if entry.family == socket.AF_INET:
                iface.ipv4.append(f"{entry.address}/{_prefix(entry.netmask, 32)}")
            elif entry.family == socket.AF_INET6:
                iface.ipv6.append(f"{entry.address.split('%')[0]}/{_prefix(entry.netmask, 128)}")
        out.append(iface)
    return out


def _prefix(netmask: str | None, full: int) -> int:
    if not netmask:
        return full
    try:
        return bin(int(ipaddress.ip_address(netmask))).count("1")
    except ValueError:
        return full


def describe(ifaces: list[Interface]) -> str:
    parts = []
    for i in ifaces:
        state = "" if i.up else " (down)"
        addrs = ",".join(a.split("/")[0] for a in i.ipv4) or ("ipv6 only" if i.ipv6 else "no address")
        parts.append(f"{i.name}{state} {addrs}")
    return "; ".join(parts)


def probe_interfaces(ctx: Context) -> None:
    ctx.step("listing interfaces")
    judge_interfaces(ctx, list_interfaces())


def judge_interfaces(ctx: Context, ifaces: list[Interface]) -> None:
    """Facts and findings about ``ifaces`` against the interface settings in ``ctx.env``."""
    if not ifaces:
        raise Skip("no network interfaces are visible")
    ctx.data["interfaces"] = [vars(i) for i in ifaces]
    ctx.find("interfaces: " + describe(ifaces))
    env = ctx.env
    value = env.get("NCCL_SOCKET_IFNAME")
    if value is not None:
        used = nccl_match(value, ifaces)
        ctx.fact("probe_nccl_ifname_matches", bool(used))
        if used:
            ctx.find(f"NCCL_SOCKET_IFNAME={value} selects {', '.join(used)}")
            if all(is_virtual(i) for i in ifaces if i.name in used):
                ctx.find(f"NCCL_SOCKET_IFNAME={value} selects only loopback/bridge/virtual interfaces "
                         f"({', '.join(used)}), which peers on other hosts cannot reach")
        else:
            usable = [i.name for i in ifaces if i.up and i.has_address]
            ctx.fail(f"NCCL_SOCKET_IFNAME={value} matches no interface here that is up with an address "
                     f"(NCCL fails with 'Bootstrap : no socket interface found'); interfaces up: "
                     f"{', '.join(usable) or 'none'}")
    else:
        picked = nccl_auto_pick(ifaces)
        bad = [i for i in ifaces if i.name in picked and is_virtual(i)]
        candidates = [i for i in ifaces if i.up and i.has_address and not is_virtual(i)]
        ctx.fact("probe_nccl_auto_pick_virtual", bool(picked) and len(bad) == len(picked))
        ctx.data["nccl_auto_pick"] = picked
        if picked:
            ctx.find(f"NCCL_SOCKET_IFNAME is unset: NCCL would pick {', '.join(picked[:4])}"
                     + (" — a loopback/bridge/virtual interface" if bad and len(bad) == len(picked) else ""))
        if len(candidates) > 1:
            ctx.find(f"several candidate interfaces ({', '.join(i.name for i in candidates)}); "
                     "set NCCL_SOCKET_IFNAME to the one that reaches the other nodes")
    gloo = env.get("GLOO_SOCKET_IFNAME")
    if gloo is not None:
        caret = gloo.strip().startswith("^")
        ctx.fact("probe_gloo_ifname_caret", caret)
        found, missing = gloo_match(gloo.lstrip("^"), ifaces)
        ok = not caret and not missing and bool(found)
        ctx.fact("probe_gloo_ifname_matches", ok)
        if caret:
            ctx.fail(f"GLOO_SOCKET_IFNAME={gloo} uses '^', which Gloo does not support: it takes exact "
                     "interface names only (e.g. GLOO_SOCKET_IFNAME=eth0)")
        elif missing:
            ctx.fail(f"GLOO_SOCKET_IFNAME={gloo} names {', '.join(missing)}, which does not exist here with an "
                     "address (Gloo needs exact interface names)")
        else:
            ctx.find(f"GLOO_SOCKET_IFNAME={gloo} names existing interfaces")
    for var in ("OMPI_MCA_btl_tcp_if_include", "OMPI_MCA_oob_tcp_if_include"):
        mpi = env.get(var)
        if mpi is None:
            continue
        matched, missing = mpi_match(mpi, ifaces)
        ok = bool(matched) and not missing
        if var.endswith("btl_tcp_if_include") or not ok:
            ctx.fact("probe_mpi_if_include_matches", ok)
        if missing:
            ctx.fail(f"{var}={mpi}: {', '.join(missing)} matches no interface or subnet here")
        else:
            ctx.find(f"{var}={mpi} selects {', '.join(matched)}")
    pairs = same_subnet_pairs(ifaces)
    ctx.fact("probe_same_subnet_nics", bool(pairs))
    for a, b, net in pairs[:3]:
        ctx.find(f"{a} and {b} are both on {net}: replies may leave by the wrong NIC unless routing "
                 "(arp_ignore/arp_announce or policy routing) is set up")
