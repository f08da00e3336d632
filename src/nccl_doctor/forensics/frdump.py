"""PyTorch Flight Recorder dumps, read as untrusted data.

``TORCH_NCCL_DUMP_ON_TIMEOUT=1`` (with ``TORCH_FR_BUFFER_SIZE`` / ``TORCH_NCCL_TRACE_BUFFER_SIZE``)
makes each rank write ``<TORCH_FR_DUMP_TEMP_FILE><rank>``: a pickle of plain dicts, lists, tuples,
strings and numbers (``version``, ``pg_config``, ``pg_status``, ``entries``), or the same content as
JSON. A pickle from someone else's cluster can run code when loaded with ``pickle.load``; this
module loads it with an unpickler that refuses every global (class or function), so only plain
data can come out, and refuses files larger than :data:`MAX_DUMP_BYTES`.
"""
from __future__ import annotations

import io
import json
import os
import pickle
import re

from ..errors import DumpProblem, UnsafeDump
from .scan import Event, FileScan, PGState, Stream, names_from_path

__all__ = ["UnsafeDump", "DumpProblem", "looks_like_dump", "load_dump", "scan_dump", "MAX_DUMP_BYTES"]

MAX_DUMP_BYTES = 256 << 20


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):  # noqa: D401 - pickle API
        raise UnsafeDump(
            f"refusing to load {module}.{name} from a Flight Recorder dump: dumps hold only plain "
            "data (dict, list, tuple, str, int, float, bool, None); this file asks for a Python "
            "object, so it is not a genuine dump or it was tampered with")

    def persistent_load(self, pid):
        raise UnsafeDump("refusing a pickle with persistent ids: not a Flight Recorder dump")


def looks_like_dump(head: bytes) -> str | None:
    """'pickle' or 'json' when the first bytes of a file look like a Flight Recorder dump."""
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return "pickle"
    stripped = head.lstrip()
    if stripped.startswith(b"{") and (b'"pg_status"' in head or b'"entries"' in head or b'"pg_config"' in head):
        return "json"
    return None


def load_dump(path: str) -> dict:
    """The dump as plain data. Raises :class:`UnsafeDump` or :class:`DumpProblem`."""
    try:
        size = os.path.getsize(path)
        if size > MAX_DUMP_BYTES:
            raise DumpProblem(f"{path}: {size} bytes is larger than any Flight Recorder dump "
                              f"({MAX_DUMP_BYTES >> 20} MB limit)")
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise DumpProblem(f"{path}: cannot open: {exc.strerror or exc}") from None
    kind = looks_like_dump(raw[:65536])
    try:
        if kind == "pickle":
            data = _PlainUnpickler(io.BytesIO(raw)).load()
        elif kind == "json":
            data = json.loads(raw.decode("utf-8", "replace"))
        else:
            raise DumpProblem(f"{path}: not a Flight Recorder dump (neither pickle nor JSON)")
    except UnsafeDump as exc:
        raise UnsafeDump(f"{path}: {exc}") from None
    except DumpProblem:
        raise
    except Exception as exc:  # truncated or corrupt pickle / JSON
        raise DumpProblem(f"{path}: unreadable Flight Recorder dump: {exc}") from None
    if not isinstance(data, dict) or not ("entries" in data or "pg_status" in data):
        raise DumpProblem(f"{path}: not a Flight Recorder dump (no entries / pg_status)")
    return data


def _int(v) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _op_name(profiling_name: str | None) -> str | None:
    if not profiling_name:
        return None
    return profiling_name.split(":", 1)[-1].upper()  # "nccl:all_reduce" -> "ALL_REDUCE"


