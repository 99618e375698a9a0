"""A real Kubernetes control plane (built from its Go modules) on 127.0.0.1, with kwok's fake nodes for
the fleet: the hardware is the only simulated part. See docs/real-cluster.md."""

from aiplane.realcluster.launcher import (
    ClusterError,
    RealCluster,
    real_cluster,
    running_pids,
    start_real_cluster,
    stop_cluster,
)

__all__ = [
    "ClusterError",
    "RealCluster",
    "real_cluster",
    "running_pids",
    "start_real_cluster",
    "stop_cluster",
]
