"""The upstream controllers aiplane's workloads run beside, on the local control plane (``cluster up --with``):
LeaderWorkerSet's controller manager, Kueue's manager, the scheduler-plugins scheduler (Coscheduling, a gang
scheduler beside kube-scheduler) and its PodGroup controller as processes, and the Gateway API CRDs.

``scripts/build-neighbours`` builds the binaries from their published Go modules and copies the manifests of
the same module versions (CRDs, the CRD patches that enable conversion webhooks, webhook configurations)
into one directory. Here they are installed as upstream's kustomizations install them, with two changes
that a cluster without kubelets needs: every webhook is reached at ``https://127.0.0.1:<port>/<path>``
instead of through a Service, and its certificate is one the cluster CA signed (``pki.issue_serving``),
named in each configuration's caBundle. docs/real-cluster.md lists what else differs and why.
"""

from __future__ import annotations

import base64
import copy
import os
import ssl
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any

import yaml

from aiplane.realcluster import pki as pkimod
from aiplane.realcluster.admin import Admin, ApiError
from aiplane.realcluster.net import free_port
from aiplane.realcluster.scheduling import UNSCHEDULABLE_FLUSH_SECONDS, coscheduling_config

#: What ``--with`` accepts: the controllers, the gang scheduler, and the Gateway API's CRDs (nothing to run).
KNOWN = ("lws", "kueue", "gateway", "coscheduling")
#: Asked for, and why it cannot be had here.
UNAVAILABLE = {
    "volcano": "the Go module proxy refuses volcano.sh/volcano (every version), so Volcano's scheduler and "
    "controller-manager cannot be built from Go modules here; `coscheduling` (the scheduler-plugins gang "
    "scheduler) stands in for it (docs/real-cluster.md)",
}
#: The scheduler-plugins processes of ``coscheduling``: the scheduler and its PodGroup status controller.
SCHEDULER_PLUGINS = "scheduler-plugins"
SCHEDULER_PLUGINS_CONTROLLER = "scheduler-plugins-controller"
#: The processes, in start order; ``stop_cluster`` stops them before the control plane.
PROCESSES = ("lws", "kueue", SCHEDULER_PLUGINS, SCHEDULER_PLUGINS_CONTROLLER)
NAMESPACES = {"lws": "lws-system", "kueue": "kueue-system"}

_LWS_POD_SELECTOR = {
    "objectSelector": {
        "matchExpressions": [{"key": "leaderworkerset.sigs.k8s.io/name", "operator": "Exists"}]
    }
}
_KUEUE_NAMESPACE_SELECTOR = {
    "namespaceSelector": {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-system", "kueue-system"],
            }
        ]
    }
}
# The selectors upstream's kustomizations add to the generated webhook configurations, so the pod webhooks
# see only their own pods (lws: config/webhook/{mutating,validating}-patch.yaml; kueue:
# config/components/webhook/kustomization.yaml).
_SELECTORS: dict[str, dict[str, dict[str, Any]]] = {
    "lws": {"mpod.kb.io": _LWS_POD_SELECTOR, "vpod.kb.io": _LWS_POD_SELECTOR},
    "kueue": {
        f"{kind}{obj}.kb.io": _KUEUE_NAMESPACE_SELECTOR
        for kind in ("m", "v")
        for obj in ("pod", "deployment", "statefulset")
    },
}
# Kueue's integrations for the workloads aiplane makes (pods and pod groups, Deployments, StatefulSets,
# LeaderWorkerSets); Kueue only manages objects that name a queue (manageJobsWithoutQueueName false).
KUEUE_FRAMEWORKS = ("pod", "deployment", "statefulset", "leaderworkerset.x-k8s.io/leaderworkerset")


class NeighbourError(Exception):
    """``--with`` named something unknown or unavailable, or the built directory is incomplete."""