def _entry(e: dict) -> dict:
    frames = e.get("frames") or []
    stack = []
    for fr in frames[:12]:
        if isinstance(fr, dict):
            stack.append(f"{fr.get('name')} at {fr.get('filename')}:{fr.get('line')}")
    return {
        "seq": _int(e.get("collective_seq_id")),
        "op": _op_name(e.get("profiling_name")),
        "profiling_name": e.get("profiling_name"),
        "input_sizes": e.get("input_sizes"),
        "output_sizes": e.get("output_sizes"),
        "input_dtypes": e.get("input_dtypes"),
        "output_dtypes": e.get("output_dtypes"),
        "state": e.get("state"),
        "time_created_ns": _int(e.get("time_created_ns")),
        "stack": stack,
    }


def scan_dump(path: str) -> FileScan:
    """One rank's dump as a :class:`FileScan` with one stream (rank from the file name suffix)."""
    data = load_dump(path)
    rank, _local, host = names_from_path(path, dump=True)
    st = Stream(key=f"r{rank}" if rank is not None else "dump", file=path, rank=rank, host=host, is_dump=True)
    base = os.path.basename(path)
    pg_names: dict[str, str] = {}
    pg_ranks: dict[str, list[int]] = {}
    for name, cfg in (data.get("pg_config") or {}).items():
        if isinstance(cfg, dict):
            pg_names[str(name)] = str(cfg.get("desc") or "")
            pg_ranks[str(name)] = [int(x) for x in re.findall(r"\d+", str(cfg.get("ranks") or ""))]
    for pg_id, status in (data.get("pg_status") or {}).items():
        if not isinstance(status, dict):
            continue
        pst = st.pg(str(pg_id))
        pst.enqueued = _int(status.get("last_enqueued_collective"))
        pst.started = _int(status.get("last_started_collective"))
        pst.completed = _int(status.get("last_completed_collective"))
        pst.source, pst.loc = "flight_recorder", f"{base}:pg_status[{pg_id}]"
    entries = [e for e in (data.get("entries") or []) if isinstance(e, dict) and not e.get("is_p2p")]
    by_pg: dict[str, list[dict]] = {}
    for e in entries:
        by_pg.setdefault(str(e.get("pg_id", "0")), []).append(e)
    for pg_id, es in by_pg.items():
        es.sort(key=lambda e: _int(e.get("collective_seq_id")) or 0)
        pst = st.pg(pg_id)
        last = _entry(es[-1])
        pst.last_entry = last
        if pst.enqueued is None or (last["seq"] is not None and last["seq"] > pst.enqueued):
            pst.enqueued = last["seq"]
        done = [_int(e.get("collective_seq_id")) for e in es if e.get("state") == "completed"]
        if done and (pst.completed is None or max(done) > pst.completed):
            pst.completed = max(done)
        # gloo never marks entries started/completed: trust pg_status's completed counter first
        pending = [e for e in es if e.get("state") in ("scheduled", "started")
                   and (pst.completed is None or (_int(e.get("collective_seq_id")) or 0) > pst.completed)]
        first_pending = _entry(pending[0]) if pending else None
        pst.entry = first_pending or last
        cur = pst.entry.get("seq")
        prev = [e for e in es if _int(e.get("collective_seq_id")) is not None and cur is not None
                and _int(e.get("collective_seq_id")) < cur]
        if prev:
            pst.prev_entry = _entry(prev[-1])
        pg = es[-1].get("process_group")
        if isinstance(pg, (list, tuple)) and len(pg) > 1 and not pst.desc:
            pst.desc = str(pg[1])
        pst.source = "flight_recorder"
        pst.loc = pst.loc or f"{base}:entries"
    for pg_id, pst in st.pgs.items():
        if not pst.desc and pg_id in pg_names:
            pst.desc = pg_names[pg_id] or None
    scan = FileScan(path=path, streams=[st], kinds={"flight_recorder"})
    scan.bytes = os.path.getsize(path)
    if pg_ranks:
        scan.pg_ranks = pg_ranks
    st.events.append(Event("flight_recorder", f"Flight Recorder dump version {data.get('version')}", None,
                           f"{base}:1"))
    return scan
