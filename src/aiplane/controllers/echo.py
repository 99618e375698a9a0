"""A diagnostic controller: copies ``spec.value`` of an Echo to ``status.value``.

It exercises the whole runtime with the least domain logic (tests, the runtime benchmark and its kopf
comparison): observe from the cache, decide purely, write status only when it differs, so a steady
cluster sees zero writes. Its CRD (``echoes.diagnostics.aiplane.io``) is installed by the controller
itself when missing; it is not part of aiplane's API.
"""

from __future__ import annotations

from typing import Any, Final

from aiplane.apimachinery import objects
from aiplane.kube.client import ApiError, KubeClient
from aiplane.kube.controller import Controller, Request, Result
from aiplane.kube.informer import InformerFactory
from aiplane.kube.manager import Manager
from aiplane.kube.rbac import READ, Permission
from aiplane.kube.resources import CRDS, Resource, register
from aiplane.kube.status import StatusWriter

GROUP = "diagnostics.aiplane.io"
ECHOES = register(Resource(GROUP, "v1", "echoes", "Echo", True))
FIELD_MANAGER = "aiplane-echo"

CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"echoes.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"kind": "Echo", "plural": "echoes", "singular": "echo", "listKind": "EchoList"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Value", "type": "string", "jsonPath": ".spec.value"},
                    {"name": "Echoed", "type": "string", "jsonPath": ".status.value"},
                ],
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "properties": {"value": {"type": "string"}}},
                            "status": {
                                "type": "object",
                                "properties": {
                                    "value": {"type": "string"},
                                    "observedGeneration": {"type": "integer"},
                                },
                            },
                        },
                    }
                },
            }
        ],
    },
}


def desired_status(obj: dict[str, Any]) -> dict[str, Any]:
    """The status an Echo should have: pure, so the steady state is obvious."""
    return {
        "value": obj.get("spec", {}).get("value", ""),
        "observedGeneration": obj["metadata"].get("generation", 1),
    }


async def ensure_crd(client: KubeClient) -> None:
    try:
        await client.create(CRDS, CRD)
    except ApiError as exc:
        if not exc.already_exists:
            raise


def new_controller(client: KubeClient, informers: InformerFactory, *, workers: int = 1) -> Controller:
    """Observe the Echo from the cache, decide :func:`desired_status`, write it only when it differs."""
    informer = informers.informer(ECHOES)
    writer = StatusWriter(client, ECHOES, FIELD_MANAGER)

    async def reconcile(request: Request) -> Result | None:
        obj = informer.get(request.key)
        if obj is None or objects.is_deleting(obj):
            return None
        await writer.write(obj, desired_status(obj))
        return None

    return Controller.build("echo").for_(ECHOES).workers(workers).reconcile(reconcile)


#: What this diagnostic controller needs (never part of ``all``, so not in the chart's ClusterRole).
PERMISSIONS: Final = (
    Permission("apiextensions.k8s.io", ("customresourcedefinitions",), ("create",)),
    Permission("diagnostics.aiplane.io", ("echoes",), READ),
    Permission("diagnostics.aiplane.io", ("echoes/status",), ("patch",)),
)


async def setup(manager: Manager) -> None:
    """``aiplane run --controllers echo``: install the CRD if missing, then register the controller."""
    await ensure_crd(manager.client)
    manager.add_controller(new_controller(manager.client, manager.informers))