def parse_with(value: str) -> tuple[str, ...]:
    """``lws,kueue,gateway`` (or ``all``) as the names, in a fixed order, each once."""
    names = {n.strip() for n in value.split(",") if n.strip()}
    if "all" in names:
        names = (names - {"all"}) | set(KNOWN)
    for name in sorted(names):
        if name in UNAVAILABLE:
            raise NeighbourError(f"{name}: {UNAVAILABLE[name]}")
        if name not in KNOWN:
            raise NeighbourError(f"unknown neighbour {name!r} (known: {', '.join(KNOWN)})")
    return tuple(n for n in KNOWN if n in names)


def dir_from_env() -> Path:
    """The directory ``scripts/build-neighbours`` printed, from ``AIPLANE_NEIGHBOURS_DIR``."""
    value = os.environ.get("AIPLANE_NEIGHBOURS_DIR")
    if not value:
        raise NeighbourError(
            "AIPLANE_NEIGHBOURS_DIR is not set: build the neighbours with scripts/build-neighbours "
            "and set it to the directory it prints"
        )
    return check_dir(Path(value))


def check_dir(path: Path) -> Path:
    missing = [
        part
        for part in (
            "bin/lws-controller",
            "bin/kueue",
            f"bin/{SCHEDULER_PLUGINS}",
            f"bin/{SCHEDULER_PLUGINS_CONTROLLER}",
            "lws/webhooks.yaml",
            "kueue/webhooks.yaml",
            "gateway-api/crds",
            "scheduler-plugins/crds",
        )
        if not (path / part).exists()
    ]
    if missing:
        raise NeighbourError(f"{path} lacks {missing}: run scripts/build-neighbours")
    return path


@dataclass(frozen=True)
class Process:
    """One upstream controller to run: its command, environment and the ports it serves on 127.0.0.1
    (``webhook_port`` None: it serves no webhooks; ``health_ca``: its probe is served over HTTPS with a
    certificate that CA signed)."""

    name: str
    argv: list[str]
    env: dict[str, str]
    health_port: int
    webhook_port: int | None
    health_ca: Path | None = None


@dataclass
class Plan:
    """Everything ``cluster up --with`` installs and starts, made by :func:`prepare`."""

    names: tuple[str, ...]
    processes: list[Process] = field(default_factory=list)
    crds: list[dict[str, Any]] = field(default_factory=list)
    webhooks: list[dict[str, Any]] = field(default_factory=list)

    def crd_names(self) -> list[str]:
        return [crd["metadata"]["name"] for crd in self.crds]


# libyaml's loader where PyYAML has it: the CRDs are megabytes of YAML, ~8x faster to read than in pure Python.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _yaml_docs(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as stream:
        yield from (doc for doc in yaml.load_all(stream, Loader=_LOADER) if doc)


def _client_config(port: int, path: str, ca_bundle: str) -> dict[str, Any]:
    return {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle}


def _crds(directory: Path, port: int | None, ca_bundle: str) -> list[dict[str, Any]]:
    """The CRDs of one module; with ``port``, their conversion webhooks (as upstream's patches enable them)
    served by that process."""
    crds = {
        crd["metadata"]["name"]: crd
        for path in sorted((directory / "crds").glob("*.yaml"))
        for crd in _yaml_docs(path)
        if crd.get("kind") == "CustomResourceDefinition"
    }
    if port is not None:
        for path in sorted((directory / "crd-patches").glob("*.yaml")):
            for patch in _yaml_docs(path):
                conversion = copy.deepcopy(patch["spec"]["conversion"])
                webhook = conversion["webhook"]
                webhook["clientConfig"] = _client_config(
                    port, webhook["clientConfig"]["service"]["path"], ca_bundle
                )
                crds[patch["metadata"]["name"]]["spec"]["conversion"] = conversion
    return list(crds.values())


def _webhook_configs(name: str, directory: Path, port: int, ca_bundle: str) -> list[dict[str, Any]]:
    """Upstream's webhook configurations, named as its kustomization prefixes them, pointed at 127.0.0.1."""
    configs = []
    for doc in _yaml_docs(directory / "webhooks.yaml"):
        doc["metadata"] = {"name": f"{name}-{doc['metadata']['name']}"}
        for hook in doc["webhooks"]:
            hook["clientConfig"] = _client_config(port, hook["clientConfig"]["service"]["path"], ca_bundle)
            hook.update(copy.deepcopy(_SELECTORS[name].get(hook["name"], {})))
        configs.append(doc)
    return configs


