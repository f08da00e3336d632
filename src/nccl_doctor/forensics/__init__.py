"""Hang forensics across ranks: which rank everyone waits for.

    from nccl_doctor.forensics import analyze_paths
    report = analyze_paths(["logs/"])          # per-rank / per-node logs, or Flight Recorder dumps
    report.facts()          # fact -> (value, "file:line") for Session.set_fact
    report.to_dict()        # the "hang" JSON object, or None without hang evidence
    report.summary_lines()  # sentences for the plain output
"""
from __future__ import annotations

from .analyze import HangReport, analyze_paths
from .frdump import DumpProblem, UnsafeDump, load_dump

__all__ = ["analyze_paths", "HangReport", "load_dump", "UnsafeDump", "DumpProblem"]
