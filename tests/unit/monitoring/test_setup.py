"""How the monitor is switched on: ``aiplane run`` (the environment) and ``aiplane sim`` (the simulated
exporter by default)."""

from __future__ import annotations

import pytest

from aiplane.controllers.monitoring import monitor
from aiplane.controllers.monitoring.options import MonitoringOptions
from aiplane.controllers.registry import CONTROLLERS, select
from aiplane.kube.manager import Manager
from aiplane.sim.client import InMemoryKubeClient
from aiplane.sim.cluster import EmbeddedCluster
from aiplane.simrun import sim_monitoring


def test_it_is_part_of_all() -> None:
    assert "resourcemonitor" in CONTROLLERS and "resourcemonitor" in select("all")


def test_disabled_it_registers_nothing() -> None:
    manager = Manager(InMemoryKubeClient(), handle_signals=False)
    monitor.setup(manager)
    assert manager.controllers == []


def test_enabled_it_runs_only_while_leading() -> None:
    manager = Manager(InMemoryKubeClient(), handle_signals=False)
    manager.set_options(MonitoringOptions(enabled=True, endpoint="http://exporter:5000/metrics", interval=10))
    monitor.setup(manager)
    assert [r.name for r in manager.controllers] == ["resourcemonitor"]


def test_aiplane_sim_points_the_monitor_at_its_exporter() -> None:
    cluster = EmbeddedCluster()
    cluster.gpu_metrics.url = "http://127.0.0.1:9/metrics"
    assert not sim_monitoring(cluster, {}).enabled
    on = sim_monitoring(cluster, {"RESOURCE_MONITORING_ENABLED": "true"})
    assert on.enabled and on.endpoint == "http://127.0.0.1:9/metrics" and on.interval == 30
    other = sim_monitoring(
        cluster,
        {
            "RESOURCE_MONITORING_ENABLED": "true",
            "RESOURCE_MONITORING_METRICS_ENDPOINT": "http://elsewhere/metrics",
            "RESOURCE_MONITORING_POLLING_INTERVAL": "5s",
        },
    )
    assert other.endpoint == "http://elsewhere/metrics" and other.interval == 5
    with pytest.raises(ValueError, match="RESOURCE_MONITORING_POLLING_INTERVAL"):
        sim_monitoring(
            cluster, {"RESOURCE_MONITORING_ENABLED": "true", "RESOURCE_MONITORING_POLLING_INTERVAL": "x"}
        )
