"""The probe API that the CLI, the TUI and bots call.

Every probe runs in a child process of its own under a hard deadline (see :mod:`.isolation`);
a probe that hangs, crashes or segfaults is reported as such and everything it started is
killed, Ctrl-C included.
"""
from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..errors import InputError
from .isolation import python_command, run_isolated
from .registry import SPECS, host_probe_names, spec
from .reports import load_report
from .results import REPORT_FORMAT, STATUSES, ProbeResult

__all__ = ["ProbeInfo", "ProbeResult", "list_probes", "run_probes", "apply_results", "load_report",
           "REPORT_FORMAT", "STATUSES", "MAX_DEADLINE_S", "relevant_env", "python_command"]

MAX_DEADLINE_S = 3600.0
_ENV_PREFIXES = ("NCCL_", "TORCH_", "MASTER_", "GLOO_", "FI_", "UCX_", "OMPI_", "SLURM_", "PMIX_", "PMI_",
                 "TORCHELASTIC_", "CUDA_", "NVIDIA_", "KUBERNETES_")
_ENV_NAMES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK",
              "LD_LIBRARY_PATH", "LD_PRELOAD", "HOSTNAME", "container")


@dataclass
class ProbeInfo:
    name: str
    title: str
    facts: list[str]
    needs: list[str]
    deadline: float


def list_probes() -> list[ProbeInfo]:
    """Every probe a user may run, with the facts it can establish."""
    return [ProbeInfo(s.name, s.title, list(s.facts), list(s.needs), s.deadline) for s in SPECS if not s.hidden]


def relevant_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables that matter to distributed communication (others are not sent anywhere)."""
    return {k: v for k, v in env.items() if k.startswith(_ENV_PREFIXES) or k in _ENV_NAMES}


def check_deadline(deadline: object) -> float:
    """``deadline`` as seconds, or :class:`InputError` unless it is a number in (0, 3600]."""
    try:
        seconds = float(deadline)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        seconds = math.nan
    if isinstance(deadline, bool) or not (0 < seconds <= MAX_DEADLINE_S):  # NaN fails this too
        raise InputError(f"a probe deadline is a number of seconds above 0 and at most {MAX_DEADLINE_S:g}; "
                         f"got {deadline!r}")
    return seconds


def run_probes(names: list[str] | None = None, *, deadline: float = 5.0, env: Mapping[str, str] | None = None,
               on_result: Callable[[ProbeResult], None] | None = None) -> list[ProbeResult]:
    """Run probes in parallel, each isolated, and return their results in the order asked.

    ``names`` None runs every host probe. Each probe gets ``max(deadline, its own deadline)``
    seconds (collective probes need more than host probes); ``env`` is the environment to judge
    (default: this process's). An unknown name or a deadline that is not a number of seconds in
    (0, 3600] raises :class:`~nccl_doctor.errors.InputError` before anything runs.
    """
    seconds = check_deadline(deadline)
    chosen = [spec(n) for n in (names if names is not None else host_probe_names())]
    judged = relevant_env(os.environ if env is None else env)
    return run_isolated([(s, max(seconds, s.deadline)) for s in chosen], judged, on_result)


def apply_results(session, results: list[ProbeResult]) -> None:
    """Put every probe fact the KB knows into ``session`` (source "probe", detail = probe name).

    Facts the KB does not define are skipped; a value that does not fit the fact's type is
    skipped too (a probe must never break a diagnosis).
    """
    known = session.doctor.kb.facts
    for result in results:
        for name, value in result.facts.items():
            if name not in known:
                continue
            try:
                session.set_fact(name, value, source="probe", detail=result.name)
            except ValueError:
                continue
