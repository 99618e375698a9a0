"""Names and labels of the objects a DynamoGraphDeployment produces, and the limits they must meet.

The names are a user-facing contract copied from upstream (ai-dynamo/dynamo,
``deploy/cloud/operator/internal/dynamo/graph.go``; docs/dynamo.md): one DCD per service, ``<dgd>-<lowercase(key)>``, and the
DCD's children named after it — a Deployment and (frontends) a Service ``<dcd>``, and, multinode,
a LeaderWorkerSet ``<dcd>-<i>`` per replica whose StatefulSets and pods add their own suffixes.

Upstream found an over-long or invalid name only when the API server rejected a child at reconcile
time (#4938); the checks here let the controller say so before it creates anything.
"""

from __future__ import annotations

import re
from typing import Final

from aiplane.apimachinery.selectors import dns1123_subdomain_errors, label_value_errors

__all__ = [
    "ANNOTATION_ENABLE_METRICS",
    "API_VERSION",
    "COMPONENT_FRONTEND",
    "COMPONENT_PLANNER",
    "DCD_KIND",
    "DGD_KIND",
    "LABEL_COMPONENT",
    "LABEL_DYNAMO_NAMESPACE",
    "LABEL_GRAPH_NAME",
    "LABEL_SELECTOR",
    "MAX_LABEL_LENGTH",
    "PLANNER_SERVICE_ACCOUNT",
    "REVISION_HASH_SUFFIX",
    "dcd_name",
    "default_dynamo_namespace",
    "dns1035_label_errors",
    "dns1123_label_errors",
    "dns1123_subdomain_errors",
    "label_value_errors",
    "lws_name",
]

API_VERSION: Final = "nvidia.com/v1alpha1"
DGD_KIND: Final = "DynamoGraphDeployment"
DCD_KIND: Final = "DynamoComponentDeployment"

#: ``<serviceKey>``, on the DCD and on everything it creates.
LABEL_COMPONENT: Final = "nvidia.com/dynamo-component"
#: The graph's Dynamo namespace (the etcd/NATS scope its components discover each other in).
LABEL_DYNAMO_NAMESPACE: Final = "nvidia.com/dynamo-namespace"
#: The DGD's name.
LABEL_GRAPH_NAME: Final = "nvidia.com/dynamo-graph-deployment-name"
#: ``<dcd>``: the DCD controller's pod selector, so a DCD name is also a label value.
LABEL_SELECTOR: Final = "nvidia.com/selector"
ANNOTATION_ENABLE_METRICS: Final = "nvidia.com/enable-metrics"
#: Upstream's spec hash on every child it syncs (DCDs, Deployments, …): rewritten only when it differs.
ANNOTATION_LAST_APPLIED_HASH: Final = "nvidia.com/last-applied-hash"

COMPONENT_FRONTEND: Final = "frontend"
COMPONENT_PLANNER: Final = "planner"
#: The ServiceAccount Dynamo's Planner service runs as (it scales the graph, so it needs RBAC of its own).
PLANNER_SERVICE_ACCOUNT: Final = "planner-serviceaccount"

MAX_LABEL_LENGTH: Final = 63
#: A StatefulSet labels its pods ``controller-revision-hash=<sts>-<10 characters>`` (kubernetes#64023),
#: so a StatefulSet name longer than 52 characters makes pods whose labels the API server rejects.
REVISION_HASH_SUFFIX: Final = 11

_DNS1123_LABEL_FMT: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_RE: Final = re.compile(_DNS1123_LABEL_FMT)
_DNS1035_LABEL_FMT: Final = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_LABEL_RE: Final = re.compile(_DNS1035_LABEL_FMT)
_DNS1123_LABEL_MSG: Final = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    f"start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    f"validation is '{_DNS1123_LABEL_FMT}')"
)
_DNS1035_LABEL_MSG: Final = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
    f"regex used for validation is '{_DNS1035_LABEL_FMT}')"
)


def _label_errors(value: str, regex: re.Pattern[str], msg: str) -> list[str]:
    errs = [f"must be no more than {MAX_LABEL_LENGTH} characters"] if len(value) > MAX_LABEL_LENGTH else []
    if not regex.fullmatch(value):
        errs.append(msg)
    return errs


def dns1123_label_errors(value: str) -> list[str]:
    """``validation.IsDNS1123Label``: a pod's hostname (a StatefulSet pod's name)."""
    return _label_errors(value, _DNS1123_LABEL_RE, _DNS1123_LABEL_MSG)


def dns1035_label_errors(value: str) -> list[str]:
    """``validation.IsDNS1035Label``: a Service's name."""
    return _label_errors(value, _DNS1035_LABEL_RE, _DNS1035_LABEL_MSG)


def dcd_name(dgd_name: str, service_key: str) -> str:
    """``<dgd>-<lowercase(key)>``: the DCD of one service (also its Deployment's and Service's name)."""
    return f"{dgd_name}-{service_key.lower()}"


def default_dynamo_namespace(dgd_name: str) -> str:
    """The graph's Dynamo namespace when no service names one."""
    return f"dynamo-{dgd_name}"


def lws_name(dcd: str, replica: int) -> str:
    """``<dcd>-<i>``: the LeaderWorkerSet (and Volcano PodGroup) of replica ``i`` of a multinode DCD."""
    return f"{dcd}-{replica}"
