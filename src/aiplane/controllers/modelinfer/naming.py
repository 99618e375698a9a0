"""Names, labels and annotations of the objects a ModelInfer owns.

These are a user-facing contract copied from upstream kthena (``ModelInfer`` at ``e4fb6663``,
volcano-sh/kthena ``pkg/infer-controller/utils/utils.go``): routers pair prefill and decode pods by the group-name
label, autoscalers select entry pods by label, and people ``kubectl exec`` into pods whose names
they can predict. Every object is named from the ModelInfer name and ordinals:

========================  ========================================
InferGroup g              ``<mi>-<g>``
role replica r (roleID)   ``<role>-<r>``
pod k of a role replica   ``<mi>-<g>-<role>-<r>-<k>`` (k=0 the entry, 1…workerReplicas the workers)
headless Service          the entry pod's name
Volcano PodGroup          the group name
Volcano task              the role ID
========================  ========================================

Ordinals are parsed back with :func:`parse_ordinal` and compared as integers: upstream sorted group
names as strings, so ``mi-10`` came before ``mi-2`` and rollouts went in the wrong order.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "ANNOTATION_GROUP_NAME",
    "ANNOTATION_QUEUE_NAME",
    "ANNOTATION_TASK_SPEC",
    "API_VERSION",
    "ENV_ENTRY_ADDRESS",
    "ENV_GROUP_SIZE",
    "ENV_WORKER_INDEX",
    "INJECTED_ENV_NAMES",
    "KIND",
    "LABEL_ENTRY",
    "LABEL_GROUP_NAME",
    "LABEL_NAME",
    "LABEL_PREFIX",
    "LABEL_REVISION",
    "LABEL_ROLE",
    "LABEL_ROLE_ID",
    "MAX_NAME_LENGTH",
    "entry_pod_name",
    "group_name",
    "group_ordinal",
    "parse_ordinal",
    "pod_name",
    "podgroup_name",
    "role_id",
    "role_replica_ordinal",
    "service_name",
    "worker_index",
]

API_VERSION: Final = "workload.volcano.sh/v1alpha1"
KIND: Final = "ModelInfer"

LABEL_PREFIX: Final = "modelinfer.volcano.sh/"
#: The ModelInfer's name, on pods, Services, PodGroups and ControllerRevisions.
LABEL_NAME: Final = "modelinfer.volcano.sh/name"
#: ``<mi>-<g>``: the InferGroup. Routers pair prefill and decode pods on this key.
LABEL_GROUP_NAME: Final = "modelinfer.volcano.sh/group-name"
#: The role name (``prefill``, ``decode``...).
LABEL_ROLE: Final = "modelinfer.volcano.sh/role"
#: ``<role>-<r>``: the role replica inside its group.
LABEL_ROLE_ID: Final = "modelinfer.volcano.sh/role-id"
#: The revision hash (see :mod:`.revision`) of the template the pod was built from.
LABEL_REVISION: Final = "modelinfer.volcano.sh/revision"
#: ``"true"`` on entry pods only; workers carry no such label (as upstream).
LABEL_ENTRY: Final = "modelinfer.volcano.sh/entry"

#: Volcano's gang annotation: the PodGroup a pod belongs to.
ANNOTATION_GROUP_NAME: Final = "scheduling.k8s.io/group-name"
#: Volcano's task annotation: the ``minTaskMember`` key a pod counts for.
ANNOTATION_TASK_SPEC: Final = "volcano.sh/task-spec"
#: On the ModelInfer: the Volcano queue its PodGroups go to (upstream's later behaviour).
ANNOTATION_QUEUE_NAME: Final = "scheduling.volcano.sh/queue-name"

ENV_GROUP_SIZE: Final = "GROUP_SIZE"
ENV_ENTRY_ADDRESS: Final = "ENTRY_ADDRESS"
ENV_WORKER_INDEX: Final = "WORKER_INDEX"
#: The env vars injected into every container, in the order they are prepended.
INJECTED_ENV_NAMES: Final = (ENV_GROUP_SIZE, ENV_ENTRY_ADDRESS, ENV_WORKER_INDEX)

#: A Service name is a DNS-1035 label, and so are label values: at most 63 characters.
MAX_NAME_LENGTH: Final = 63

# Canonical decimal only: "0" or no leading zero. Names we build never have leading zeros, so a name
# that does was not built by us and must not alias one that was ("mi-01" is not group 1).
_ORDINAL = re.compile(r"^(.*)-(0|[1-9][0-9]*)$", re.DOTALL)


def group_name(mi_name: str, ordinal: int) -> str:
    """``<mi>-<g>``: the InferGroup's name (also its PodGroup's and its pods' group-name label)."""
    return f"{mi_name}-{ordinal}"


def role_id(role_name: str, replica: int) -> str:
    """``<role>-<r>``: the role replica's ID (its pods' role-id label and its Volcano task name)."""
    return f"{role_name}-{replica}"


def pod_name(mi_name: str, ordinal: int, role_name: str, replica: int, index: int) -> str:
    """``<mi>-<g>-<role>-<r>-<k>``; ``index`` 0 is the entry pod, 1…workerReplicas the workers."""
    return f"{group_name(mi_name, ordinal)}-{role_id(role_name, replica)}-{index}"


def entry_pod_name(mi_name: str, ordinal: int, role_name: str, replica: int) -> str:
    """The entry pod of a role replica (``pod_name(..., 0)``)."""
    return pod_name(mi_name, ordinal, role_name, replica, 0)


def service_name(mi_name: str, ordinal: int, role_name: str, replica: int) -> str:
    """The role replica's headless Service: named like its entry pod, so ``<svc>.<ns>`` (the
    ``ENTRY_ADDRESS``) resolves to the entry pod's IP."""
    return entry_pod_name(mi_name, ordinal, role_name, replica)


def podgroup_name(mi_name: str, ordinal: int) -> str:
    """The Volcano PodGroup of an InferGroup: the group name."""
    return group_name(mi_name, ordinal)


def parse_ordinal(name: str) -> tuple[str, int] | None:
    """Split a trailing ``-<n>``: ``"llama-10"`` -> ``("llama", 10)``; ``None`` when there is none.

    The ordinal is an ``int``, so callers sort numerically. Only canonical decimals are accepted
    (``"x-01"`` -> ``None``), because our builders never write leading zeros.
    """
    m = _ORDINAL.match(name)
    if m is None:
        return None
    return m.group(1), int(m.group(2))


def group_ordinal(mi_name: str, name: str) -> int | None:
    """The ordinal of group ``name`` of ModelInfer ``mi_name``, or ``None`` if it is not one.

    Parsing with the known prefix matters when the ModelInfer's own name ends in digits:
    ``group_ordinal("llama-3", "llama-3-0") == 0``, while ``"llama-3"`` itself is no group of it.
    """
    prefix = mi_name + "-"
    if not name.startswith(prefix):
        return None
    parsed = parse_ordinal(name)
    if parsed is None or parsed[0] != mi_name:
        return None
    return parsed[1]


def role_replica_ordinal(role_name: str, rid: str) -> int | None:
    """The replica number of role ID ``rid`` (``"decode-1"`` -> 1) of role ``role_name``, or ``None``."""
    parsed = parse_ordinal(rid)
    if parsed is None or parsed[0] != role_name:
        return None
    return parsed[1]


def worker_index(name: str) -> int | None:
    """The pod index ``k`` of a pod name (0 for an entry pod), or ``None`` if it has none."""
    parsed = parse_ordinal(name)
    return None if parsed is None else parsed[1]
