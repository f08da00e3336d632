"""Interface settings checked against real interfaces, with each library's own matching rules.

- NCCL (``NCCL_SOCKET_IFNAME``): a comma list of name *prefixes*; a leading ``^`` excludes
  them instead; a leading ``=`` (after any ``^``) makes the names exact; ``name:port`` is allowed.
  Only interfaces that are RUNNING and have an IPv4/IPv6 address count. When the variable is
  unset NCCL picks ``ib*`` first, then anything but ``docker*``/``lo``/``virbr*``, then ``docker*``,
  then ``lo``, then ``virbr*``.
- Gloo (``GLOO_SOCKET_IFNAME`` in PyTorch): a comma list of exact interface names; there is no
  ``^`` exclusion and no prefix matching.
- Open MPI (``btl_tcp_if_include`` / ``oob_tcp_if_include``): a comma list of exact interface
  names or IPv4 CIDR subnets (``10.0.0.0/8``).
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

__all__ = ["Interface", "nccl_match", "nccl_auto_pick", "gloo_match", "mpi_match", "is_virtual", "same_subnet_pairs"]

VIRTUAL_PREFIXES = ("docker", "veth", "virbr", "br-", "cni", "flannel", "cali", "tunl", "weave", "vxlan",
                    "kube-", "lxc", "lxd", "podman", "tailscale", "zt", "wg", "tun", "tap")


@dataclass
class Interface:
    name: str
    up: bool = True  # IFF_UP and IFF_RUNNING
    ipv4: list[str] = field(default_factory=list)  # "10.0.0.5/24"
    ipv6: list[str] = field(default_factory=list)  # "fe80::1/64"
    loopback: bool = False

    @property
    def has_address(self) -> bool:
        return bool(self.ipv4 or [a for a in self.ipv6 if not a.startswith("::1/")])


def _parse_nccl(value: str) -> tuple[bool, bool, list[str]]:
    value = value.strip()
    exclude = value.startswith("^")
    if exclude:
        value = value[1:]
    exact = value.startswith("=")
    if exact:
        value = value[1:]
    names = [part.split(":")[0].strip() for part in value.split(",") if part.split(":")[0].strip()]
    return exclude, exact, names


def _usable(ifaces: list[Interface]) -> list[Interface]:
    return [i for i in ifaces if i.up and i.has_address]


def nccl_match(value: str, ifaces: list[Interface]) -> list[str]:
    """Names of the interfaces NCCL would use for this ``NCCL_SOCKET_IFNAME`` value."""
    exclude, exact, names = _parse_nccl(value)

    def listed(name: str) -> bool:
        return any(name == n if exact else name.startswith(n) for n in names)

    return [i.name for i in _usable(ifaces) if listed(i.name) != exclude]


def nccl_auto_pick(ifaces: list[Interface]) -> list[str]:
    """What NCCL picks with ``NCCL_SOCKET_IFNAME`` unset (ignoring the NCCL_COMM_ID subnet rule)."""
    for value in ("ib", "^docker,lo,virbr", "docker", "lo", "virbr"):
        found = nccl_match(value, ifaces)
        if found:
            return found
    return []


def gloo_match(value: str, ifaces: list[Interface]) -> tuple[list[str], list[str]]:
    """(found, missing) exact names of a ``GLOO_SOCKET_IFNAME`` value."""
    have = {i.name for i in ifaces if i.has_address}
    names = [n.strip() for n in value.split(",") if n.strip()]
    return [n for n in names if n in have], [n for n in names if n not in have]


def mpi_match(value: str, ifaces: list[Interface]) -> tuple[list[str], list[str]]:
    """(matched interface names, entries that match nothing) for ``btl_tcp_if_include``."""
    matched: list[str] = []
    missing: list[str] = []
    for entry in (e.strip() for e in value.split(",")):
        if not entry:
            continue
        if "/" in entry:
            try:
                net = ipaddress.ip_network(entry, strict=False)
            except ValueError:
                missing.append(entry)
                continue
            hits = [i.name for i in ifaces for a in i.ipv4 + i.ipv6
                    if ipaddress.ip_interface(a).ip.version == net.version and ipaddress.ip_interface(a).ip in net]
        else:
            hits = [i.name for i in ifaces if i.name == entry]
        if hits:
            matched.extend(h for h in hits if h not in matched)
        else:
            missing.append(entry)
    return matched, missing


def is_virtual(iface: Interface) -> bool:
    """A bridge, container, overlay or loopback interface, or one with only a link-local IPv4."""
    if iface.loopback or iface.name == "lo" or iface.name.startswith(VIRTUAL_PREFIXES):
        return True
    return bool(iface.ipv4) and all(a.startswith("169.254.") for a in iface.ipv4)


def same_subnet_pairs(ifaces: list[Interface]) -> list[tuple[str, str, str]]:
    """Pairs of physical-looking interfaces with IPv4 addresses in the same subnet."""
    nets: list[tuple[str, ipaddress.IPv4Network]] = []
    for i in _usable(ifaces):
        if is_virtual(i):
            continue
        for a in i.ipv4:
            nets.append((i.name, ipaddress.ip_interface(a).network))
    pairs = []
    for x in range(len(nets)):
        for y in range(x + 1, len(nets)):
            if nets[x][0] != nets[y][0] and nets[x][1] == nets[y][1]:
                pairs.append((nets[x][0], nets[y][0], str(nets[x][1])))
    return pairs