def _lws_config(certs: Path, webhook: int, health: int) -> dict[str, Any]:
    return {
        "apiVersion": "config.lws.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        # Its own certificate management makes certificates for a Service's DNS name: ours are for 127.0.0.1.
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": webhook, "certDir": str(certs)},
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
    }


def _kueue_config(certs: Path, webhook: int, health: int, frameworks: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACES["kueue"],
        "manageJobsWithoutQueueName": False,
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": webhook, "certDir": str(certs)},
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
        "integrations": {"frameworks": frameworks},
    }


def _process(
    name: str, source: Path, state: Path, pki: pkimod.Pki, server: str, names: tuple[str, ...]
) -> tuple[Process, int]:
    """The command and configuration of one controller; returns it and its webhook port."""
    home = state / name
    certs = home / "certs"
    client = pkimod.Client(name, f"{name}-controller", ("system:masters",))
    pkimod.issue_client(pki, client)
    kubeconfig = state / "kubeconfig" / f"{name}.kubeconfig"
    pkimod.write_kubeconfig(pki, client, server, kubeconfig)
    pkimod.issue_serving(pki, f"{name}-webhook", certs)
    webhook, health = free_port(), free_port()
    env = {"KUBECONFIG": str(kubeconfig)}
    if name == "lws":
        config = _lws_config(certs, webhook, health)
        argv = [str(source / "bin" / "lws-controller")]
    else:
        frameworks = [f for f in KUEUE_FRAMEWORKS if "leaderworkerset" not in f or "lws" in names]
        config = _kueue_config(certs, webhook, health, frameworks)
        argv = [str(source / "bin" / "kueue"), "--feature-gates=VisibilityOnDemand=false"]
        # Read by the build's one-line change to Kueue's main (scripts/build-neighbours).
        env["KUEUE_METRICS_CERT_DIR"] = str(certs)
    (home / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    argv += [f"--config={home / 'config.yaml'}", f"--kubeconfig={kubeconfig}"]
    return Process(name, argv, env, health, webhook), webhook


def _coscheduling(source: Path, state: Path, pki: pkimod.Pki, server: str) -> list[Process]:
    """The scheduler-plugins scheduler with the Coscheduling profile (a second scheduler: it places only
    pods that name its scheduler) and its controller, which keeps PodGroups' status (phase, counts).
    Each with a client certificate of its own in ``system:masters``, like the other neighbours."""
    out = []
    for name in (SCHEDULER_PLUGINS, SCHEDULER_PLUGINS_CONTROLLER):
        client = pkimod.Client(name, name, ("system:masters",))
        pkimod.issue_client(pki, client)
        kubeconfig = state / "kubeconfig" / f"{name}.kubeconfig"
        pkimod.write_kubeconfig(pki, client, server, kubeconfig)
        port = free_port()
        if name == SCHEDULER_PLUGINS:
            home = state / name
            home.mkdir(parents=True, exist_ok=True)
            pkimod.issue_serving(pki, name, home / "certs")
            config = home / "config.yaml"
            config.write_text(
                yaml.safe_dump(coscheduling_config(kubeconfig), sort_keys=False), encoding="utf-8"
            )
            argv = [
                str(source / "bin" / name),
                f"--config={config}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--tls-cert-file={home / 'certs' / 'tls.crt'}",
                f"--tls-private-key-file={home / 'certs' / 'tls.key'}",
                "--profiling=false",
                # A gang the Coscheduling plugin turned down for a resource gap is retried only on a pod
                # add or a PodGroup change (its EventsToRegister), else when kube-scheduler flushes its
                # unschedulable pods (5 min by default): capacity freed by a deletion would go unseen for
                # minutes. Volcano re-runs its session every second; 30 s keeps the gap small.
                f"--pod-max-in-unschedulable-pods-duration={UNSCHEDULABLE_FLUSH_SECONDS}s",
            ]
            out.append(Process(name, argv, {}, port, None, health_ca=pki.path("ca.crt")))
        else:
            # controller-runtime reads KUBECONFIG; metrics off, the probe on loopback.
            argv = [str(source / "bin" / name), "--metricsAddr=0", f"--probeAddr=127.0.0.1:{port}"]
            out.append(Process(name, argv, {"KUBECONFIG": str(kubeconfig)}, port, None))
    return out


def prepare(names: tuple[str, ...], source: Path, state: Path, pki: pkimod.Pki, server: str) -> Plan:
    """Certificates, kubeconfigs and configuration files for ``names`` under ``state``; the objects to
    install and the processes to start."""
    ca_bundle = base64.b64encode(pki.path("ca.crt").read_bytes()).decode()
    plan = Plan(names)
    for name in names:
        if name == "gateway":
            plan.crds += _crds(source / "gateway-api", None, ca_bundle)
            continue
        if name == "coscheduling":
            plan.processes += _coscheduling(source, state, pki, server)
            plan.crds += _crds(source / "scheduler-plugins", None, ca_bundle)
            continue
        process, webhook = _process(name, source, state, pki, server, names)
        plan.processes.append(process)
        plan.crds += _crds(source / name, webhook, ca_bundle)
        plan.webhooks += _webhook_configs(name, source / name, webhook, ca_bundle)
    return plan


def install_crds(admin: Admin, plan: Plan) -> None:
    for name in sorted({NAMESPACES[p.name] for p in plan.processes if p.name in NAMESPACES}):
        admin.create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )
    for crd in plan.crds:
        admin.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)


