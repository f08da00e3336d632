"""The JSON of a diagnosis, assembled in one place: the CLI's ``--json`` and every JSON export.

Kept apart from :mod:`.report` so that ``diagnose --json`` imports neither the report views nor,
unless asked to redact, the redaction patterns.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["report_data"]


def report_data(session: Any, *, hang: Mapping[str, Any] | None = None,
                probes: Iterable[Mapping[str, Any]] | None = None, redact: bool = False,
                ingest: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """:meth:`Session.report` with the hang analysis, probe results and what reading the logs
    read and skipped (``ingest``) when there are any, optionally redacted (then ``"redacted": true``)."""
    data: dict[str, Any] = session.report()
    if hang is not None:
        data["hang"] = dict(hang)
    if probes:
        data["probes"] = list(probes)
    if ingest is not None:
        data["ingest"] = dict(ingest)
    if redact:
        from .redaction import session_redactor

        data = session_redactor(session, data.get("hang"), data.get("probes")).data(data)
        data["redacted"] = True
    return data
