"""PyTorch Flight Recorder dumps, read as untrusted data.

``TORCH_NCCL_DUMP_ON_TIMEOUT=1`` (with ``TORCH_FR_BUFFER_SIZE`` / ``TORCH_NCCL_TRACE_BUFFER_SIZE``)
makes each rank write ``<TORCH_FR_DUMP_TEMP_FILE><rank>``: a pickle of plain dicts, lists, tuples,
strings and numbers (``version``, ``pg_config``, ``pg_status``, ``entries``), or the same content as
JSON. A pickle from someone else's cluster could run code if loaded with ``pickle.load``: this
module reads it with :func:`~nccl_doctor.forensics.plainpickle.load_plain`, which builds plain data
only and stops at limits of depth, values, size and time. What is taken from a dump is read by
shape (a field of the wrong type is ignored, a string is cut short, entries and frames are
counted), so no dump can make the analysis or its JSON grow with tricks of sharing or nesting.
"""
from __future__ import annotations

import json
import math
import os
import re

from ..errors import DumpProblem, UnsafeDump
from .evidence import Event, FileScan, Stream, names_from_path
from .plainpickle import MAX_ITEMS, load_plain

__all__ = ["UnsafeDump", "DumpProblem", "looks_like_dump", "load_dump", "parse_dump", "scan_dump", "MAX_DUMP_BYTES"]

MAX_DUMP_BYTES = 64 << 20
MAX_JSON_BYTES = 16 << 20  # JSON costs more memory per byte than a pickle, and has no sharing
MAX_ENTRIES = 100_000
MAX_FRAMES = 12
MAX_TEXT = 300
MAX_GROUPS = 4096


def looks_like_dump(head: bytes) -> str | None:
    """'pickle' or 'json' when the first bytes of a file look like a Flight Recorder dump."""
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return "pickle"
    stripped = head.lstrip()
    if stripped.startswith(b"{") and (b'"pg_status"' in head or b'"entries"' in head or b'"pg_config"' in head):
        return "json"
    return None


def parse_dump(raw: bytes, name: str) -> dict:
    """The dump's plain data. Raises :class:`UnsafeDump` or :class:`DumpProblem` naming the file."""
    kind = looks_like_dump(raw[:65536])
    try:
        if kind == "pickle":
            data = load_plain(raw)
        elif kind == "json":
            if len(raw) > MAX_JSON_BYTES:
                raise DumpProblem(f"a JSON dump of {len(raw)} bytes is over the {MAX_JSON_BYTES >> 20} MB limit")
            data = _load_json(raw)
        else:
            raise DumpProblem("not a Flight Recorder dump (neither pickle nor JSON)")
    except UnsafeDump as exc:
        raise UnsafeDump(f"{name}: {exc}") from None
    except DumpProblem as exc:
        raise DumpProblem(f"{name}: unreadable Flight Recorder dump: {exc}") from None
    if not isinstance(data, dict) or not ("entries" in data or "pg_status" in data):
        raise DumpProblem(f"{name}: not a Flight Recorder dump (no entries / pg_status)")
    return data


def _load_json(raw: bytes) -> object:
    count = [0]

    def counted(value):
        count[0] += 1
        if count[0] > MAX_ITEMS:
            raise DumpProblem(f"more than {MAX_ITEMS:,} values")
        return value

    def number(text: str):
        return counted(float(text) if any(c in text for c in ".eE") else int(text))

    try:
        return json.loads(raw.decode("utf-8", "replace"), object_pairs_hook=lambda pairs: counted(dict(pairs)),
                          parse_int=number, parse_float=number, parse_constant=lambda _c: counted(None))
    except RecursionError:
        raise DumpProblem("nested too deep") from None
    except ValueError as exc:
        raise DumpProblem(f"malformed JSON: {str(exc)[:120]}") from None


def load_dump(path: str) -> dict:
    """The dump in a file as plain data. Raises :class:`UnsafeDump` or :class:`DumpProblem`."""
    try:
        size = os.path.getsize(path)
        if size > MAX_DUMP_BYTES:
            raise DumpProblem(f"{path}: {size} bytes is larger than any Flight Recorder dump "
                              f"({MAX_DUMP_BYTES >> 20} MB limit)")
        with open(path, "rb") as handle:
            raw = handle.read(MAX_DUMP_BYTES + 1)
    except OSError as exc:
        raise DumpProblem(f"{path}: cannot open: {exc.strerror or exc}") from None
    return parse_dump(raw, path)


# -------------------------------------------------------------------- reading a dump by shape
def _int(v) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v if abs(v) < 1 << 63 else None
    if isinstance(v, float):
        return int(v) if math.isfinite(v) and abs(v) < 2.0 ** 63 else None
    if isinstance(v, str) and len(v) < 24:
        try:
            return int(v)
        except ValueError:
            return None
    return None


def _text(v, limit: int = MAX_TEXT) -> str | None:
    return v[:limit] if isinstance(v, str) else None


def _sizes(v) -> list | None:
    """Tensor sizes: a short list of short lists of ints, or nothing."""
    if not isinstance(v, (list, tuple)) or len(v) > 16:
        return None
    out = []
    for dims in v:
        if not isinstance(dims, (list, tuple)) or len(dims) > 12:
            return None
        ints = [_int(d) for d in dims]
        if any(d is None for d in ints):
            return None
        out.append(ints)
    return out


def _dtypes(v) -> list[str] | None:
    if not isinstance(v, (list, tuple)) or len(v) > 16:
        return None
    out = [_text(d, 32) for d in v]
    return None if any(d is None for d in out) else out


