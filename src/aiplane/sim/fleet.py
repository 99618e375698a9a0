"""The simulated fleet: Node objects as a real cluster's kubelets and label daemons would register them.

Fleet file format (DESIGN.md)::

    nodePools:
      - name: mi300x            # nodes mi300x-0 … mi300x-11
        count: 12
        gpu: {vendor: amd, product: MI300X, count: 8}
        cpu: "192"
        memory: 2Ti
        labels: {topology.kubernetes.io/zone: zone-a}
      - name: control
        count: 1
        controlPlane: true

AMD nodes carry the labels the AMD GPU operator's node labeller sets, NVIDIA nodes those of GPU feature
discovery, so selectors written for a real cluster select the same nodes here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

KUBELET_VERSION = "v1.37.0"

# Product → (node-labeller product name, device id, VRAM label, partitionable).
AMD_PRODUCTS = {
    "MI300X": ("AMD_Instinct_MI300X_OAM", "74a1", "192G", True),
    "MI325X": ("AMD_Instinct_MI325X_OAM", "74a5", "256G", True),
    "MI308X": ("AMD_Instinct_MI308X_OAM", "74a2", "192G", True),
    "MI250X": ("AMD_Instinct_MI250X_MI250", "740c", "64G", False),
    "MI210": ("AMD_Instinct_MI210", "740f", "64G", False),
}
NVIDIA_PRODUCTS = {
    "H100-SXM": ("NVIDIA-H100-80GB-HBM3", "81559"),
    "H200": ("NVIDIA-H200", "143771"),
    "A100": ("NVIDIA-A100-SXM4-80GB", "81920"),
    "L40S": ("NVIDIA-L40S", "46068"),
}


class GpuSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    vendor: Literal["amd", "nvidia"]
    product: str
    count: int = Field(8, ge=1)


class NodePool(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    name: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    count: int = Field(1, ge=0)
    gpu: GpuSpec | None = None
    cpu: str = "96"
    memory: str = "1Ti"
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[dict[str, Any]] = Field(default_factory=list)
    controlPlane: bool = False


class Fleet(BaseModel):
    model_config = ConfigDict(extra="forbid")
    nodePools: list[NodePool]


DEFAULT_FLEET = Fleet(
    nodePools=[
        NodePool(
            name="mi300x",
            count=4,
            gpu=GpuSpec(vendor="amd", product="MI300X", count=8),
            cpu="192",
            memory="2Ti",
            labels={"aiplane.io/pool": "inference", "topology.kubernetes.io/zone": "zone-a"},
        ),
        NodePool(
            name="mi300x-train",
            count=2,
            gpu=GpuSpec(vendor="amd", product="MI300X", count=8),
            cpu="192",
            memory="2Ti",
            labels={"aiplane.io/pool": "training", "topology.kubernetes.io/zone": "zone-b"},
        ),
        NodePool(
            name="h100",
            count=2,
            gpu=GpuSpec(vendor="nvidia", product="H100-SXM", count=8),
            cpu="224",
            memory="2Ti",
        ),
        NodePool(name="control", count=1, controlPlane=True, cpu="16", memory="64Gi"),
    ]
)


def load_fleet(path: Path) -> Fleet:
    """Read a fleet file; errors name the pool and field."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return Fleet.model_validate(data)


@dataclass
class _Addresses:
    next: int = 1
    used: set[str] = field(default_factory=set)

    def take(self) -> str:
        # Documentation ranges (RFC 5737): addresses in objects only, nothing is ever sent to them.
        index = self.next
        self.next += 1
        block = ("192.0.2", "198.51.100", "203.0.113")[(index // 254) % 3]
        return f"{block}.{index % 254 + 1}"


def node_objects(fleet: Fleet) -> list[dict[str, Any]]:
    """Node objects for every pool, named ``<pool>-<i>``."""
    addresses = _Addresses()
    nodes = []
    for pool in fleet.nodePools:
        for i in range(pool.count):
            nodes.append(_node(pool, f"{pool.name}-{i}", addresses.take()))
    return nodes


def _node(pool: NodePool, name: str, address: str) -> dict[str, Any]:
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "aiplane.io/node-pool": pool.name,
    }
    taints = list(pool.taints)
    capacity: dict[str, str] = {
        "cpu": pool.cpu,
        "memory": pool.memory,
        "pods": "110",
        "ephemeral-storage": "3Ti",
    }
    if pool.controlPlane:
        labels["node-role.kubernetes.io/control-plane"] = ""
        taints.append({"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"})
    gpu = pool.gpu
    if gpu is not None and gpu.vendor == "amd":
        product, device, vram, partitionable = AMD_PRODUCTS.get(
            gpu.product, (gpu.product, "0000", "64G", False)
        )
        labels.update(
            {
                "amd.com/gpu.product-name": product,
                "amd.com/gpu.family": "AI",
                "amd.com/gpu.device-id": device,
                "amd.com/gpu.vram": vram,
                "amd.com/gpu.driver-version": "6.12.12",
                "amd.com/gpu.compute-partitioning-supported": str(partitionable).lower(),
                "amd.com/gpu.memory-partitioning-supported": str(partitionable).lower(),
                f"beta.amd.com/gpu.product-name.{product}": str(gpu.count),
                "beta.amd.com/gpu.family.AI": str(gpu.count),
                "feature.node.kubernetes.io/amd-gpu": "true",
            }
        )
        if partitionable:
            labels["dcm.amd.com/gpu-config-profile"] = "spx"
            labels["dcm.amd.com/gpu-config-profile-state"] = "success"
        capacity["amd.com/gpu"] = str(gpu.count)
    elif gpu is not None:
        product, memory = NVIDIA_PRODUCTS.get(gpu.product, (gpu.product, "81920"))
        labels.update(
            {
                "nvidia.com/gpu.product": product,
                "nvidia.com/gpu.count": str(gpu.count),
                "nvidia.com/gpu.memory": memory,
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.family": "hopper"
                if product.startswith(("NVIDIA-H1", "NVIDIA-H2"))
                else "ampere",
            }
        )
        capacity["nvidia.com/gpu"] = str(gpu.count)
    labels.update(pool.labels)
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"providerID": f"aiplane-sim://{name}"},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [
                _condition(
                    "MemoryPressure",
                    "False",
                    "KubeletHasSufficientMemory",
                    "kubelet has sufficient memory available",
                ),
                _condition(
                    "DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"
                ),
                _condition(
                    "PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"
                ),
                _condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
            "addresses": [{"type": "InternalIP", "address": address}, {"type": "Hostname", "address": name}],
            "nodeInfo": {
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": KUBELET_VERSION,
                "osImage": "Ubuntu 24.04.3 LTS",
                "kernelVersion": "6.8.0-71-generic",
                "containerRuntimeVersion": "containerd://2.1.4",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "machineID": name,
                "systemUUID": name,
                "bootID": name,
            },
        },
    }
    if taints:
        node["spec"]["taints"] = taints
    return node


def _condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
    stamp = "2026-01-01T00:00:00Z"
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastHeartbeatTime": stamp,
        "lastTransitionTime": stamp,
    }
