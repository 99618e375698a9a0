"""What kube-controller-manager puts in every new namespace: the ``default`` ServiceAccount and the
``kube-root-ca.crt`` ConfigMap (the serviceaccount and root-ca-cert-publisher controllers).

Clients rely on both (``kubectl create token default``, pods mounting the CA), so the embedded cluster
creates them too, right after the namespace appears.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from aiplane.apimachinery import objects
from aiplane.sim.apiserver.errors import ApiError
from aiplane.sim.apiserver.rest import Api
from aiplane.sim.apiserver.store import ADDED, Event


class NamespaceDefaults:
    def __init__(self, api: Api, ca_pem: bytes) -> None:
        self.api = api
        self.ca = ca_pem.decode()
        api.store.subscribe(self._on_event)

    def _on_event(self, event: Event) -> None:
        if event.key != "/namespaces" or event.type != ADDED:
            return
        name = objects.name(event.obj)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.populate(name)  # bootstrap, before the server runs: no event loop yet
        else:
            # Not from inside the store's event fan-out: the namespace's own event goes out first.
            loop.call_soon(self.populate, name)

    def populate(self, namespace: str) -> None:
        sa_rt = self.api.resource("v1", "ServiceAccount")
        cm_rt = self.api.resource("v1", "ConfigMap")
        defaults: list[tuple[Any, dict[str, Any]]] = [
            (sa_rt, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}),
            (
                cm_rt,
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {
                        "name": "kube-root-ca.crt",
                        "annotations": {
                            "kubernetes.io/description": (
                                "Contains a CA bundle that can be used to verify the kube-apiserver when using "
                                "internal endpoints such as the internal service IP or kubernetes.default.svc. No "
                                "other usage is guaranteed across distributions of Kubernetes clusters."
                            )
                        },
                    },
                    "data": {"ca.crt": self.ca},
                },
            ),
        ]
        for rt, body in defaults:
            with contextlib.suppress(ApiError):  # already there, or the namespace went away meanwhile
                self.api.create(rt, namespace, body)
