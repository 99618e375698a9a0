"""Each of our kinds is defined once (``aiplane.api.kinds``): the CRDs serve exactly those."""

from __future__ import annotations

from aiplane.api import kinds
from aiplane.api.registry import RESOURCES
from aiplane.kube.resources import resource_for


def test_every_crd_serves_its_kind_as_defined_once() -> None:
    served = [
        (m.crd.group, m.crd.version, m.crd.plural, m.crd.kind, m.crd.scope == "Namespaced") for m in RESOURCES
    ]
    defined = [(r.group, r.version, r.plural, r.kind, r.namespaced) for r in kinds.OURS]
    assert served == defined
    for res in kinds.OURS:
        assert resource_for(res.api_version, res.kind) is res
