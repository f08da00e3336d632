"""Probe reports read back from a file (``diagnose --facts REPORT.json``).

Two forms are accepted: a cluster ``REPORT.json`` (or any ``{"facts": {...}}`` object) and a
saved list of results (``{"results": [...]}``, as ``diagnose --probe --json`` writes them). The
file is untrusted input: every field is checked for its type and range, and anything else gives
an :class:`~nccl_doctor.errors.InputError` that names the file and the field, in one line.
"""
from __future__ import annotations

import json
import math
import os
import stat

from ..errors import InputError
from .results import REPORT_FORMAT, STATUSES, ProbeResult

__all__ = ["load_report", "MAX_REPORT_BYTES"]

MAX_REPORT_BYTES = 16 << 20
FactValue = bool | int | float | str


def load_report(path: str) -> list[ProbeResult]:
    """The probe results in ``path``; :class:`InputError` names what is wrong with it."""
    data = _read_json(path)
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object with \"facts\" or \"results\", got {_kind(data)}")
    out: list[ProbeResult] = []
    if "results" in data:
        items = data["results"]
        if not isinstance(items, list):
            raise InputError(f"{path}: \"results\" must be a list, got {_kind(items)}")
        for i, item in enumerate(items):
            where = f"results[{i}]"
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                raise InputError(f"{path}: {where} must be an object with a \"name\" string")
            status = item.get("status", "ok")
            if status not in STATUSES:
                raise InputError(f"{path}: {where} has unknown status {_short(status)}; "
                                 f"expected one of {', '.join(STATUSES)}")
            out.append(ProbeResult(item["name"], status, _facts(item.get("facts", {}), path, f"{where}.facts"),
                                   _sentences(item.get("findings", []), path, f"{where}.findings"),
                                   _seconds(item.get("seconds", 0), path, f"{where}.seconds"),
                                   _text(item.get("detail", ""), path, f"{where}.detail")))
    if "facts" in data:
        name = "cluster" if data.get("format") == REPORT_FORMAT else "report"
        status = data.get("status", "ok")
        if not isinstance(status, str):
            raise InputError(f"{path}: \"status\" must be a string, got {_kind(status)}")
        out.insert(0, ProbeResult(name, status if status in STATUSES else "failed",
                                  _facts(data["facts"], path, "facts"),
                                  _sentences(data.get("findings", []), path, "findings"),
                                  _seconds(data.get("seconds", 0), path, "seconds"),
                                  _text(data.get("detail", ""), path, "detail")))
    if not out:
        raise InputError(f"{path}: no \"facts\" or \"results\" in it; expected a REPORT.json written by "
                         f"`python -m nccl_doctor.probes.cluster` or {{\"facts\": {{\"name\": value}}}}")
    return out


def _read_json(path: str) -> object:
    try:  # non-blocking open: a FIFO or a device must not hang us before we can refuse it
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(f"{path} is not a regular file: not a probe report")
    with os.fdopen(fd, "rb") as handle:
        try:
            raw = handle.read(MAX_REPORT_BYTES + 1)
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_REPORT_BYTES:
        raise InputError(f"{path} is larger than {MAX_REPORT_BYTES >> 20} MB: not a probe report")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path} is not UTF-8 text: not a probe report") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply to be a probe report") from None
    except ValueError as exc:
        raise InputError(f"{path} is not JSON: {exc}") from None


def _facts(raw: object, path: str, where: str) -> dict[str, FactValue]:
    if not isinstance(raw, dict):
        raise InputError(f"{path}: {where} must be an object mapping fact names to values, got {_kind(raw)}")
    facts: dict[str, FactValue] = {}
    for key, value in raw.items():
        if isinstance(value, dict) and "value" in value:  # the --json "facts" form
            value = value["value"]
        if not isinstance(value, (bool, int, float, str)):
            raise InputError(f"{path}: {where}.{_clip(key)} must be true/false, a number or a string, "
                             f"got {_kind(value)}")
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(f"{path}: {where}.{_clip(key)} must be a finite number")
        facts[key] = value
    return facts


def _sentences(raw: object, path: str, where: str) -> list[str]:
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise InputError(f"{path}: {where} must be a list of sentences (strings), got {_kind(raw)}")
    return list(raw)


def _seconds(raw: object, path: str, where: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw) or raw < 0:
        raise InputError(f"{path}: {where} must be a number of seconds (0 or more), got {_short(raw)}")
    return float(raw)


def _text(raw: object, path: str, where: str) -> str:
    if raw is None:
        return ""
    if not isinstance(raw, str):
        raise InputError(f"{path}: {where} must be a string, got {_kind(raw)}")
    return raw


def _kind(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__)


def _short(value: object) -> str:
    return _clip(repr(value))


def _clip(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + "..."
