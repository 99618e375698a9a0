"""A create refused because its namespace is being deleted is kube's NamespaceLifecycle admission (a 403
with the NamespaceTerminating cause), not a missing permission: the operator requeues it quietly."""

from __future__ import annotations

import json

from aiplane.kube.client import ApiError
from aiplane.kube.controller import expected_race
from aiplane.sim.apiserver.errors import forbidden

# What kube-apiserver v1.37 answered the operator (tests/real), trimmed to the fields read.
TERMINATING = {
    "kind": "Status",
    "apiVersion": "v1",
    "status": "Failure",
    "message": 'events "g.18ec" is forbidden: unable to create new content in namespace t because it is being '
    "terminated",
    "reason": "Forbidden",
    "details": {
        "name": "g.18ec",
        "kind": "events",
        "causes": [
            {
                "reason": "NamespaceTerminating",
                "message": "namespace t is being terminated",
                "field": "metadata.namespace",
            }
        ],
    },
    "code": 403,
}


def test_a_namespace_being_deleted_is_a_race_and_an_rbac_refusal_is_not() -> None:
    terminating = ApiError.from_response(403, json.dumps(TERMINATING).encode(), {})
    assert terminating.namespace_terminating and expected_race(terminating)
    rbac = forbidden("events", "", "g", 'User "u" cannot create resource "events" in API group ""')
    refused = ApiError.from_response(403, json.dumps(rbac.status()).encode(), {})
    assert not refused.namespace_terminating and not expected_race(refused)
