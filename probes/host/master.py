"""MASTER_ADDR / MASTER_PORT: does the address resolve, is the port taken here (and by whom),
does the master answer, and if not, is it the host or the port that is blocked."""
from __future__ import annotations

import contextlib
import errno
import ipaddress
import os
import socket
import struct
import time

from ..registry import Context, Skip


def local_addresses() -> set[str]:
    """Every address of this machine (psutil), loopback included."""
    import psutil

    out = {"127.0.0.1", "::1"}
    for entries in psutil.net_if_addrs().values():
        for entry in entries:
            if entry.family in (socket.AF_INET, socket.AF_INET6):
                out.add(entry.address.split("%")[0])
    return out


def port_listeners(port: int) -> tuple[bool, list[str]]:
    """(a TCP listener holds ``port`` here, ["pid N (command)" of the owners that can be seen])."""
    import psutil

    try:
        conns = psutil.net_connections(kind="tcp")
    except psutil.Error:  # not allowed to list them: try to bind instead
        conns = None
    if conns is not None:
        pids = {c.pid for c in conns if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port}
        if pids:
            return True, [_owner(psutil, pid) for pid in sorted(p for p in pids if p is not None)]
    return _bind_fails(port), []


def _owner(psutil, pid: int) -> str:
    try:
        command = " ".join(psutil.Process(pid).cmdline()).strip()[:80]
    except psutil.Error:
        command = ""
    return f"pid {pid} ({command or '?'})"


def _bind_fails(port: int) -> bool:
    for family, host in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        try:
            with contextlib.closing(socket.socket(family, socket.SOCK_STREAM)) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return True
    return False


def tcp_connect(host: str, port: int, timeout: float) -> tuple[str, str]:
    """("open" | "refused" | "timeout" | "unreachable" | "error", message)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        return "error", f"cannot resolve {host}: {exc}"
    family, _, _, _, addr = infos[0]
    with contextlib.closing(socket.socket(family, socket.SOCK_STREAM)) as s:
        s.settimeout(timeout)
        try:
            s.connect(addr)
            return "open", "connected"
        except socket.timeout:
            return "timeout", f"no answer within {timeout:g} s (packets dropped)"
        except ConnectionRefusedError:
            return "refused", "connection refused (host up, nothing listening, or a REJECT rule)"
        except OSError as exc:
            if exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EACCES, errno.EPERM):
                return "unreachable", exc.strerror or str(exc)
            if exc.errno == errno.ETIMEDOUT:
                return "timeout", exc.strerror or str(exc)
            return "error", exc.strerror or str(exc)


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def icmp_echo(ip: str, timeout: float) -> bool | None:
    """True if ``ip`` answers an ICMP echo, False if not, None if we cannot send one (no privilege)."""
    if ":" in ip:
        return None
    ident = os.getpid() & 0xFFFF
    for kind in (socket.SOCK_DGRAM, socket.SOCK_RAW):
        try:
            s = socket.socket(socket.AF_INET, kind, socket.IPPROTO_ICMP)
        except OSError:
            continue
        with contextlib.closing(s):
            header = struct.pack("!BBHHH", 8, 0, 0, ident, 1)
            payload = b"nccl-doctor"
            packet = struct.pack("!BBHHH", 8, 0, _checksum(header + payload), ident, 1) + payload
            try:
                s.sendto(packet, (ip, 0))
            except OSError:
                return False
            stop = time.monotonic() + timeout
            while True:
                left = stop - time.monotonic()
                if left <= 0:
                    return False
                s.settimeout(left)
                try:
                    data, (src, _) = s.recvfrom(2048)
                except (socket.timeout, OSError):
                    return False
                if kind == socket.SOCK_RAW:
                    data = data[(data[0] & 0x0F) * 4:]
                if src == ip and data and data[0] == 0:
                    return True
    return None


def neighbor_resolved(ctx: Context, ip: str) -> bool:
    """The kernel holds a complete ARP entry for ``ip`` (it answered at layer 2)."""
    for line in ctx.read("/proc/net/arp").splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 4 and parts[0] == ip and int(parts[2], 16) & 0x2 and parts[3] != "00:00:00:00:00:00":
            return True
    return False




def probe_master(ctx: Context) -> None:
    env = ctx.env
    addr = env.get("MASTER_ADDR")
    try:
        port = int(env.get("MASTER_PORT", "29500"))
    except ValueError:
        raise Skip(f"MASTER_PORT={env.get('MASTER_PORT')!r} is not a number") from None
    local = True
    resolved: list[str] = []
    if addr:
        ctx.step(f"resolving MASTER_ADDR={addr}")
        try:
            resolved = list(dict.fromkeys(i[4][0] for i in socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM)))
        except OSError as exc:
            ctx.fact("probe_master_addr_resolves", False)
            ctx.fail(f"MASTER_ADDR={addr} does not resolve: {exc.strerror or exc}")
            return
        ctx.fact("probe_master_addr_resolves", True)
        loop = any(ipaddress.ip_address(ip.split("%")[0]).is_loopback for ip in resolved)
        ctx.fact("probe_master_addr_loopback", loop)
        ctx.find(f"MASTER_ADDR={addr} resolves to {', '.join(resolved)}"
                 + (" (loopback: other nodes cannot reach it)" if loop else ""))
        local = loop or bool(set(resolved) & local_addresses())
    if local:
        ctx.step(f"checking whether port {port} is already bound here")
        bound, owners = port_listeners(port)
        ctx.fact("probe_master_port_bound_here", bound)
        if bound:
            ctx.fail(f"port {port} (MASTER_PORT) is already in use on this host"
                     + (f" by {'; '.join(owners[:3])}" if owners else "")
                     + ": a new rank 0 cannot bind its TCPStore there (EADDRINUSE)")
        else:
            ctx.find(f"port {port} is free on this host")
    if not addr:
        ctx.find("MASTER_ADDR is not set: only checked the port on this host")
        return
    if local and not ctx.facts.get("probe_master_port_bound_here"):
        return  # nothing listens yet; a connect would only say "refused"
    ip = resolved[0]
    ctx.step(f"connecting to {ip}:{port}")
    outcome, message = tcp_connect(ip, port, timeout=min(1.5, max(ctx.deadline / 3, 0.5)))
    ctx.fact("probe_master_tcp", outcome)
    ctx.find(f"TCP {ip}:{port}: {message}")
    if local:
        return
    ctx.step(f"sending an ICMP echo to {ip}")
    echo = icmp_echo(ip, timeout=min(1.0, max(ctx.deadline / 4, 0.3)))
    if echo is not None:
        ctx.fact("ping_works", echo)
    reachable = bool(echo) or neighbor_resolved(ctx, ip) or outcome in ("open", "refused")
    if echo is None and not reachable and outcome in ("timeout", "unreachable"):
        return  # cannot tell a dead host from a filtered port
    ctx.fact("probe_master_host_reachable", reachable)
    if echo:
        ctx.find(f"{ip} answers ping")
    elif reachable and outcome not in ("open", "refused"):
        ctx.find(f"{ip} answers at layer 2 (ARP) but not ping")
    if reachable and outcome in ("timeout", "unreachable"):
        ctx.fail(f"{ip} is up but TCP to port {port} is {'dropped' if outcome == 'timeout' else 'rejected'}: "
                 "a firewall or security group blocks the port")


