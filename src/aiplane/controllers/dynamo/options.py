"""What an operator chooses about Dynamo graphs, owned here rather than by the manager.

Upstream these are operator flags: ``--ingress-controller-class-name``,
``--istio-virtual-service-gateway``, ``--ingress-host-suffix`` and ``--ingress-controller-tls-secret-name``
decide the default ingress a frontend gets when its service spec has none, so every graph in a cluster
is exposed the same way; ``--nats-server``, ``--etcd-endpoints``, ``--model-express-url`` and
``--prometheus-endpoint`` reach every component pod as env (user values win);
``--mpi-run-ssh-secret-name`` is the SSH keypair TRT-LLM's multinode mpirun mounts;
``--profiler-image`` runs the DGDR's online profiling Job. Each field declares its ``aiplane run``
flag (same name as upstream's); the command line is generated from them. Both Dynamo controllers read
one :class:`DynamoOptions` through ``manager.options(DynamoOptions)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from aiplane.kube.flags import flag

if TYPE_CHECKING:  # imported when used: ``aiplane run`` reads the defaults below for every controller
    from aiplane.controllers.dynamo.podtemplate import PodTemplateOptions

__all__ = ["DEFAULT_HOST_SUFFIX", "DEFAULT_MPI_SSH_SECRET", "DynamoOptions"]

#: Upstream's default for ``--ingress-host-suffix``: hosts are ``<dgd>.local``.
DEFAULT_HOST_SUFFIX: Final = "local"
#: Upstream's Helm default for ``--mpi-run-ssh-secret-name``.
DEFAULT_MPI_SSH_SECRET: Final = "mpi-run-ssh-secret"


@dataclass(frozen=True)
class DynamoOptions:
    """Operator-wide Dynamo settings; empty strings mean "not configured", as upstream's flags."""

    #: An Ingress class: when set, frontends are exposed through an Ingress by default.
    ingress_class: str = flag(
        "",
        "--ingress-controller-class-name",
        "Dynamo: Ingress class of frontends' default ingress (empty: none).",
        metavar="CLASS",
    )
    #: An Istio gateway (``namespace/name``): when set, frontends get a VirtualService by default.
    istio_gateway: str = flag(
        "",
        "--istio-virtual-service-gateway",
        "Dynamo: Istio gateway (NAMESPACE/NAME) of frontends' default VirtualService.",
        metavar="NAMESPACE/NAME",
    )
    ingress_host_suffix: str = flag(
        DEFAULT_HOST_SUFFIX,
        "--ingress-host-suffix",
        "Dynamo: host suffix of default ingresses (a graph's host is NAME.SUFFIX).",
        metavar="SUFFIX",
    )
    #: The Secret holding the TLS certificate of default ingresses.
    ingress_tls_secret: str = flag(
        "",
        "--ingress-controller-tls-secret-name",
        "Dynamo: TLS Secret of default ingresses (empty: no TLS).",
        metavar="SECRET",
    )
    nats_server: str = flag(
        "", "--nats-server", "Dynamo: NATS_SERVER for every component pod.", metavar="URL"
    )
    #: Also enables the DCD finalizer's etcd cleanup (``/<dynamoNamespace>/components/<service>``).
    etcd_endpoints: str = flag(
        "",
        "--etcd-endpoints",
        "Dynamo: ETCD_ENDPOINTS for every component pod; also enables the DCD etcd cleanup.",
        metavar="URL[,URL...]",
    )
    model_express_url: str = flag(
        "", "--model-express-url", "Dynamo: MODEL_EXPRESS_URL for every component pod.", metavar="URL"
    )
    prometheus_endpoint: str = flag(
        "", "--prometheus-endpoint", "Dynamo: PROMETHEUS_ENDPOINT for every component pod.", metavar="URL"
    )
    #: The SSH keypair Secret TRT-LLM multinode workers and leaders mount at ``/ssh-pk``.
    mpi_ssh_secret: str = flag(
        DEFAULT_MPI_SSH_SECRET,
        "--mpi-run-ssh-secret-name",
        "Dynamo: SSH keypair Secret of TRT-LLM multinode mpirun.",
        metavar="SECRET",
    )
    #: Helm ``dynamo.dgdr.profilerImage``: the image of the online DGDR profiling Job's ``profiler``
    #: container. Empty: an online DGDR fails validation naming the flag.
    profiler_image: str = flag(
        "",
        "--profiler-image",
        "Dynamo: image of online DGDR profiling Jobs (empty: online profiling refused).",
        metavar="IMAGE",
    )

    @property
    def ingress_enabled(self) -> bool:
        """Upstream enables the default ingress when either way of exposing a frontend is configured."""
        return bool(self.ingress_class or self.istio_gateway)

    def pod_template_options(self) -> PodTemplateOptions:
        """The env every component pod gets from these flags (unset flags add nothing)."""
        from aiplane.controllers.dynamo.podtemplate import PodTemplateOptions  # noqa: PLC0415

        return PodTemplateOptions(
            nats_server=self.nats_server or None,
            etcd_endpoints=self.etcd_endpoints or None,
            model_express_url=self.model_express_url or None,
            prometheus_endpoint=self.prometheus_endpoint or None,
        )
