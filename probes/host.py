"""Host probes: each is a function of a :class:`~.registry.Context` that sets facts and says
what it found. They read /sys, /proc and sockets directly and call external tools only
through ``ctx.run`` (argument lists, timeouts). torch is imported only here, in the child.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import glob
import ipaddress
import json
import os
import re
import resource
import socket
import struct
import time
from pathlib import Path

from .ifmatch import (Interface, gloo_match, is_virtual, mpi_match, nccl_auto_pick, nccl_match,
                      same_subnet_pairs)
from .registry import Context, Skip

DEBUG_KNOBS = ("NCCL_PROTO", "NCCL_ALGO", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_IB_DISABLE",
               "NCCL_NET_DISABLE", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_BUFFSIZE", "NCCL_NTHREADS",
               "NCCL_LAUNCH_MODE", "NCCL_CHECKS_DISABLE", "NCCL_NVLS_ENABLE", "CUDA_LAUNCH_BLOCKING")
SYS = Path("/")  # tests may point this at a fake tree


def _p(path: str) -> Path:
    return SYS / path.lstrip("/")


def _read(path: str, default: str = "") -> str:
    try:
        return _p(path).read_text(errors="replace").strip()
    except OSError:
        return default


# ----------------------------------------------------------------------------- environment
def probe_env(ctx: Context) -> None:
    env = ctx.env
    ifname = env.get("NCCL_SOCKET_IFNAME")
    ctx.fact("nccl_socket_ifname_set", ifname is not None)
    if ifname is not None:
        ctx.fact("nccl_socket_ifname", ifname)
    knobs = [f"{k}={env[k]}" for k in DEBUG_KNOBS if k in env and not (k == "NCCL_NVLS_ENABLE" and env[k] == "1")]
    ctx.fact("probe_debug_knobs_set", bool(knobs))
    if knobs:
        ctx.find("debugging-only settings are set: " + ", ".join(knobs))
    problems = _dist_env_problems(env)
    ctx.fact("probe_dist_env_problem", bool(problems))
    for p in problems:
        ctx.find(p)
    if "SLURM_JOB_ID" in env:
        ctx.fact("orchestrator", "slurm")
    shown = {k: v for k, v in sorted(env.items()) if not k.startswith(("LD_", "KUBERNETES_", "NVIDIA_"))}
    ctx.data["env"] = shown
    if shown:
        ctx.find("relevant variables: " + ", ".join(f"{k}={v}" for k, v in list(shown.items())[:25])
                 + (" ..." if len(shown) > 25 else ""))
    else:
        ctx.find("no NCCL_/TORCH_/MASTER_/GLOO_/FI_/OMPI_/SLURM_ variables are set")


def _int(env, name):
    try:
        return int(env[name])
    except (KeyError, ValueError):
        return None


def _dist_env_problems(env) -> list[str]:
    out = []
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_PORT"):
        if name in env and _int(env, name) is None:
            out.append(f"{name}={env[name]!r} is not an integer")
    rank, world = _int(env, "RANK"), _int(env, "WORLD_SIZE")
    if rank is not None and world is not None and not 0 <= rank < world:
        out.append(f"RANK={rank} is outside 0..WORLD_SIZE-1 (WORLD_SIZE={world})")
    lrank, lworld = _int(env, "LOCAL_RANK"), _int(env, "LOCAL_WORLD_SIZE")
    if lrank is not None and lworld is not None and not 0 <= lrank < lworld:
        out.append(f"LOCAL_RANK={lrank} is outside 0..LOCAL_WORLD_SIZE-1 (LOCAL_WORLD_SIZE={lworld})")
    port = _int(env, "MASTER_PORT")
    if port is not None and not 0 < port < 65536:
        out.append(f"MASTER_PORT={port} is not a valid TCP port")
    ntasks = _int(env, "SLURM_NTASKS")
    if world is not None and ntasks is not None and world != ntasks and "TORCHELASTIC_RUN_ID" not in env:
        out.append(f"WORLD_SIZE={world} differs from SLURM_NTASKS={ntasks}")
    return out


# ----------------------------------------------------------------------------- interfaces
def list_interfaces(ctx: Context) -> list[Interface]:
    """Interfaces with flags from /sys/class/net and addresses from `ip -j addr` (or ioctl)."""
    ifaces: dict[str, Interface] = {}
    for d in sorted(glob.glob(str(_p("/sys/class/net/*")))):
        name = os.path.basename(d)
        try:
            flags = int(_read(f"/sys/class/net/{name}/flags", "0x0"), 16)
        except ValueError:
            flags = 0
        # IFF_RUNNING is not in sysfs flags; operstate up (or unknown, as on lo) is the same test.
        running = _read(f"/sys/class/net/{name}/operstate") in ("up", "unknown")
        ifaces[name] = Interface(name, up=bool(flags & 0x1) and running, loopback=bool(flags & 0x8))
    ctx.step("listing addresses (ip -j addr)")
    res = ctx.run(["ip", "-j", "addr", "show"], timeout=2.0)
    parsed = False
    if res.ok:
        try:
            for item in json.loads(res.stdout or "[]"):
                name = item.get("ifname", "")
                iface = ifaces.setdefault(name, Interface(name, up="UP" in item.get("flags", []),
                                                          loopback="LOOPBACK" in item.get("flags", [])))
                for a in item.get("addr_info", []):
                    addr = f"{a.get('local')}/{a.get('prefixlen')}"
                    (iface.ipv4 if a.get("family") == "inet" else iface.ipv6).append(addr)
            parsed = True
        except (ValueError, AttributeError):
            parsed = False
    if not parsed:
        for iface in ifaces.values():
            iface.ipv4 = _ioctl_ipv4(iface.name)
        for line in _read("/proc/net/if_inet6").splitlines():
            parts = line.split()
            if len(parts) >= 6 and parts[5] in ifaces:
                addr = ipaddress.IPv6Address(bytes.fromhex(parts[0]))
                ifaces[parts[5]].ipv6.append(f"{addr}/{int(parts[2], 16)}")
    return list(ifaces.values())


def _ioctl_ipv4(name: str) -> list[str]:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_DGRAM)) as s:
        try:
            packed = struct.pack("256s", name[:15].encode())
            addr = socket.inet_ntoa(fcntl.ioctl(s.fileno(), 0x8915, packed)[20:24])
            mask = socket.inet_ntoa(fcntl.ioctl(s.fileno(), 0x891B, packed)[20:24])
        except OSError:
            return []
    return [f"{addr}/{ipaddress.IPv4Network(f'0.0.0.0/{mask}').prefixlen}"]


def _describe(ifaces: list[Interface]) -> str:
    parts = []
    for i in ifaces:
        state = "" if i.up else " (down)"
        addrs = ",".join(a.split("/")[0] for a in i.ipv4) or ("ipv6 only" if i.ipv6 else "no address")
        parts.append(f"{i.name}{state} {addrs}")
    return "; ".join(parts)


def probe_interfaces(ctx: Context) -> None:
    ctx.step("reading /sys/class/net")
    ifaces = list_interfaces(ctx)
    if not ifaces:
        raise Skip("no network interfaces are visible (/sys/class/net is empty and `ip` failed)")
    ctx.data["interfaces"] = [vars(i) for i in ifaces]
    ctx.find("interfaces: " + _describe(ifaces))
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


# ----------------------------------------------------------------------------- MASTER_ADDR / PORT
def _local_addresses() -> set[str]:
    out = {"127.0.0.1", "::1"}
    for d in glob.glob(str(_p("/sys/class/net/*"))):
        out.update(a.split("/")[0] for a in _ioctl_ipv4(os.path.basename(d)))
    for line in _read("/proc/net/if_inet6").splitlines():
        parts = line.split()
        if parts:
            out.add(str(ipaddress.IPv6Address(bytes.fromhex(parts[0]))))
    return out


def listening_inodes(port: int) -> list[tuple[str, int]]:
    """(local address, socket inode) of TCP listeners on ``port`` from /proc/net/tcp{,6}."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in _read(table).splitlines()[1:]:
            parts = line.split()
            if len(parts) < 10 or parts[3] != "0A":
                continue
            addr_hex, port_hex = parts[1].split(":")
            if int(port_hex, 16) == port:
                found.append((addr_hex, int(parts[9])))
    return found


