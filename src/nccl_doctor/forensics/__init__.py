"""Hang forensics across ranks: which rank everyone waits for.

Logs reach the forensics through :mod:`nccl_doctor.ingest`, which reads each file once for the KB's
signatures and the forensics together; :func:`analyze_paths` is the forensics alone:

    from nccl_doctor.forensics import analyze_paths
    report = analyze_paths(["logs/"])          # per-rank / per-node logs, or Flight Recorder dumps
    report.facts()          # fact -> (value, "file:line") for Session.set_fact
    report.to_dict()        # the "hang" JSON object, or None without hang evidence
    report.summary_lines()  # sentences for the plain output
"""
from __future__ import annotations

from ..errors import DumpProblem, UnsafeDump
from .analyze import HangReport, analyze
from .frdump import load_dump

__all__ = ["analyze_paths", "analyze", "HangReport", "load_dump", "UnsafeDump", "DumpProblem"]


def analyze_paths(paths: list[str], *, jobs: int | None = None) -> HangReport:
    """The hang analysis of log files, folders, globs and Flight Recorder dumps (no session).

    Files that cannot be read are listed in the report's ``problems``."""
    from ..ingest import forensics_of_paths

    return forensics_of_paths([str(p) for p in paths], jobs=jobs)
