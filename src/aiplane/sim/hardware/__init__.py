"""The simulated hardware, as a client of any API server: the AMD GPU operator (its device plugin and
Device Config Manager) and the GPU metrics exporter.

On a real cluster these run on the GPU nodes and talk to the API server like any client; nothing else
of the cluster needs to be simulated for GPU partitioning to be exercised end to end: kube-apiserver
(eviction, PodDisruptionBudgets), the scheduler, the DaemonSet controller and a node agent such as
kwok are the real ones. So this package is written against :class:`aiplane.kube.client.KubeClient`
and the runtime's informers only — never the embedded server's store — and one code path serves both:

* the embedded cluster (``EmbeddedCluster``, ``aiplane sim``) starts :class:`Hardware` on an in-memory
  client of its own server;
* ``aiplane hardware --kubeconfig K`` starts it against any cluster (:mod:`.command`).

What it reads: Nodes, every Pod (a GPU is busy while a pod on its node holds it; the exporter reports
each pod's GPUs), and the operator's ``DeviceConfig``, profiles ConfigMap and DaemonSets in
``kube-amd-gpu``. What it writes: node labels (``dcm.amd.com/gpu-config-profile-state``), the GPU
resources of ``status.capacity``/``allocatable`` (a merge patch of ``nodes/status``), Events, and at
start the operator's objects where missing. docs/sim.md ("The simulated hardware") says how it differs
from the real AMD GPU operator.
"""

from __future__ import annotations

from typing import Final

from aiplane.kube.client import KubeClient
from aiplane.kube.informer import Informer, InformerFactory
from aiplane.sim.hardware.amd_operator import AmdGpuOperator
from aiplane.sim.hardware.metrics import GpuMetricsExporter
from aiplane.sim.hardware.views import pod_informer

__all__ = ["AmdGpuOperator", "GpuMetricsExporter", "Hardware"]

#: How long :meth:`Hardware.start` waits for its caches before giving up.
SYNC_TIMEOUT: Final = 60.0


class Hardware:
    """The simulated hardware of one cluster, on ``client``: the AMD GPU operator (``amd``; ``None``
    with ``amd=False``) and the GPU metrics exporter (``metrics``), sharing one informer factory."""

    def __init__(
        self,
        client: KubeClient,
        *,
        amd: bool = True,
        dcm_delay: float = 1.0,
        plugin_refresh_delay: float = 0.0,
        metrics: GpuMetricsExporter | None = None,
    ) -> None:
        self.client = client
        self.informers = InformerFactory(client)
        self.pods: Informer = pod_informer(self.informers)
        self.metrics = metrics if metrics is not None else GpuMetricsExporter()
        self.amd: AmdGpuOperator | None = (
            AmdGpuOperator(
                client, self.informers, dcm_delay=dcm_delay, plugin_refresh_delay=plugin_refresh_delay
            )
            if amd
            else None
        )
        self._started = False

    async def start(self, *, serve_metrics: bool = True, host: str = "127.0.0.1", port: int = 0) -> None:
        """Install the operator's objects (where missing), sync the caches, start the agents and (with
        ``serve_metrics``) the exporter's HTTP endpoint. ``TimeoutError`` if the caches never sync."""
        if self._started:
            return
        self._started = True
        if self.amd is not None:
            await self.amd.install()
        self.informers.start()
        if not await self.informers.wait_for_sync(SYNC_TIMEOUT):
            unsynced = [i.name for i in self.informers.informers if not i.has_synced]
            raise TimeoutError(f"the hardware's caches did not sync: {', '.join(unsynced)}")
        self.metrics.attach(self.pods)
        if self.amd is not None:
            self.amd.start()
        if serve_metrics and self.metrics.url is None:
            await self.metrics.start(host, port)

    async def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        if self.amd is not None:
            await self.amd.stop()
        await self.metrics.stop()
        await self.informers.stop()

    @property
    def idle(self) -> bool:
        """No queued work (timers may still be pending)."""
        return self.amd is None or self.amd.idle