def install_webhooks(admin: Admin, plan: Plan) -> None:
    """The webhook configurations: created once their servers answer (their failure policy is Fail)."""
    for config in plan.webhooks:
        resource = "mutatingwebhookconfigurations"
        if config["kind"] == "ValidatingWebhookConfiguration":
            resource = "validatingwebhookconfigurations"
        admin.create(f"/apis/admissionregistration.k8s.io/v1/{resource}", config)


def healthy(process: Process) -> bool:
    """The controller's readiness probe answers ok (Kueue's only once its webhook server serves; the
    scheduler's once its informers synced, on its secure port)."""
    scheme = "https" if process.health_ca is not None else "http"
    context = ssl.create_default_context(cafile=str(process.health_ca)) if process.health_ca else None
    with urllib.request.urlopen(
        f"{scheme}://127.0.0.1:{process.health_port}/readyz", timeout=2, context=context
    ) as response:
        return bool(response.status == HTTPStatus.OK)


def webhooks_active(admin: Admin, process: Process) -> bool:
    """The API server calls the controller's webhooks: a dry-run create comes back changed by its defaulting
    webhook (the API server learns of new webhook configurations asynchronously)."""
    if process.webhook_port is None:
        return True
    if process.name == "lws":
        probe = {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": {"name": "webhook-probe"},
            "spec": {
                "leaderWorkerTemplate": {
                    "size": 1,
                    "workerTemplate": {"spec": {"containers": [{"name": "c", "image": "probe"}]}},
                }
            },
        }
        made = admin.request(
            "POST", "/apis/leaderworkerset.x-k8s.io/v1/namespaces/default/leaderworkersets?dryRun=All", probe
        )
        return bool(made["spec"].get("networkConfig", {}).get("subdomainPolicy"))
    probe = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "webhook-probe", "labels": {"kueue.x-k8s.io/queue-name": "probe"}},
        "spec": {"containers": [{"name": "c", "image": "probe"}]},
    }
    try:
        made = admin.request("POST", "/api/v1/namespaces/default/pods?dryRun=All", probe)
    except ApiError:
        return False
    gates = {g["name"] for g in made["spec"].get("schedulingGates", [])}
    return "kueue.x-k8s.io/admission" in gates
