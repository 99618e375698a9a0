"""``aiplane demo --real``: the demo's sections on a real control plane instead of the embedded cluster.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (the fleet's nodes) are started
from the binaries ``scripts/build-kube`` builds (:mod:`aiplane.realcluster`); the simulated hardware (the
AMD GPU operator's DCM and device plugin, the GPU metrics exporter) and every controller then run in this
process as API clients over HTTPS, each with its own User-Agent. Nothing reaches into a server's store:

* the live views follow the cluster through watches (:class:`WatchFeed`) — per resource, every event in
  resourceVersion order, which is what kube promises (not one order across resources, as the embedded
  store's listener sees);
* the operator's writes are counted on its client (:class:`WriteCounter`, the observer
  ``rest_client_requests_total`` is fed from), so every section's "zero writes once converged" holds
  the same meaning.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiplane.kube.client import ApiError, HttpKubeClient
from aiplane.kube.resources import Resource
from aiplane.realcluster import ClusterError
from aiplane.sim.apiserver.store import Event

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
Listener = Callable[[Event], None]


class WriteCounter:
    """A :data:`aiplane.kube.client.RequestObserver` counting the write requests a client sent (what
    the embedded cluster's in-memory client counts for the demo's summaries)."""

    def __init__(self) -> None:
        self.writes = 0

    def __call__(self, method: str, status: int, host: str) -> None:
        if method in WRITE_METHODS:
            self.writes += 1

    def reset_counts(self) -> None:
        self.writes = 0


def storage_key(res: Resource) -> str:
    """The embedded store's key for ``res`` ("group/plural"; "/plural" for the core group): what the
    demo's views match events on."""
    return f"{res.group}/{res.plural}"


class WatchFeed:
    """Calls subscribed listeners with every event of the watched resources, as the embedded store's
    ``subscribe`` does; a resource the cluster does not serve is left out (see :meth:`served`)."""

    def __init__(self, client: HttpKubeClient) -> None:
        self._client = client
        self._listeners: list[Listener] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._served: set[str] = set()
        self._synced: dict[str, asyncio.Event] = {}

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def unsubscribe(self, listener: Listener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def served(self, res: Resource) -> bool:
        return storage_key(res) in self._served

    async def start(self, resources: list[Resource], timeout: float = 60.0) -> None:
        """Watch ``resources`` (those served), from now on; returns once every watch is established."""
        for res in resources:
            if not await self._client.served(res):
                continue
            key = storage_key(res)
            self._served.add(key)
            self._synced[key] = asyncio.Event()
            self._tasks.append(asyncio.create_task(self._follow(res, key)))
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in self._synced.values())), timeout)

    async def _follow(self, res: Resource, key: str) -> None:
        """List, then watch from the list's resourceVersion; list again when the watch expires."""
        while True:
            try:
                listed = await self._client.list(res)
                version = str(listed["metadata"]["resourceVersion"])
                self._synced[key].set()
                async for event in self._client.watch(res, resource_version=version, timeout_seconds=300):
                    version = self._dispatch(key, event) or version
            except ApiError as exc:
                if not exc.gone and not exc.transient:
                    raise
            await asyncio.sleep(0.1)

    def _dispatch(self, key: str, raw: dict[str, object]) -> str | None:
        kind, obj = raw.get("type"), raw.get("object")
        if not isinstance(obj, dict):
            return None
        version = str(obj.get("metadata", {}).get("resourceVersion", ""))
        if kind == "ERROR":  # 410 Gone when the watch's resourceVersion is too old: list again
            code = obj.get("code")
            raise ApiError(
                code if isinstance(code, int) else 500, str(obj.get("reason")), str(obj.get("message")), obj
            )
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            return version or None  # BOOKMARK: a newer resourceVersion to resume from
        event = Event(str(kind), key, obj, None, int(version) if version.isdigit() else 0)
        for listener in list(self._listeners):
            listener(event)
        return version

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, ApiError, OSError):
                await task


class Listed:
    """The objects of some resources as one list each returned them, keyed as the embedded store keys them
    (:class:`aiplane.demo.common.StoreView`): what a section reads once before it follows the changes."""

    def __init__(self, objects_by_key: dict[str, list[dict[str, Any]]]) -> None:
        self._by_key = objects_by_key

    @classmethod
    async def of(cls, client: HttpKubeClient, resources: list[Resource]) -> Listed:
        listed = {}
        for res in resources:
            if await client.served(res):
                listed[storage_key(res)] = list((await client.list(res))["items"])
        return cls(listed)

    def items(self, key: str, namespace: str | None = None) -> list[dict[str, Any]]:
        found = [
            o
            for o in self._by_key.get(key, [])
            if namespace is None or o["metadata"].get("namespace") == namespace
        ]
        return sorted(found, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))

    def get(self, key: str, namespace: str, name: str) -> dict[str, Any] | None:
        return next((o for o in self.items(key, namespace or None) if o["metadata"]["name"] == name), None)


def _built(script: Path) -> Path:
    done = subprocess.run([str(script)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ClusterError(f"{script.relative_to(script.parents[1])} failed:\n{done.stderr[-3000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def neighbours_dir(repository: Path | None = None) -> Path:
    """The upstream neighbours (the Coscheduling gang scheduler, Kueue, LeaderWorkerSet):
    ``$AIPLANE_NEIGHBOURS_DIR``, else built (or found cached) by the checkout's ``scripts/build-neighbours``;
    :class:`ClusterError` when neither is at hand."""
    value = os.environ.get("AIPLANE_NEIGHBOURS_DIR")
    if value:
        return Path(value)
    script = (repository or Path.cwd()) / "scripts" / "build-neighbours"
    if not script.is_file() or shutil.which("bash") is None:
        raise ClusterError(
            "the gang scheduler and Kueue are built by scripts/build-neighbours: run the demo from the checkout "
            "(scripts/demo --real), or set AIPLANE_NEIGHBOURS_DIR to the directory it prints"
        )
    return _built(script)


def kube_bin_dir(repository: Path | None = None) -> Path:
    """The control plane's binaries: ``$AIPLANE_KUBE_BIN``, else built (or found cached) by the
    checkout's ``scripts/build-kube``; :class:`ClusterError` when neither is at hand."""
    value = os.environ.get("AIPLANE_KUBE_BIN")
    if value:
        return Path(value)
    root = repository or Path.cwd()
    script = root / "scripts" / "build-kube"
    if not script.is_file() or shutil.which("bash") is None:
        raise ClusterError(
            "the real control plane is built by scripts/build-kube: run the demo from the checkout "
            "(scripts/demo --real), or set AIPLANE_KUBE_BIN to the directory scripts/build-kube prints"
        )
    return _built(script)
