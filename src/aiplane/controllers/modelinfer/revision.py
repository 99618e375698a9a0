"""The revision of a ModelInfer's pod templates, and the ControllerRevisions that remember them.

Every pod carries the label ``modelinfer.volcano.sh/revision``: a hash of the template it was built
from. A group whose pods carry another revision than the ModelInfer's current one is outdated and
gets replaced by the rolling update. So the hash must change exactly when the *pods* would differ:

* It covers only ``spec.template.roles``, with each role's ``replicas`` removed (upstream §5). Scaling
  a role adds or removes role replicas in place and must never roll every group; changing
  ``workerReplicas`` (the shape of each role replica, and ``GROUP_SIZE``) or anything in a template does.
  ``replicas``, ``gangSchedule``, ``restartGracePeriodSeconds``, ``recoveryPolicy``,
  ``rolloutStrategy``, ``schedulerName`` and ``topologySpreadConstraints`` are outside it, as upstream.
* The input is written as canonical JSON (sorted keys, no whitespace, ASCII) with ``null`` members
  dropped — the API server prunes them from a custom resource, so a client that sends
  ``workerTemplate: null`` and one that omits it mean the same thing. Key order and the Python
  version do not matter; ``hash()`` (salted per process) is never used.
* SHA-256 of that text; its first 8 bytes, reduced modulo 27^10, are written as 10 characters of
  ``rand.SafeEncodeString``'s alphabet (``bcdfghjklmnpqrstvwxz2456789``: no vowels, so no words, and
  no characters that look alike). Upstream wrote a 32-bit FNV hash in decimal through that
  alphabet, which uses only 10 of its 27 characters; base-27 gives ~47 bits in the same 10
  characters, so two templates of one ModelInfer practically never share a revision name. A Python
  port cannot match upstream's Go dump byte for byte anyway (reference §5).

The format is an API: changing it changes every revision and rolls every group of every ModelInfer.
``tests/unit/modelinfer/test_revision.py`` pins one value so that cannot happen by accident.

ControllerRevisions (``apps/v1``, named ``<mi>-<revision>``) keep each revision's roles, so a group
that must stay on an old revision — protected by ``partition``, or not yet reached by the rollout —
is recreated from *its* template after a failure, not from the current one (upstream's bug, §7).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from aiplane.apimachinery import objects
from aiplane.controllers.modelinfer.naming import LABEL_NAME, LABEL_REVISION
from aiplane.controllers.modelinfer.objects import owner_reference, required_name

__all__ = [
    "HASH_LABEL",
    "REVISION_ALPHABET",
    "REVISION_LENGTH",
    "controller_revision",
    "controller_revision_name",
    "next_revision_number",
    "revision_hash",
    "revision_of",
    "roles_from_controller_revision",
    "with_current_replicas",
]

#: ``rand.SafeEncodeString``'s alphabet (k8s.io/apimachinery/pkg/util/rand).
REVISION_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"
REVISION_LENGTH: Final = 10
#: The label StatefulSets and DaemonSets put on their ControllerRevisions; set too, so generic
#: tooling that knows it finds the hash.
HASH_LABEL: Final = "controller.kubernetes.io/hash"


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_drop_nulls(v) for v in value]
    return value


def _encode(digest: bytes) -> str:
    n = int.from_bytes(digest[:8], "big") % len(REVISION_ALPHABET) ** REVISION_LENGTH
    chars = []
    for _ in range(REVISION_LENGTH):
        n, rem = divmod(n, len(REVISION_ALPHABET))
        chars.append(REVISION_ALPHABET[rem])
    return "".join(reversed(chars))


def revision_hash(roles: Sequence[Mapping[str, Any]]) -> str:
    """The revision of ``spec.template.roles``: 10 characters of :data:`REVISION_ALPHABET`.

    Invariant under every role's ``replicas``, under dict key order and under ``null`` members;
    sensitive to everything else, including the order of the roles (which is the order their pods
    are created in). Raises :class:`ValueError` for values JSON cannot carry (``NaN``).
    """
    stripped = []
    for role in roles:
        if not isinstance(role, Mapping):
            raise ValueError(f"a role must be an object, not {type(role).__name__}")
        stripped.append({k: v for k, v in role.items() if k != "replicas"})
    text = json.dumps(
        _drop_nulls(stripped), sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    )
    return _encode(hashlib.sha256(text.encode("ascii")).digest())


#: Unused ControllerRevisions kept for rollback archaeology (as a StatefulSet's revisionHistoryLimit).
REVISION_HISTORY_LIMIT: Final = 10


def controller_revision_name(mi_name: str, revision: str) -> str:
    """``<mi>-<revision>``."""
    return f"{mi_name}-{revision}"


def controller_revision(
    mi: Mapping[str, Any], revision: str, roles: Sequence[Mapping[str, Any]], number: int
) -> dict[str, Any]:
    """The ``apps/v1`` ControllerRevision that records ``roles`` as revision ``revision``.

    ``number`` is the ControllerRevision's ``revision`` field: the caller passes one more than the
    highest it has (:func:`next_revision_number`), so ``kubectl`` and humans can order revisions.
    ``data`` is ``{"spec": {"template": {"roles": [...]}}}``, the path the roles have in the
    ModelInfer (as a StatefulSet's revision holds a patch of its spec); the roles are stored as
    given, ``replicas`` included (see :func:`with_current_replicas` for reading them back).
    Labels: the ModelInfer name, the revision (ours and ``controller.kubernetes.io/hash``); a
    controller owner reference to the ModelInfer, so it is garbage-collected with it.
    """
    name = required_name(mi)
    if isinstance(number, bool) or not isinstance(number, int) or number < 0:
        raise ValueError(f"a revision number must be a non-negative integer, not {number!r}")
    body: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {"name": controller_revision_name(name, revision)},
        "data": {"spec": {"template": {"roles": copy.deepcopy([dict(r) for r in roles])}}},
        "revision": number,
    }
    namespace = objects.namespace(mi)
    if namespace:
        body["metadata"]["namespace"] = namespace
    body["metadata"]["labels"] = {LABEL_NAME: name, LABEL_REVISION: revision, HASH_LABEL: revision}
    body["metadata"]["ownerReferences"] = [owner_reference(mi)]
    return body


def roles_from_controller_revision(cr: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The roles a ControllerRevision built by :func:`controller_revision` holds (a deep copy).

    Raises :class:`ValueError` when ``data`` does not have that shape (someone else's revision, or
    one edited by hand), so the caller does not build pods from garbage.
    """
    data = cr.get("data")
    roles: Any = None
    if isinstance(data, Mapping):
        spec = data.get("spec")
        template = spec.get("template") if isinstance(spec, Mapping) else None
        roles = template.get("roles") if isinstance(template, Mapping) else None
    if not isinstance(roles, list) or not all(isinstance(r, Mapping) for r in roles):
        raise ValueError(
            f"ControllerRevision {objects.name(cr)!r}: data.spec.template.roles is not a list of roles"
        )
    return copy.deepcopy([dict(r) for r in roles])


def revision_of(cr: Mapping[str, Any]) -> str | None:
    """The revision hash a ControllerRevision records (its ``modelinfer.volcano.sh/revision`` label)."""
    value = objects.labels(cr).get(LABEL_REVISION)
    return value if isinstance(value, str) and value else None


def next_revision_number(revisions: Iterable[Mapping[str, Any]]) -> int:
    """One more than the highest ``revision`` among ``revisions`` (1 for none)."""
    numbers = [
        cr["revision"]
        for cr in revisions
        if isinstance(cr.get("revision"), int) and not isinstance(cr.get("revision"), bool)
    ]
    return max(numbers, default=0) + 1


def with_current_replicas(
    revision_roles: Sequence[Mapping[str, Any]], current_roles: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """An old revision's roles with each role's ``replicas`` taken from the current spec.

    ``replicas`` is not part of a revision, so scaling a role applies to groups on every revision:
    a group on revision A is built from A's templates but with as many role replicas as the spec
    now asks for. A role the current spec no longer has keeps the count recorded in the revision
    (its groups are outdated and will be replaced by the rollout). Returns new dicts; the role
    templates are shared with ``revision_roles`` (deep-copy before mutating).
    """
    current = {r.get("name"): r.get("replicas") for r in current_roles}
    out = []
    for role in revision_roles:
        merged = dict(role)
        replicas = current.get(role.get("name"))
        if isinstance(replicas, int) and not isinstance(replicas, bool):
            merged["replicas"] = replicas
        out.append(merged)
    return out
