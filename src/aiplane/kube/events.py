"""Kubernetes Events for transitions a human cares about (``kubectl describe`` shows them).

Events are best-effort and must stay cheap: a controller that hits the same condition every reconcile
must not write an Event every reconcile. So, as client-go's EventCorrelator does, an identical event
(same object, type, reason and message) within the aggregation window bumps ``count`` and
``lastTimestamp`` of the existing Event instead of creating one, and each object has a token bucket
(burst 25, one token per 5 minutes) beyond which events are dropped. Failures to record are logged,
never raised: an Event must not fail a reconcile. Callers must never put Secret values in messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog

from aiplane.kube.client import ApiError, KubeClient
from aiplane.kube.resources import EVENTS

log = structlog.get_logger("aiplane.events")

NORMAL = "Normal"
WARNING = "Warning"

#: client-go's defaults: events per object in a burst, refill interval, aggregation memory.
BURST = 25
REFILL_SECONDS = 300.0
AGGREGATE_WINDOW = 600.0
_CACHE_SIZE = 4096


@dataclass
class _Seen:
    name: str
    namespace: str
    count: int
    first: str
    at: float


@dataclass
class _Bucket:
    tokens: float
    at: float


def _ts(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    """Records core/v1 Events about objects on behalf of one component (a controller)."""

    def __init__(
        self,
        client: KubeClient,
        component: str,
        *,
        host: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.client = client
        self.component = component
        self.host = host or socket.gethostname()
        self._clock = clock
        self._now = now
        self._seen: OrderedDict[tuple[str, str, str, str], _Seen] = OrderedDict()
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()
        self.written = 0
        self.dropped = 0

    def emit(self, obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
        """Record an event without waiting (scheduled on the running loop)."""
        task = asyncio.get_running_loop().create_task(self.event(obj, type_, reason, message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def flush(self) -> None:
        """Wait for events scheduled with :meth:`emit` (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def _allow(self, uid: str) -> bool:
        now = self._clock()
        bucket = self._buckets.get(uid)
        if bucket is None:
            bucket = self._buckets[uid] = _Bucket(float(BURST), now)
            if len(self._buckets) > _CACHE_SIZE:
                self._buckets.popitem(last=False)
        bucket.tokens = min(float(BURST), bucket.tokens + (now - bucket.at) / REFILL_SECONDS)
        bucket.at = now
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        return True

    async def event(self, obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
        meta = obj.get("metadata", {})
        uid = str(meta.get("uid", ""))
        key = (uid, type_, reason, message)
        now = self._now()
        seen = self._seen.get(key)
        if seen is not None and self._clock() - seen.at > AGGREGATE_WINDOW:
            seen = None
        if not self._allow(uid):
            self.dropped += 1
            return
        namespace = meta.get("namespace") or "default"
        try:
            if seen is not None:
                seen.count += 1
                seen.at = self._clock()
                self._seen.move_to_end(key)
                patch = {"count": seen.count, "lastTimestamp": _ts(now)}
                await self.client.patch(
                    EVENTS, seen.name, patch, namespace=seen.namespace, patch_type="merge"
                )
            else:
                body = self._event_body(obj, namespace, type_, reason, message, now)
                created = await self.client.create(EVENTS, body, namespace=namespace)
                self._seen[key] = _Seen(
                    created["metadata"]["name"], namespace, 1, body["firstTimestamp"], self._clock()
                )
                if len(self._seen) > _CACHE_SIZE:
                    self._seen.popitem(last=False)
            self.written += 1
        except ApiError as exc:
            if seen is not None and exc.not_found:
                # The aggregated Event expired or was deleted: start a new one next time.
                with contextlib.suppress(KeyError):
                    del self._seen[key]
            # An Event in a namespace being deleted is refused (403) and would go with it anyway.
            report = log.debug if exc.namespace_terminating else log.warning
            report("could not record event", reason=reason, object=meta.get("name"), error=exc.message)

    def _event_body(
        self, obj: dict[str, Any], namespace: str, type_: str, reason: str, message: str, now: datetime
    ) -> dict[str, Any]:
        meta = obj.get("metadata", {})
        involved = {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "name": meta.get("name"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        }
        if meta.get("namespace"):
            involved["namespace"] = meta["namespace"]
        stamp = _ts(now)
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{meta.get('name')}.{time.time_ns():x}", "namespace": namespace},
            "involvedObject": {k: v for k, v in involved.items() if v is not None},
            "reason": reason,
            "message": message[:1024],
            "type": type_,
            "source": {"component": self.component, "host": self.host},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "reportingComponent": self.component,
            "reportingInstance": self.host,
        }
