"""What an operator chooses about Dynamo graphs, owned here rather than by the manager.

Upstream these are operator flags: ``--ingress-controller-class-name``,
``--istio-virtual-service-gateway``, ``--ingress-host-suffix`` and ``--ingress-controller-tls-secret-name``
decide the default ingress a frontend gets when its service spec has none, so every graph in a cluster
is exposed the same way; ``--nats-server``, ``--etcd-endpoints``, ``--model-express-url`` and
``--prometheus-endpoint`` reach every component pod as env (user values win);
``--mpi-run-ssh-secret-name`` is the SSH keypair TRT-LLM's multinode mpirun mounts;
``--profiler-image`` runs the DGDR's online profiling Job. Both Dynamo
controllers read one :class:`DynamoOptions` through ``manager.options(DynamoOptions)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

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
    ingress_class: str = ""
    #: An Istio gateway (``namespace/name``): when set, frontends get a VirtualService by default.
    istio_gateway: str = ""
    ingress_host_suffix: str = DEFAULT_HOST_SUFFIX
    #: The Secret holding the TLS certificate of default ingresses.
    ingress_tls_secret: str = ""
    nats_server: str = ""
    #: Also enables the DCD finalizer's etcd cleanup (``/<dynamoNamespace>/components/<service>``).
    etcd_endpoints: str = ""
    model_express_url: str = ""
    prometheus_endpoint: str = ""
    #: The SSH keypair Secret TRT-LLM multinode workers and leaders mount at ``/ssh-pk``.
    mpi_ssh_secret: str = DEFAULT_MPI_SSH_SECRET
    #: ``--profiler-image`` (Helm ``dynamo.dgdr.profilerImage``): the image of the online DGDR
    #: profiling Job's ``profiler`` container. Empty: an online DGDR fails validation naming the flag.
    profiler_image: str = ""

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
