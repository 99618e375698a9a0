"""A simulated GPU metrics exporter: Prometheus text over plain HTTP, per-pod utilisation set by tests.

It stands in for AMD's device-metrics-exporter (``gpu_gfx_activity``) and NVIDIA's DCGM exporter
(``DCGM_FI_DEV_GPU_UTIL``) with their Kubernetes pod labels: every Running pod bound to a node gets
one sample per GPU its containers request (``amd.com/*`` resources: AMD; ``nvidia.com/gpu``: NVIDIA).
Utilisation is whatever a test set for the pod, else for its namespace, else the default (50 %).
Differences from the real exporters (docs/sim.md): one exporter for the whole cluster instead of a
DaemonSet pod per node, GPUs numbered per pod rather than by the device the kubelet assigned, and no
samples for GPUs no pod holds.

It is an API client like the rest of the simulated hardware (:mod:`aiplane.sim.hardware`): the pods
come from the hardware's pod informer, so the same exporter serves the embedded cluster and, with
``aiplane hardware``, any cluster. Set the utilisation from Python (``cluster.gpu_metrics.set(...)``),
on the exporter's own port at ``/utilization`` or, on the embedded cluster, through the API server at
``/_sim/gpu-utilization`` (GET shows, POST ``{"namespace", "pod"?, "utilization"}`` or ``{"default"}``
sets, DELETE resets).
"""

from __future__ import annotations

import json
import socket
from typing import Any, Final

from aiohttp import web

from aiplane.apimachinery import objects
from aiplane.apimachinery.quantity import Quantity
from aiplane.kube.informer import Informer

__all__ = ["DEFAULT_UTILIZATION", "GpuMetricsExporter", "apply_settings"]

DEFAULT_UTILIZATION: Final = 50.0
_AMD: Final = "gpu_gfx_activity"
_NVIDIA: Final = "DCGM_FI_DEV_GPU_UTIL"
_CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"


def _label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _gpus(container: dict[str, Any]) -> tuple[str, int]:
    """The exporter family and number of GPUs (or partitions) ``container`` holds."""
    resources = container.get("resources") or {}
    asked = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
    for name, quantity in asked.items():
        if name.startswith("amd.com/") or name == "nvidia.com/gpu":
            try:
                count = Quantity(str(quantity)).value()
            except ValueError:
                continue
            if count > 0:
                return (_NVIDIA if name.startswith("nvidia.com/") else _AMD), count
    return "", 0


class GpuMetricsExporter:
    """Reads the pods from ``pods`` (an informer, :meth:`attach`) on every scrape; serves ``/metrics``
    (and ``/utilization``) once started."""

    def __init__(self, pods: Informer | None = None, default: float = DEFAULT_UTILIZATION) -> None:
        self.pods = pods
        self.default = default
        self.by_namespace: dict[str, float] = {}
        self.by_pod: dict[tuple[str, str], float] = {}
        self.scrapes = 0
        self.url: str | None = None
        self._runner: web.AppRunner | None = None

    def attach(self, pods: Informer | None) -> None:
        """Read the pods from ``pods`` from now on (``None``: no pods)."""
        self.pods = pods

    # --- settings --------------------------------------------------------------------------------

    def set(self, namespace: str, pod: str | None, utilization: float) -> None:
        """Utilisation (percent) of ``pod``'s GPUs, or of every pod of ``namespace`` when ``pod`` is None."""
        if not 0 <= utilization <= 100:
            raise ValueError(f"utilization must be within 0..100, got {utilization}")
        if pod is None:
            self.by_namespace[namespace] = utilization
        else:
            self.by_pod[(namespace, pod)] = utilization

    def reset(self) -> None:
        self.by_namespace.clear()
        self.by_pod.clear()
        self.default = DEFAULT_UTILIZATION

    def utilization(self, namespace: str, pod: str) -> float:
        found = self.by_pod.get((namespace, pod))
        if found is not None:
            return found
        return self.by_namespace.get(namespace, self.default)

    def settings(self) -> dict[str, Any]:
        return {
            "default": self.default,
            "namespaces": dict(sorted(self.by_namespace.items())),
            "pods": {f"{ns}/{name}": v for (ns, name), v in sorted(self.by_pod.items())},
        }

    # --- exposition ------------------------------------------------------------------------------

    def render(self) -> str:
        """The exposition text, as the exporters format it (HELP/TYPE, then one line per GPU)."""
        lines: dict[str, list[str]] = {_AMD: [], _NVIDIA: []}
        for pod in sorted(self.pods.list() if self.pods is not None else [], key=objects.key):
            spec, status = objects.spec(pod), objects.status(pod)
            node = str(spec.get("nodeName") or "")
            if not node or status.get("phase") != "Running":
                continue
            namespace, name = objects.namespace(pod), objects.name(pod)
            value = self.utilization(namespace, name)
            for container in spec.get("containers") or []:
                family, count = _gpus(container)
                for gpu in range(count):
                    labels = {
                        "namespace": namespace,
                        "pod": name,
                        "container": str(container.get("name") or ""),
                        "hostname": node,
                        # The exporters' own GPU labels (AMD's mandatory ones include the partition).
                        **(
                            {"gpu": str(gpu)}
                            if family == _NVIDIA
                            else {"gpu_id": str(gpu), "gpu_partition_id": "0"}
                        ),
                    }
                    text = ",".join(f'{k}="{_label_value(v)}"' for k, v in labels.items())
                    lines[family].append(f"{family}{{{text}}} {value:g}")
        out = [
            f"# HELP {_AMD} GPU GFX activity (percent)",
            f"# TYPE {_AMD} gauge",
            *lines[_AMD],
            f"# HELP {_NVIDIA} GPU utilization (in %).",
            f"# TYPE {_NVIDIA} gauge",
            *lines[_NVIDIA],
        ]
        return "\n".join(out) + "\n"

    async def _metrics(self, request: web.Request) -> web.Response:
        self.scrapes += 1
        return web.Response(body=self.render().encode(), headers={"Content-Type": _CONTENT_TYPE})

    async def _utilization(self, request: web.Request) -> web.Response:
        if request.method == "DELETE":
            self.reset()
        elif request.method == "POST":
            try:
                apply_settings(self, json.loads(await request.read() or b"{}"))
            except (ValueError, KeyError, TypeError) as exc:
                return web.json_response({"message": f"/utilization: {exc}"}, status=400)
        return web.json_response(self.settings())

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve ``/metrics`` (plain HTTP, no auth, as the exporters do) and ``/utilization`` (the
        settings, as ``/_sim/gpu-utilization``); the URL to scrape."""
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_route("*", "/utilization", self._utilization)
        runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        await web.SockSite(runner, sock).start()
        self._runner = runner
        self.url = f"http://{host}:{sock.getsockname()[1]}/metrics"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


def apply_settings(exporter: GpuMetricsExporter, body: Any) -> None:
    """POST ``{"namespace", "pod"?, "utilization"}`` or ``{"default"}``: ``ValueError`` (or
    ``KeyError``/``TypeError``) says what is wrong with the body."""
    if not isinstance(body, dict):
        raise ValueError("the body must be a JSON object")
    if "default" in body:
        value = float(body["default"])
        if not 0 <= value <= 100:
            raise ValueError(f"default must be within 0..100, got {value}")
        exporter.default = value
        return
    namespace = body.get("namespace")
    if not isinstance(namespace, str) or not namespace:
        raise ValueError("namespace is required (with utilization, and optionally pod)")
    pod = body.get("pod")
    exporter.set(namespace, str(pod) if pod else None, float(body["utilization"]))
