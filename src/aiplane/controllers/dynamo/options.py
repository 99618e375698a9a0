"""What an operator chooses about Dynamo graphs, owned here rather than by the manager.

Upstream these are operator flags (``--ingress-controller-class-name``, ``--istio-virtual-service-gateway``,
``--ingress-host-suffix``, ``--ingress-controller-tls-secret-name``): they decide the default ingress a
frontend gets when its service spec has none, so every graph in a cluster is exposed the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["DEFAULT_HOST_SUFFIX", "DynamoOptions"]

#: Upstream's default for ``--ingress-host-suffix``: hosts are ``<dgd>.local``.
DEFAULT_HOST_SUFFIX: Final = "local"


@dataclass(frozen=True)
class DynamoOptions:
    """The ingress defaults for frontends; empty strings mean "not configured", as upstream's flags."""

    #: An Ingress class: when set, frontends are exposed through an Ingress by default.
    ingress_class: str = ""
    #: An Istio gateway (``namespace/name``): when set, frontends get a VirtualService by default.
    istio_gateway: str = ""
    ingress_host_suffix: str = DEFAULT_HOST_SUFFIX
    #: The Secret holding the TLS certificate of default ingresses.
    ingress_tls_secret: str = ""

    @property
    def ingress_enabled(self) -> bool:
        """Upstream enables the default ingress when either way of exposing a frontend is configured."""
        return bool(self.ingress_class or self.istio_gateway)
