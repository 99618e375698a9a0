"""The monitor's process options, from the environment as upstream documents them.

``RESOURCE_MONITORING_ENABLED``, ``RESOURCE_MONITORING_METRICS_ENDPOINT`` and
``RESOURCE_MONITORING_POLLING_INTERVAL`` are read once at start (upstream: they cannot change without
restarting the operator); the thresholds live in the KaiwoConfig and apply live.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

__all__ = [
    "ENV_ENABLED",
    "ENV_ENDPOINT",
    "ENV_INTERVAL",
    "MonitoringOptions",
    "parse_duration",
]

ENV_ENABLED: Final = "RESOURCE_MONITORING_ENABLED"
ENV_ENDPOINT: Final = "RESOURCE_MONITORING_METRICS_ENDPOINT"
ENV_INTERVAL: Final = "RESOURCE_MONITORING_POLLING_INTERVAL"

_UNITS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART: Final = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


def parse_duration(text: str, what: str) -> float:
    """Seconds in a Go duration (``30s``, ``1m30s``, ``24h``) or a bare number of seconds.

    ``what`` names the setting in the error, so a typo points at the variable or field to fix.
    """
    value = text.strip()
    try:
        return float(value)
    except ValueError:
        pass
    pos, total = 0, 0.0
    while pos < len(value):
        match = _PART.match(value, pos)
        if match is None:
            raise ValueError(f"{what}: {text!r} is not a duration (e.g. 30s, 5m, 1h30m)")
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if not value:
        raise ValueError(f"{what}: a duration is required (e.g. 30s)")
    return total


@dataclass(frozen=True)
class MonitoringOptions:
    """Whether the monitor runs, what it scrapes and how often (seconds)."""

    enabled: bool = False
    endpoint: str = ""
    interval: float = 30.0
    #: Upstream's scrape timeout.
    timeout: float = 5.0

    def __post_init__(self) -> None:
        if self.enabled and not self.endpoint:
            raise ValueError(f"{ENV_ENDPOINT} is required when {ENV_ENABLED}=true")
        if self.interval <= 0:
            raise ValueError(f"{ENV_INTERVAL} must be positive")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> MonitoringOptions:
        """The options ``aiplane run`` uses; off unless ``RESOURCE_MONITORING_ENABLED=true``.

        Upstream requires the interval; so do we when monitoring is on (a clear error naming the
        variable beats a silent default).
        """
        source = os.environ if env is None else env
        enabled = source.get(ENV_ENABLED, "").strip().lower() == "true"
        if not enabled:
            return cls()
        interval_text = source.get(ENV_INTERVAL, "")
        if not interval_text.strip():
            raise ValueError(f"{ENV_INTERVAL} is required when {ENV_ENABLED}=true (e.g. 30s)")
        return cls(
            enabled=True,
            endpoint=source.get(ENV_ENDPOINT, "").strip(),
            interval=parse_duration(interval_text, ENV_INTERVAL),
        )
