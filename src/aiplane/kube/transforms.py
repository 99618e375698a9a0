"""What every informer cache leaves out, whichever controller reads it (operator memory).

controller-runtime users strip ``managedFields`` from their caches (``cache.TransformStripManagedFields``)
and drop what no controller reads; this is that, applied by every :class:`~aiplane.kube.informer.Informer`
before its own ``transform`` (a controller's, for a cache only it reads):

* ``metadata.managedFields`` of every object: server-side-apply bookkeeping, often bigger than the
  object, read by no decision;
* a Secret's values (the keys stay, each value emptied): controllers need only which keys exist, and
  a cache holding values could leak them through any later log, Event or status;
* a Node's ``status`` fields that describe the machine rather than its capacity or health
  (:data:`NODE_STATUS_UNREAD`: images, nodeInfo, addresses, daemon endpoints, volumes): the kubelet
  fills them (``images`` alone can be most of a Node), no controller reads them, and ``status`` is a
  subresource of Nodes, so an update of a cached Node (the drain's cordon is a PUT) never writes
  them back: kube-apiserver keeps the stored status on an update of the main resource.

Only the levels it changes are copied (the rest is shared with the decoded input): cheap enough for
every watch event. Cached objects are read-only (``meta.deep_copy`` before mutating).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from aiplane.apimachinery.meta import strip_managed_fields
from aiplane.kube.resources import Resource

__all__ = ["NODE_STATUS_UNREAD", "cached_form"]

#: Node ``status`` fields no controller reads (checked by a test against the controllers' sources).
NODE_STATUS_UNREAD: Final = frozenset(
    {
        "images",
        "nodeInfo",
        "addresses",
        "daemonEndpoints",
        "volumesInUse",
        "volumesAttached",
        "config",
        "runtimeHandlers",
        "features",
    }
)


def cached_form(resource: Resource, obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` as an informer of ``resource`` caches it (the module docstring), with ``apiVersion`` and
    ``kind`` even for list items (kube-apiserver omits them there)."""
    out = strip_managed_fields(obj)
    if resource.group == "":
        if resource.plural == "secrets":
            for part in ("data", "stringData"):
                if isinstance(out.get(part), Mapping):
                    out[part] = dict.fromkeys(out[part], "")
        elif resource.plural == "nodes":
            status = out.get("status")
            if isinstance(status, Mapping) and not NODE_STATUS_UNREAD.isdisjoint(status):
                out["status"] = {k: v for k, v in status.items() if k not in NODE_STATUS_UNREAD}
    if "apiVersion" not in out:
        out["apiVersion"] = resource.api_version
    if "kind" not in out:
        out["kind"] = resource.kind
    return out
