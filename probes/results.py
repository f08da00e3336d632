"""What a probe run produces: one :class:`ProbeResult` per probe."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["ProbeResult", "STATUSES", "REPORT_FORMAT"]

STATUSES = ("ok", "failed", "timeout", "crashed", "skipped")
REPORT_FORMAT = "nccl-doctor-probe-report"


@dataclass
class ProbeResult:
    name: str
    status: str  # "ok" | "failed" | "timeout" | "crashed" | "skipped"
    facts: dict[str, bool | int | float | str] = field(default_factory=dict)
    findings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    detail: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["seconds"] = round(self.seconds, 3)
        return out