def _op_name(profiling_name: str | None) -> str | None:
    if not profiling_name:
        return None
    return profiling_name.split(":", 1)[-1].upper()[:64]  # "nccl:all_reduce" -> "ALL_REDUCE"


def _entry(e: dict) -> dict:
    frames = e.get("frames")
    stack = []
    if isinstance(frames, (list, tuple)):
        for fr in frames[:MAX_FRAMES]:
            name, filename = (_text(fr.get("name"), 120), _text(fr.get("filename"), 200)) if isinstance(fr, dict) else (None, None)
            if name is not None and filename is not None:
                stack.append(f"{name} at {filename}:{_int(fr.get('line'))}")
    profiling = _text(e.get("profiling_name"), 120)
    return {
        "seq": _int(e.get("collective_seq_id")),
        "op": _op_name(profiling),
        "profiling_name": profiling,
        "input_sizes": _sizes(e.get("input_sizes")),
        "output_sizes": _sizes(e.get("output_sizes")),
        "input_dtypes": _dtypes(e.get("input_dtypes")),
        "output_dtypes": _dtypes(e.get("output_dtypes")),
        "state": _text(e.get("state"), 32),
        "time_created_ns": _int(e.get("time_created_ns")),
        "stack": stack,
    }


def _ranks_of(value) -> list[int]:
    """Member ranks from pg_config's ``ranks``: a list of ints or its string form."""
    if isinstance(value, str):
        return [int(x) for x in re.findall(r"\d+", value[:65536])[:MAX_GROUPS] if len(x) < 8]
    if isinstance(value, (list, tuple)):
        return [r for r in (_int(x) for x in value[:MAX_GROUPS]) if r is not None and 0 <= r < 1 << 20]
    return []


def scan_dump(data: dict, path: str) -> FileScan:
    """One rank's dump as a :class:`FileScan` with one stream (rank from the file name suffix)."""
    rank, _local, host = names_from_path(path, dump=True)
    st = Stream(key=f"r{rank}" if rank is not None else "dump", file=path, rank=rank, host=host, is_dump=True)
    base = os.path.basename(path)
    pg_names: dict[str, str] = {}
    pg_ranks: dict[str, list[int]] = {}
    config = data.get("pg_config")
    for name, cfg in list(config.items())[:MAX_GROUPS] if isinstance(config, dict) else ():
        if isinstance(cfg, dict):
            pg_names[str(name)[:64]] = _text(cfg.get("desc"), 120) or ""
            pg_ranks[str(name)[:64]] = _ranks_of(cfg.get("ranks"))
    status = data.get("pg_status")
    for pg_id, row in list(status.items())[:MAX_GROUPS] if isinstance(status, dict) else ():
        if not isinstance(row, dict):
            continue
        pst = st.pg(str(pg_id)[:64])
        pst.enqueued = _int(row.get("last_enqueued_collective"))
        pst.started = _int(row.get("last_started_collective"))
        pst.completed = _int(row.get("last_completed_collective"))
        pst.source, pst.loc = "flight_recorder", f"{base}:pg_status[{str(pg_id)[:64]}]"
    entries = data.get("entries")
    if not isinstance(entries, (list, tuple)):
        entries = []
    by_pg: dict[str, list[dict]] = {}
    for e in entries[-MAX_ENTRIES:]:
        if isinstance(e, dict) and e.get("is_p2p") is not True and len(by_pg) < MAX_GROUPS:
            pg = e.get("pg_id", "0")
            by_pg.setdefault(str(pg)[:64] if isinstance(pg, (str, int)) else "0", []).append(e)
    for pg_id, es in by_pg.items():
        es.sort(key=lambda e: _int(e.get("collective_seq_id")) or 0)
        pst = st.pg(pg_id)
        last = _entry(es[-1])
        pst.last_entry = last
        if pst.enqueued is None or (last["seq"] is not None and last["seq"] > pst.enqueued):
            pst.enqueued = last["seq"]
        done = [s for s in (_int(e.get("collective_seq_id")) for e in es if e.get("state") == "completed") if s is not None]
        if done and (pst.completed is None or max(done) > pst.completed):
            pst.completed = max(done)
        # gloo never marks entries started/completed: trust pg_status's completed counter first
        pending = [e for e in es if e.get("state") in ("scheduled", "started")
                   and (pst.completed is None or (_int(e.get("collective_seq_id")) or 0) > pst.completed)]
        pst.entry = _entry(pending[0]) if pending else last
        cur = pst.entry.get("seq")
        prev = [e for e in es if cur is not None and (_int(e.get("collective_seq_id")) is not None)
                and _int(e.get("collective_seq_id")) < cur]
        if prev:
            pst.prev_entry = _entry(prev[-1])
        group = es[-1].get("process_group")
        if isinstance(group, (list, tuple)) and len(group) > 1 and not pst.desc:
            pst.desc = _text(group[1], 120)
        pst.source = "flight_recorder"
        pst.loc = pst.loc or f"{base}:entries"
    for pg_id, pst in st.pgs.items():
        if not pst.desc and pg_id in pg_names:
            pst.desc = pg_names[pg_id] or None
    scan = FileScan(path=path, streams=[st], kinds={"flight_recorder"})
    if pg_ranks:
        scan.pg_ranks = pg_ranks
    version = _text(data.get("version"), 32)
    st.events.append(Event("flight_recorder", f"Flight Recorder dump version {version}", None, f"{base}:1"))
    return scan
