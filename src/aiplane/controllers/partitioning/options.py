"""What an operator chooses about GPU partitioning, owned here rather than by the manager.

``aiplane run`` builds a :class:`PartitioningOptions` from its flags (``--dcm-config``,
``--drain-timeout``, ``--operator-timeout``, ``--verify-timeout``) and hands it to the manager;
the partitioning controllers read it with ``manager.options(PartitioningOptions)``, getting these
defaults when nobody set any.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Final

__all__ = ["DEFAULT_DCM_CONFIG", "PartitioningOptions"]

#: The AMD GPU operator's Device Config Manager ConfigMap, as its Helm chart names it.
DEFAULT_DCM_CONFIG: Final = "kube-amd-gpu/config-manager-config"


@dataclass(frozen=True)
class PartitioningOptions:
    """``NAMESPACE/NAME`` of DCM's ConfigMap, and the NodePartitioning timeouts in seconds."""

    dcm_config: str = DEFAULT_DCM_CONFIG
    #: How long evictions may take before the node fails (PodDisruptionBudgets can hold them).
    drain_timeout: float = 1200.0
    #: DCM's retry window: how long the operator may take to apply the profile.
    operator_timeout: float = 1800.0
    #: How long the device plugin may take to publish the new allocatable.
    verify_timeout: float = 300.0

    def __post_init__(self) -> None:
        namespace, slash, name = self.dcm_config.partition("/")
        if not (namespace and slash and name):
            raise ValueError(f"--dcm-config {self.dcm_config!r}: expected NAMESPACE/NAME")
        for flag, value in (
            ("--drain-timeout", self.drain_timeout),
            ("--operator-timeout", self.operator_timeout),
            ("--verify-timeout", self.verify_timeout),
        ):
            if value <= 0:
                raise ValueError(f"{flag} must be positive, got {value}")

    def timeouts(self) -> tuple[timedelta, timedelta, timedelta]:
        """Drain, operator and verify timeouts as durations."""
        return (
            timedelta(seconds=self.drain_timeout),
            timedelta(seconds=self.operator_timeout),
            timedelta(seconds=self.verify_timeout),
        )
