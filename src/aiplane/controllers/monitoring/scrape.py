"""Reading GPU utilisation samples out of a Prometheus text exposition (``prometheus-client``'s parser).

Two exporters are understood: AMD's device-metrics-exporter (``gpu_gfx_activity``, labels
``namespace``, ``pod``, ``container``, ``gpu_id``, ``gpu_partition_id``) and NVIDIA DCGM's exporter
(``DCGM_FI_DEV_GPU_UTIL``, labels ``namespace``, ``pod``, ``container``, ``gpu``). Both report
percent busy. A sample without a pod (a GPU no pod holds) cannot be attributed and is dropped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["AMD_METRIC", "NVIDIA_METRIC", "GpuSample", "parse_samples"]

AMD_METRIC: Final = "gpu_gfx_activity"
NVIDIA_METRIC: Final = "DCGM_FI_DEV_GPU_UTIL"
_METRICS: Final = frozenset({AMD_METRIC, NVIDIA_METRIC})


@dataclass(frozen=True, order=True)
class GpuSample:
    """One GPU (or partition) a pod holds, and how busy it is (percent)."""

    namespace: str
    pod: str
    gpu: str
    value: float
    container: str = ""
    metric: str = AMD_METRIC


def _gpu_label(metric: str, labels: dict[str, str]) -> str:
    if metric == NVIDIA_METRIC:
        return labels.get("gpu", "")
    gpu = labels.get("gpu_id", "")
    partition = labels.get("gpu_partition_id", "")
    return f"{gpu}/{partition}" if partition else gpu


def parse_samples(text: str) -> list[GpuSample]:
    """The attributable utilisation samples of ``text``; raises ``ValueError`` on a malformed exposition."""
    samples: list[GpuSample] = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name not in _METRICS:
                continue
            labels = dict(sample.labels)
            pod, namespace = labels.get("pod", ""), labels.get("namespace", "")
            if not pod or not namespace or math.isnan(sample.value):
                continue
            samples.append(
                GpuSample(
                    namespace=namespace,
                    pod=pod,
                    gpu=_gpu_label(sample.name, labels),
                    value=float(sample.value),
                    container=labels.get("container", ""),
                    metric=sample.name,
                )
            )
    return samples
