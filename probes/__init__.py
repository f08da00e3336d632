"""Live checks that turn guesses into facts: host probes, collective probes, the cluster probe.

Importing this package is cheap (no torch); each probe runs isolated in a child process.
The API (see :mod:`nccl_doctor.probes.api`)::

    from nccl_doctor.probes import list_probes, run_probes, apply_results, load_report
    results = run_probes()                 # every host probe, in parallel, each under a deadline
    apply_results(session, results)        # their facts go into a diagnosis session
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["ProbeInfo", "ProbeResult", "list_probes", "run_probes", "apply_results", "load_report"]

if TYPE_CHECKING:  # pragma: no cover
    from .api import ProbeInfo, ProbeResult, apply_results, list_probes, load_report, run_probes


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'nccl_doctor.probes' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
