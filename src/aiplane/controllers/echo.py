"""A diagnostic controller: copies ``spec.value`` of an Echo to ``status.value``.

It exercises the whole runtime with the least domain logic (tests, the runtime benchmark and its kopf
comparison), in the one controller shape: observe from the cache, decide purely, write status only when it
differs (report), so a steady cluster sees zero writes. Its CRD (``echoes.diagnostics.aiplane.io``) is installed by the controller
itself when missing; it is not part of aiplane's API.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from aiplane.apimachinery import objects
from aiplane.kube.client import ApiError, KubeClient
from aiplane.kube.clock import Clock, SystemClock
from aiplane.kube.controller import Controller, Request, Result, event_source_for, field_manager_for
from aiplane.kube.events import EventRecorder
from aiplane.kube.informer import InformerFactory
from aiplane.kube.manager import Manager
from aiplane.kube.rbac import READ, Permission
from aiplane.kube.resources import CRDS, Resource, register
from aiplane.kube.shape import Shaped
from aiplane.kube.status import StatusWriter

GROUP = "diagnostics.aiplane.io"
ECHOES = register(Resource(GROUP, "v1", "echoes", "Echo", True))
NAME: Final = "echo"
FIELD_MANAGER: Final = field_manager_for(NAME)
Obj = dict[str, Any]

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


def decide(observed: Obj, now: datetime) -> Obj:
    """The decision is the status wanted (an Echo has no children)."""
    return desired_status(observed)


async def ensure_crd(client: KubeClient) -> None:
    try:
        await client.create(CRDS, CRD)
    except ApiError as exc:
        # Decided here: a CRD that exists already (an earlier start, another replica) is the goal.
        if not exc.already_exists:
            raise


class EchoReconciler:
    """Observe the Echo from the cache, decide :func:`desired_status`, write it only when it differs."""

    def __init__(self, client: KubeClient, informers: InformerFactory, recorder: EventRecorder) -> None:
        self.informer = informers.informer(ECHOES)
        self.status = StatusWriter(client, ECHOES, FIELD_MANAGER)
        self.recorder = recorder

    async def observe(self, request: Request) -> Obj | None:
        obj = self.informer.get(request.key)
        return None if obj is None or objects.is_deleting(obj) else obj

    def decide(self, observed: Obj, now: datetime) -> Obj:
        return decide(observed, now)

    async def act(self, observed: Obj, decision: Obj) -> None:
        """Nothing: an Echo owns no objects."""

    async def report(self, observed: Obj, decision: Obj) -> Result | None:
        await self.status.write(observed, decision)
        return None


def new_controller(
    client: KubeClient,
    informers: InformerFactory,
    *,
    workers: int = 1,
    clock: Clock | None = None,
    recorder: EventRecorder | None = None,
) -> Controller:
    """The echo controller without a manager (the runtime's tests and benchmark start it alone)."""
    shape = EchoReconciler(client, informers, recorder or EventRecorder(client, event_source_for(NAME)))
    return (
        Controller.build(NAME).for_(ECHOES).workers(workers).reconcile(Shaped(shape, clock or SystemClock()))
    )


def setup_controller(manager: Manager, *, workers: int = 1) -> Controller:
    return new_controller(
        manager.client,
        manager.informers,
        workers=workers,
        clock=manager.clock,
        recorder=manager.recorder(NAME),
    )


#: What this diagnostic controller needs (never part of ``all``, so not in the chart's ClusterRole).
PERMISSIONS: Final = (
    Permission("apiextensions.k8s.io", ("customresourcedefinitions",), ("create",)),
    Permission("diagnostics.aiplane.io", ("echoes",), READ),
    Permission("diagnostics.aiplane.io", ("echoes/status",), ("patch",)),
)


async def setup(manager: Manager) -> None:
    """``aiplane run --controllers echo``: install the CRD if missing, then register the controller."""
    await ensure_crd(manager.client)
    manager.add_controller(setup_controller(manager))
