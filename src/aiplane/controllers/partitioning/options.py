"""What an operator chooses about GPU partitioning, owned here rather than by the manager.

Each field declares its ``aiplane run`` flag (``--dcm-config``, ``--drain-timeout``,
``--operator-timeout``, ``--verify-timeout``): the command line is generated from these fields and
builds a :class:`PartitioningOptions` from what it parsed, for the manager; the partitioning
controllers read it with ``manager.options(PartitioningOptions)``, getting these defaults when nobody
set any.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from aiplane.kube.flags import flag

__all__ = ["DEFAULT_DCM_CONFIG", "PartitioningOptions"]

#: The AMD GPU operator's Device Config Manager ConfigMap, as its Helm chart names it.
DEFAULT_DCM_CONFIG: Final = "kube-amd-gpu/config-manager-config"


@dataclass(frozen=True)
class PartitioningOptions:
    """``NAMESPACE/NAME`` of DCM's ConfigMap, and the NodePartitioning timeouts in seconds."""

    dcm_config: str = flag(
        DEFAULT_DCM_CONFIG,
        "--dcm-config",
        "NAMESPACE/NAME of the AMD GPU operator's Device Config Manager ConfigMap.",
        metavar="NAMESPACE/NAME",
    )
    #: How long evictions may take before the node fails (PodDisruptionBudgets can hold them).
    drain_timeout: float = flag(
        1200.0,
        "--drain-timeout",
        "Seconds a node drain may take before its NodePartitioning fails (DrainTimeout).",
        metavar="SECONDS",
        min=1,
    )
    #: DCM's retry window: how long the operator may take to apply the profile.
    operator_timeout: float = flag(
        1800.0,
        "--operator-timeout",
        "Seconds to wait for the GPU operator's DCM (OperatorUnavailable).",
        metavar="SECONDS",
        min=1,
    )
    #: How long the device plugin may take to publish the new allocatable.
    verify_timeout: float = flag(
        300.0,
        "--verify-timeout",
        "Seconds for allocatable to show the expected partitions (VerifyFailed).",
        metavar="SECONDS",
        min=1,
    )

    def __post_init__(self) -> None:
        namespace, slash, name = self.dcm_config.partition("/")
        if not (namespace and slash and name):
            raise ValueError(f"--dcm-config {self.dcm_config!r}: expected NAMESPACE/NAME")
        for option, value in (
            ("--drain-timeout", self.drain_timeout),
            ("--operator-timeout", self.operator_timeout),
            ("--verify-timeout", self.verify_timeout),
        ):
            if value <= 0:
                raise ValueError(f"{option} must be positive, got {value}")

    def timeouts(self) -> tuple[timedelta, timedelta, timedelta]:
        """Drain, operator and verify timeouts as durations."""
        return (
            timedelta(seconds=self.drain_timeout),
            timedelta(seconds=self.operator_timeout),
            timedelta(seconds=self.verify_timeout),
        )
