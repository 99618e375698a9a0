"""The embedded cluster: API server + bootstrap objects + simulated agents (optional), on 127.0.0.1.

Tests, benchmarks and the demo all start one of these, in-process (:class:`EmbeddedCluster`) or as
``aiplane sim`` in its own process; either way clients reach it over real HTTP with a kubeconfig.
"""

from __future__ import annotations

import base64
import os
import socket
import tempfile
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from aiplane.api.crdgen import all_crds
from aiplane.sim import client as client_mod
from aiplane.sim import fleet as fleet_mod
from aiplane.sim import thirdparty, tls
from aiplane.sim.agents import AgentOptions, Agents
from aiplane.sim.apiserver import rbac
from aiplane.sim.apiserver.access import ALWAYS_ALLOW
from aiplane.sim.apiserver.audit import DEFAULT_CAPACITY, AuditLog
from aiplane.sim.apiserver.authn import AUDIENCE, DEFAULT_TOKEN_SECONDS
from aiplane.sim.apiserver.server import ApiServer
from aiplane.sim.gpu_metrics import UtilizationEndpoint
from aiplane.sim.hardware import GpuMetricsExporter, Hardware
from aiplane.sim.namespace_defaults import NamespaceDefaults

INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
#: The StorageClasses a new cluster has: ``standard`` (the default, as kind and minikube name theirs)
#: and ``standard-rwx`` (ReadWriteMany claims of the Dynamo examples), both provisioned by the
#: simulated hostpath provisioner (``aiplane.sim.agents.volumes``).
STORAGE_CLASSES: tuple[dict[str, Any], ...] = tuple(
    {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name, **({"annotations": annotations} if annotations else {})},
        "provisioner": "sim.aiplane.io/hostpath",
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    }
    for name, annotations in (
        ("standard", {"storageclass.kubernetes.io/is-default-class": "true"}),
        ("standard-rwx", {}),
    )
)