def socket_owners(inodes: set[int], limit_s: float = 1.0) -> list[str]:
    """"pid (command)" of processes holding these socket inodes (best effort, time-limited)."""
    owners, stop = [], time.monotonic() + limit_s
    targets = {f"socket:[{i}]" for i in inodes}
    for pid_dir in glob.glob("/proc/[0-9]*"):
        if time.monotonic() > stop:
            break
        try:
            for fd in os.listdir(f"{pid_dir}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"{pid_dir}/fd/{fd}") in targets:
                        cmd = _read(f"{pid_dir}/cmdline").replace("\0", " ").strip()[:80]
                        owners.append(f"pid {os.path.basename(pid_dir)} ({cmd or '?'})")
                        break
        except OSError:
            continue
    return owners


def port_bound_here(port: int) -> tuple[bool, list[str]]:
    listeners = listening_inodes(port)
    if listeners:
        return True, socket_owners({i for _, i in listeners})
    for family, host in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        try:
            with contextlib.closing(socket.socket(family, socket.SOCK_STREAM)) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return True, []
    return False, []


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


def neighbor_resolved(ip: str) -> bool:
    """The kernel holds a complete ARP entry for ``ip`` (it answered at layer 2)."""
    for line in _read("/proc/net/arp").splitlines()[1:]:
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
        local = loop or bool(set(resolved) & _local_addresses())
    if local:
        ctx.step(f"checking whether port {port} is already bound here")
        bound, owners = port_bound_here(port)
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
    reachable = bool(echo) or neighbor_resolved(ip) or outcome in ("open", "refused")
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


# ----------------------------------------------------------------------------- resources
def probe_shm(ctx: Context) -> None:
    try:
        st = os.statvfs(_p("/dev/shm"))
    except OSError:
        ctx.fact("probe_shm_size_mb", 0)
        ctx.fail("/dev/shm does not exist: NCCL's shared-memory transport cannot work")
        return
    size = st.f_blocks * st.f_frsize // 2**20
    free = st.f_bavail * st.f_frsize // 2**20
    ctx.fact("probe_shm_size_mb", size)
    ctx.fact("probe_shm_free_mb", free)
    stale = glob.glob(str(_p("/dev/shm/nccl-*")))
    ctx.data["nccl_segments"] = len(stale)
    line = f"/dev/shm: {size} MB, {free} MB free"
    if stale:
        line += f", {len(stale)} nccl-* segments present"
    if size < 512:
        ctx.fail(line + " — too small for NCCL with several GPUs (Docker's default is 64 MB)")
    else:
        ctx.find(line)


def probe_limits(ctx: Context) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ctx.fact("probe_ulimit_nofile", soft if soft != resource.RLIM_INFINITY else 1 << 30)
    ml_soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    unlimited = ml_soft == resource.RLIM_INFINITY
    ctx.fact("probe_memlock_unlimited", unlimited)
    if not unlimited:
        ctx.fact("probe_memlock_kb", ml_soft // 1024)
    nofile = "unlimited" if soft == resource.RLIM_INFINITY else str(soft)
    ctx.find(f"open files (ulimit -n): {nofile} (hard {hard if hard != resource.RLIM_INFINITY else 'unlimited'}); "
             f"locked memory (ulimit -l): {'unlimited' if unlimited else f'{ml_soft // 1024} KB'}")
    ctx.find("limits are this process's; check them through your launcher too (srun/mpirun bash -c 'ulimit -a')")


def probe_container(ctx: Context) -> None:
    cgroup = _read("/proc/1/cgroup") + "\n" + _read("/proc/self/cgroup")
    env = ctx.env
    kind = "none"
    if _p("/.dockerenv").exists() or re.search(r"docker|containerd", cgroup):
        kind = "docker"
    elif _p("/run/.containerenv").exists() or env.get("container") == "podman":
        kind = "podman"
    elif any(k in os.environ for k in ("APPTAINER_CONTAINER", "SINGULARITY_CONTAINER")):
        kind = "apptainer"
    elif "ENROOT_ROOTFS" in os.environ or env.get("container") == "enroot":
        kind = "enroot"
    elif env.get("container") or re.search(r"kubepods|lxc|libpod", cgroup):
        kind = "other"
    k8s = "KUBERNETES_SERVICE_HOST" in env or _p("/var/run/secrets/kubernetes.io/serviceaccount").exists()
    if k8s and kind == "none":
        kind = "other"
    ctx.fact("container", kind)
    if k8s:
        ctx.fact("orchestrator", "kubernetes")
    ctx.find(("not in a container" if kind == "none" else f"inside a container ({kind})")
             + ("; running under Kubernetes" if k8s else ""))


# ----------------------------------------------------------------------------- RDMA
PLUGIN_DIRS = ("/opt/amazon/ofi-nccl/lib", "/opt/amazon/ofi-nccl/lib64", "/opt/aws-ofi-nccl/lib",
               "/usr/local/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
               "/opt/hpcx/nccl_rdma_sharp_plugin/lib")


def probe_rdma(ctx: Context) -> None:
    devs = sorted(glob.glob(str(_p("/sys/class/infiniband/*"))))
    kinds, active, ports = set(), 0, 0
    for d in devs:
        name = os.path.basename(d)
        driver = os.path.basename(os.path.realpath(f"{d}/device/driver")) if os.path.exists(f"{d}/device/driver") else ""
        for port_dir in glob.glob(f"{d}/ports/*"):
            ports += 1
            layer = _read(f"{port_dir}/link_layer")
            state = _read(f"{port_dir}/state")
            if "ACTIVE" in state:
                active += 1
            kinds.add("efa" if driver == "efa" or name.startswith("efa") else
                      "roce" if layer == "Ethernet" else "infiniband")
            ctx.find(f"{name} port {os.path.basename(port_dir)}: {layer or '?'} {state or '?'}")
    kind = "efa" if "efa" in kinds else "infiniband" if "infiniband" in kinds else "roce" if "roce" in kinds else "none"
    ctx.fact("probe_rdma_kind", kind)
    ctx.fact("probe_rdma_devices", len(devs))
    uverbs = bool(glob.glob(str(_p("/dev/infiniband/uverbs*"))))
    ctx.fact("probe_uverbs_present", uverbs)
    if not devs:
        ctx.find("no InfiniBand/RoCE/EFA devices (/sys/class/infiniband is empty): NCCL will use TCP sockets")
        return
    ctx.fact("probe_rdma_ports_active", active)
    if active == 0:
        ctx.fail(f"{len(devs)} RDMA device(s) but no port is ACTIVE")
    if not uverbs:
        ctx.fail("RDMA devices exist but /dev/infiniband/uverbs* is missing (not passed into the container?)")
    modules = _read("/proc/modules")
    peermem = (bool(re.search(r"^(nvidia_peermem|nv_peer_mem) ", modules, re.M))
               or _p("/sys/module/nvidia_peermem").exists()
               or _p("/sys/kernel/mm/memory_peers/nv_mem/version").exists())
    ctx.fact("probe_peermem_loaded", peermem)
    ctx.find("GPUDirect RDMA module (nvidia_peermem) " + ("loaded" if peermem else "NOT loaded"))
    dirs = [d for d in ctx.env.get("LD_LIBRARY_PATH", "").split(":") if d] + list(PLUGIN_DIRS)
    plugins = sorted({os.path.basename(f) for d in dirs for f in glob.glob(os.path.join(d, "libnccl-net*.so*"))})
    ctx.fact("probe_nccl_net_plugin_found", bool(plugins))
    ctx.find("NCCL net plugin: " + (", ".join(plugins) if plugins else "none found (libnccl-net*.so)"))


# ----------------------------------------------------------------------------- GPUs
CONSUMER = re.compile(r"GeForce|RTX \d{4}(?! Ada)|TITAN", re.I)


def probe_gpu(ctx: Context) -> None:
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        pynvml = None
    if pynvml is not None:
        try:
            _gpu_nvml(ctx, pynvml)
            return
        except Exception as exc:  # noqa: BLE001 - fall back to nvidia-smi
            ctx.data["nvml_error"] = str(exc)
    ctx.step("running nvidia-smi")
    res = ctx.run(["nvidia-smi", "--query-gpu=name,driver_version,mig.mode.current,ecc.errors.uncorrected.volatile.total",
                   "--format=csv,noheader"], timeout=3.0)
    if res.error == "not found":
        raise Skip("no NVIDIA tools: neither nvidia-ml-py (pynvml) nor nvidia-smi is available")
    if not res.ok:
        ctx.fact("num_gpus", 0)
        ctx.fail(f"nvidia-smi failed: {(res.stderr or res.stdout or res.error).strip()[:200]}")
        return
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


def _gpu_facts(ctx: Context, rows: list[tuple[str, str, str, str]]) -> None:
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


def _gpu_nvml(ctx: Context, nv) -> None:
    ctx.step("initialising NVML")
    nv.nvmlInit()
    try:
        driver = nv.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else driver
        rows, fabric, inactive = [], [], 0
        for i in range(nv.nvmlDeviceGetCount()):
            ctx.step(f"querying GPU {i}")
            h = nv.nvmlDeviceGetHandleByIndex(i)
            name = nv.nvmlDeviceGetName(h)
            name = name.decode() if isinstance(name, bytes) else name
            mig = ""
            with contextlib.suppress(Exception):
                mig = "Enabled" if nv.nvmlDeviceGetMigMode(h)[0] else "Disabled"
            ecc = ""
            with contextlib.suppress(Exception):
                ecc = str(nv.nvmlDeviceGetTotalEccErrors(h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC))
            rows.append((name, driver, mig, ecc))
            with contextlib.suppress(Exception):
                info = nv.nvmlDeviceGetGpuFabricInfo(h)
                state = {0: "Not Started", 1: "In Progress", 2: "Completed"}.get(int(info.state), str(info.state))
                fabric.append((state, "Success" if int(info.status) == 0 else f"error {info.status}"))
            for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
                try:
                    if not nv.nvmlDeviceGetNvLinkState(h, link):
                        inactive += 1
                except Exception:  # noqa: BLE001 - the link does not exist
                    continue
        _gpu_facts(ctx, rows)
        _fabric(ctx, fabric)
        ctx.fact("probe_gpu_nvlink_inactive", inactive)
        if inactive:
            ctx.fail(f"{inactive} NVLink link(s) inactive")
    finally:
        with contextlib.suppress(Exception):
            nv.nvmlShutdown()


# ----------------------------------------------------------------------------- versions, P2P
def _nccl_version(torch) -> str:
    try:
        v = torch.cuda.nccl.version()
    except Exception:  # noqa: BLE001 - no NCCL in this build
        return ""
    if isinstance(v, tuple):
        return ".".join(map(str, v))
    v = int(v)
    return f"{v // 10000}.{v // 100 % 100}.{v % 100}" if v >= 10000 else f"{v // 1000}.{v // 100 % 10}.{v % 100}"


def probe_versions(ctx: Context) -> None:
    ctx.step("importing torch")
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        raise Skip("torch is not installed in this Python") from None
    ctx.fact("torch_version", torch.__version__.split("+")[0])
    cuda = torch.version.cuda or ""
    if cuda:
        ctx.fact("cuda_version", cuda)
    has_nccl = bool(dist.is_available() and dist.is_nccl_available())
    ctx.fact("probe_torch_has_nccl", has_nccl)
    ctx.step("asking torch.cuda for devices")
    avail = bool(torch.cuda.is_available())
    ctx.fact("probe_torch_cuda_available", avail)
    nccl = _nccl_version(torch) if has_nccl else ""
    if nccl:
        ctx.fact("nccl_version", nccl)
    ctx.find(f"torch {torch.__version__}, CUDA {cuda or 'none (CPU build)'}, NCCL {nccl or 'not built in'}, "
             f"gloo {'yes' if dist.is_available() and dist.is_gloo_available() else 'no'}"
             + (f", {torch.cuda.device_count()} GPU(s) visible to torch" if avail else ""))


def probe_p2p(ctx: Context) -> None:
    cmdline = _read("/proc/cmdline")
    groups = glob.glob(str(_p("/sys/kernel/iommu_groups/*")))
    passthrough = bool(re.search(r"\biommu=pt\b|\b(intel|amd)_iommu=off\b", cmdline))
    iommu = bool(groups) and not passthrough
    ctx.fact("probe_iommu_enabled", iommu)
    ctx.find(f"IOMMU: {'translating DMA' if iommu else 'passthrough' if groups else 'off'}"
             + (f" ({len(groups)} groups)" if groups else ""))
    res = ctx.run(["lspci", "-vvv"], timeout=3.0)
    if res.ok:
        acs = len(re.findall(r"ACSCtl:.*SrcValid\+", res.stdout))
        ctx.fact("probe_acs_enabled", acs > 0)
        ctx.find(f"PCIe ACS source validation enabled on {acs} bridge(s)" if acs else "PCIe ACS: not enabled")
    else:
        ctx.find("PCIe ACS: not readable (" + (res.error or "lspci failed") + "; run sudo lspci -vvv | grep ACSCtl)")
    if not glob.glob("/proc/driver/nvidia/gpus/*"):
        ctx.find("no NVIDIA GPUs: P2P matrix not applicable")
        return
    ctx.step("importing torch for the P2P matrix")
    try:
        import torch
    except ImportError:
        ctx.find("torch not installed: P2P matrix not read")
        return
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    blocked = []
    for i in range(n):
        for j in range(n):
            if i != j and not torch.cuda.can_device_access_peer(i, j):
                blocked.append(f"{i}->{j}")
    ctx.fact("probe_p2p_pairs_blocked", len(blocked))
    if n > 1:
        ctx.find(f"P2P between {n} GPUs: " + (f"not possible for {', '.join(blocked[:8])}" if blocked else "all pairs"))
