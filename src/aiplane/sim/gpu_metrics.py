"""``/_sim/gpu-utilization`` on the embedded API server: the simulated GPU metrics exporter's settings.

The exporter itself is simulated hardware, an API client (:mod:`aiplane.sim.hardware.metrics`); this is
only the embedded server's door to its settings, so ``aiplane sim`` users set utilisation through the
one URL they know.
"""

from __future__ import annotations

import json

from aiplane.sim.apiserver import errors
from aiplane.sim.apiserver.messages import ApiRequest, ApiResponse, json_response
from aiplane.sim.hardware.metrics import GpuMetricsExporter, apply_settings

__all__ = ["UtilizationEndpoint", "handle_http"]


def handle_http(exporter: GpuMetricsExporter, request: ApiRequest) -> ApiResponse:
    """``/_sim/gpu-utilization``: show (GET), set (POST) or reset (DELETE) the simulated utilisation."""
    if request.method == "GET":
        return json_response(exporter.settings())
    if request.method == "DELETE":
        exporter.reset()
        return json_response(exporter.settings())
    if request.method != "POST":
        raise errors.method_not_allowed()
    try:
        apply_settings(exporter, json.loads(request.body or b"{}"))
    except (ValueError, KeyError, TypeError) as exc:
        raise errors.bad_request(f"/_sim/gpu-utilization: {exc}") from None
    return json_response(exporter.settings())


class UtilizationEndpoint:
    """What ``ApiServer.gpu_metrics`` holds: ``/_sim/gpu-utilization`` answered for ``exporter``."""

    def __init__(self, exporter: GpuMetricsExporter) -> None:
        self.exporter = exporter

    def handle_http(self, request: ApiRequest) -> ApiResponse:
        return handle_http(self.exporter, request)