class EmbeddedCluster:
    """One simulated cluster. ``await start()`` serves it; ``kubeconfig()`` tells clients where."""

    def __init__(
        self,
        *,
        fleet: fleet_mod.Fleet | None = None,
        token: str | None = None,
        history_size: int = 10_000,
        install_crds: bool = True,
        agents: bool = False,
        ready_delay: float = 0.5,
        dcm_delay: float = 1.0,
        plugin_refresh_delay: float = 0.0,
        hardware: bool = True,
        authorization_mode: str = ALWAYS_ALLOW,
        audit_log: Path | None = None,
        audit_capacity: int = DEFAULT_CAPACITY,
    ) -> None:
        """``agents=True`` runs the simulated schedulers (kube-scheduler and Volcano gang scheduler),
        kubelet, DaemonSet controller and AMD GPU operator (docs/sim.md, "Simulated agents") from
        ``start()`` to ``stop()``; off by default so that tests of the API server see only their own
        objects. The delays are the agents' initial timing. The AMD GPU operator and the GPU metrics
        exporter are the simulated hardware (:mod:`aiplane.sim.hardware`): an API client of this
        server, started with it; ``hardware=False`` leaves the AMD operator out (``aiplane hardware``
        plays it out of process then, as beside a real control plane).

        ``authorization_mode="RBAC"`` authorizes every HTTP request (and every in-memory request of a
        client given a user) as kube-apiserver's RBAC authorizer; the admin kubeconfig's user is in
        ``system:masters`` either way. Every such request is in ``audit`` (the newest
        ``audit_capacity``), and appended to ``audit_log`` as JSON lines if given."""
        self.server = ApiServer(
            token=token,
            history_size=history_size,
            authorization_mode=authorization_mode,
            audit=AuditLog(audit_capacity, audit_log),
        )
        self.url: str | None = None
        self.tls = tls.generate()
        self._runner: web.AppRunner | None = None
        self._bootstrap(fleet_mod.DEFAULT_FLEET if fleet is None else fleet, install_crds)
        self.agents: Agents | None = (
            Agents(self.server.api, AgentOptions(ready_delay=ready_delay)) if agents else None
        )
        self.server.agents = self.agents
        #: The simulated GPU metrics exporter (docs/sim.md): ``gpu_metrics.url`` once started.
        self.gpu_metrics = GpuMetricsExporter()
        self.server.gpu_metrics = UtilizationEndpoint(self.gpu_metrics)
        #: The simulated hardware, a client of this server (in memory: no HTTP, no fault injection,
        #: unaudited, as the other agents): the exporter always, the AMD GPU operator with the agents.
        self.hardware = Hardware(
            client_mod.InMemoryKubeClient(self.server.api, user_agent="aiplane-hardware"),
            amd=agents and hardware,
            dcm_delay=dcm_delay,
            plugin_refresh_delay=plugin_refresh_delay,
            metrics=self.gpu_metrics,
        )
        if self.agents is not None:
            self.agents.amd = self.hardware.amd

    @property
    def api(self) -> Any:
        return self.server.api

    @property
    def audit(self) -> AuditLog:
        """One record per authenticated request (``audit.records``, ``audit.for_user(name)``)."""
        return self.server.audit

    def _bootstrap(self, fleet: fleet_mod.Fleet, install_crds: bool) -> None:
        api = self.server.api
        self.namespace_defaults = NamespaceDefaults(api, self.tls.ca_pem)
        ns_rt = api.resource("v1", "Namespace")
        for name in INITIAL_NAMESPACES:
            api.create(ns_rt, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        crd_rt = api.resource("apiextensions.k8s.io/v1", "CustomResourceDefinition")
        crds = list(thirdparty.crds())
        if install_crds:
            crds = all_crds() + crds
        for crd in crds:
            api.create(crd_rt, None, crd)
        node_rt = api.resource("v1", "Node")
        for node in fleet_mod.node_objects(fleet):
            api.create(node_rt, None, node)
        sc_rt = api.resource("storage.k8s.io/v1", "StorageClass")
        for storage_class in STORAGE_CLASSES:
            api.create(sc_rt, None, storage_class)
        for policy in rbac.bootstrap_policy():  # kube-apiserver creates these whatever the mode
            api.create(api.resource(policy["apiVersion"], policy["kind"]), None, policy)

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        runner = web.AppRunner(self.server.app(), handle_signals=False, access_log=None)
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        site = web.SockSite(runner, sock, ssl_context=self.tls.server_context())
        await site.start()
        self._runner = runner
        self.server.gc.start()  # the deletion/GC controllers' worker runs on this loop
        if self.agents is not None:
            self.agents.start()  # schedulers, kubelet, DaemonSets …: on this loop too
        await self.hardware.start(host=host)  # AMD GPU operator, GPU metrics exporter: clients of it
        bound_port = sock.getsockname()[1]
        self.url = f"https://{host}:{bound_port}"
        return self.url

    async def stop(self) -> None:
        await self.hardware.stop()
        if self.agents is not None:
            await self.agents.stop()
        await self.server.gc.stop()
        self.server.audit.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def kubeconfig(
        self, namespace: str = "default", *, token: str | None = None, user: str = "aiplane-sim"
    ) -> dict[str, Any]:
        """A kubeconfig for this cluster: the admin's, or ``token``'s (named ``user``)."""
        if self.url is None:
            raise RuntimeError("the cluster is not serving yet: await start() first")
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "aiplane-sim",
                    "cluster": {
                        "server": self.url,
                        "certificate-authority-data": base64.b64encode(self.tls.ca_pem).decode(),
                    },
                }
            ],
            "users": [{"name": user, "user": {"token": token or self.server.token}}],
            "contexts": [
                {
                    "name": "aiplane-sim",
                    "context": {"cluster": "aiplane-sim", "user": user, "namespace": namespace},
                }
            ],
            "current-context": "aiplane-sim",
            "preferences": {},
        }

    def service_account_token(self, namespace: str, name: str, seconds: int = DEFAULT_TOKEN_SECONDS) -> str:
        """A token for ServiceAccount ``namespace/name`` (created if missing), as ``kubectl create
        token`` would get from the TokenRequest subresource."""
        api = self.server.api
        sa_rt = api.resource("v1", "ServiceAccount")
        sa = api.store.get("/serviceaccounts", namespace, name)
        if sa is None:
            meta = {"name": name, "namespace": namespace}
            sa = api.create(
                sa_rt, namespace, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}
            ).obj
        token, _ = self.server.tokens.mint(sa, api.clock(), seconds, [AUDIENCE])
        return token

    def service_account_kubeconfig(self, namespace: str, name: str) -> dict[str, Any]:
        """A kubeconfig authenticated as ServiceAccount ``namespace/name`` (created if missing)."""
        token = self.service_account_token(namespace, name)
        return self.kubeconfig(namespace, token=token, user=f"{namespace}:{name}")

    def write_kubeconfig(self, path: Path, kubeconfig: dict[str, Any] | None = None) -> None:
        """Write the admin kubeconfig (or ``kubeconfig``) atomically (readers never see a partial file),
        readable by the owner only."""
        path = path.expanduser().resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".kubeconfig-", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                yaml.safe_dump(kubeconfig or self.kubeconfig(), handle, sort_keys=False)
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
