"""The cluster probe's cross-rank checks: versions, settings, interfaces, GPU counts and
/dev/shm compared across ranks, naming the odd ones out."""
from __future__ import annotations

import json
from typing import Any

__all__ = ["compare"]


def _odd_ones(values: dict[int, Any]) -> list[int]:
    """Ranks whose value differs from the most common value."""
    groups: dict[str, list[int]] = {}
    for rank, value in values.items():
        groups.setdefault(json.dumps(value, sort_keys=True, default=str), []).append(rank)
    if len(groups) < 2:
        return []
    common = max(groups.values(), key=lambda g: (len(g), -min(g)))
    return sorted(r for g in groups.values() if g is not common for r in g)


def compare(infos: dict[int, dict[str, Any]]) -> tuple[dict[str, Any], list[str], list[dict[str, Any]]]:
    """Facts, findings and differences from all ranks' host information."""
    from .ifmatch import Interface, nccl_match

    facts: dict[str, Any] = {}
    findings: list[str] = []
    diffs: list[dict[str, Any]] = []

    def note(kind: str, what: str, values: dict[int, Any]) -> None:
        odd = _odd_ones(values)
        if not odd:
            return
        hosts = {r: infos[r]["host"] for r in odd}
        diffs.append({"kind": kind, "what": what, "values": {str(k): v for k, v in values.items()}, "odd_ranks": odd})
        shown = ", ".join(f"rank {r} ({hosts[r]}): {values[r]!r}" for r in odd[:4])
        common = next(v for k, v in values.items() if k not in odd)
        findings.append(f"{what} differs across ranks: {shown}; others: {common!r}")

    ranks = sorted(infos)
    versions_before = len(diffs)
    for part in ("torch", "cuda", "nccl", "driver"):
        vals = {r: infos[r].get("versions", {}).get(part) for r in ranks}
        if any(v for v in vals.values()):
            note("version", f"{part} version", vals)
    facts["probe_cluster_versions_differ"] = len(diffs) > versions_before
    env_before = len(diffs)
    names = sorted({k for r in ranks for k in infos[r].get("env", {})})
    for name in names:
        note("env", name, {r: infos[r].get("env", {}).get(name, "<unset>") for r in ranks})
    facts["probe_cluster_nccl_env_differs"] = len(diffs) > env_before
    mismatch: dict[int, bool] = {}
    for r in ranks:
        value = infos[r].get("env", {}).get("NCCL_SOCKET_IFNAME")
        if value is not None:
            ifaces = [Interface(**i) for i in infos[r].get("interfaces", [])]
            mismatch[r] = bool(nccl_match(value, ifaces))
    if mismatch:
        bad = [r for r, ok in mismatch.items() if not ok]
        facts["probe_cluster_ifname_mismatch"] = bool(bad) and len(bad) < len(mismatch)
        if bad:
            findings.append("NCCL_SOCKET_IFNAME matches no interface on " + ", ".join(
                f"rank {r} ({infos[r]['host']}, has {', '.join(i['name'] for i in infos[r].get('interfaces', []))})"
                for r in bad[:4]))
            diffs.append({"kind": "interface", "what": "NCCL_SOCKET_IFNAME matches nothing", "odd_ranks": bad})
    gpus = {r: infos[r].get("gpus", 0) for r in ranks}
    per_host: dict[str, int] = {}
    for r in ranks:
        per_host.setdefault(infos[r]["host"], gpus[r])
    note("gpus", "GPU count", gpus)
    facts["probe_cluster_gpu_counts_differ"] = len(set(per_host.values())) > 1
    shm = {r: infos[r].get("shm_mb", 0) for r in ranks}
    small, big = min(shm.values(), default=0), max(shm.values(), default=0)
    facts["probe_cluster_shm_differs"] = big > 2 * max(small, 1)
    if facts["probe_cluster_shm_differs"]:
        note("shm", "/dev/shm size (MB)", shm)
    # Host facts: the common value, or the odd rank's value where they differ.
    merged: dict[str, Any] = {}
    for name in sorted({k for r in ranks for k in infos[r].get("facts", {})}):
        vals = {r: infos[r]["facts"][name] for r in ranks if name in infos[r].get("facts", {})}
        odd = _odd_ones(vals)
        merged[name] = vals[odd[0]] if odd else next(iter(vals.values()))
    facts = {**merged, **facts}
    return facts, findings, diffs
