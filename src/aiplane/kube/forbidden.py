"""Telling the operator's user which permission its role lacks, when the API server refuses (403).

A 403 on a cluster is almost always a misconfigured role (a chart edited by hand, a ClusterRole from an
older release, ``--controllers`` widened without the matching rules). Retrying cannot fix it and
logging ``403 Forbidden`` at every retry buries the one fact the reader needs: which verb on which
resource, in which namespace. kube-apiserver says exactly that in the Status message
(``responsewriters.forbiddenMessage``); :func:`missing_permission` reads it back, and
:class:`ReportLimiter` keeps the report to once per interval per place and permission, however fast the
(capped, exponential) retries come.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from aiplane.kube.client import ApiError

__all__ = ["REPORT_INTERVAL", "MissingPermission", "ReportLimiter", "missing_permission"]

#: How often one place reports the same missing permission (seconds).
REPORT_INTERVAL: Final = 60.0

# forbiddenMessage in k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go.
_RESOURCE = re.compile(
    r'User "(?P<user>[^"]*)" cannot (?P<verb>\S+) resource "(?P<resource>[^"]*)" in API group '
    r'"(?P<group>[^"]*)"(?: in the namespace "(?P<namespace>[^"]*)"| at the cluster scope)'
)
_PATH = re.compile(r'User "(?P<user>[^"]*)" cannot (?P<verb>\S+) path "(?P<path>[^"]*)"')


@dataclass(frozen=True)
class MissingPermission:
    """What a 403 says the requester may not do: ``verb`` on ``resource`` (``plural/subresource``) of
    ``group`` in ``namespace`` ("" = cluster scope), or on the non-resource ``path``."""

    user: str
    verb: str
    group: str = ""
    resource: str = ""
    namespace: str = ""
    path: str = ""

    def __str__(self) -> str:
        if self.path:
            return f'{self.verb} on the non-resource URL "{self.path}"'
        where = f'in namespace "{self.namespace}"' if self.namespace else "at the cluster scope"
        return f'{self.verb} on "{self.resource}" in API group "{self.group}" {where}'

    def rule(self) -> str:
        """The RBAC rule that would allow it, as a ClusterRole/Role rule reads."""
        if self.path:
            return f'nonResourceURLs: ["{self.path}"], verbs: ["{self.verb}"]'
        return f'apiGroups: ["{self.group}"], resources: ["{self.resource}"], verbs: ["{self.verb}"]'


def missing_permission(err: BaseException) -> MissingPermission | None:
    """The permission a 403 names, or ``None`` for anything else. A 403 whose message is not kube's
    (an admission webhook's, a proxy's) still yields what its ``details`` say (kind = resource)."""
    if not isinstance(err, ApiError) or err.status != 403:
        return None
    match = _RESOURCE.search(err.message)
    if match:
        return MissingPermission(
            match["user"], match["verb"], match["group"], match["resource"], match["namespace"] or ""
        )
    match = _PATH.search(err.message)
    if match:
        return MissingPermission(match["user"], match["verb"], path=match["path"])
    details = err.body.get("details") or {}
    return MissingPermission("", "?", str(details.get("group") or ""), str(details.get("kind") or ""))


class ReportLimiter:
    """Lets one report per key through per ``interval`` (monotonic seconds from ``clock``)."""

    def __init__(
        self, interval: float = REPORT_INTERVAL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.interval = interval
        self._clock = clock
        self._last: dict[object, float] = {}

    def allow(self, key: object) -> bool:
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self.interval:
            return False
        if len(self._last) > 1024:
            self._last.clear()
        self._last[key] = now
        return True
