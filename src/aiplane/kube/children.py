"""Writes of the objects a controller owns: the one executor every controller uses.

Creating, replacing and deleting a child is the same few rules whoever owns it:

* **create if absent**: AlreadyExists is not an error (an earlier reconcile or a lagging cache; the
  informer will show the object and the next reconcile decides on it);
* **replace if it differs**: only when the caller's "does it differ" check says so, guarded by the
  live object's resourceVersion (a conflict propagates: the runtime requeues);
* **apply**: server-side apply of the fields the controller owns (the caller's "does it differ"
  decides when); not guarded by a resourceVersion, so it is recorded as an unconditional write;
* **delete what we own**: with a uid precondition, so a new object of the same name is never deleted;
  NotFound (already gone) and Conflict (replaced by a new incarnation) are not errors;
* every write that succeeded is recorded in the controller's :class:`Expectations` under **one key
  scheme**, ``Kind/namespace/name`` (:func:`expectation_key`), so objects of two kinds that share a
  name never share a record.

Errors a decision depends on (a DCD the API server rejects, a ConfigMap that is missing) are the
caller's to catch; everything else propagates to the runtime, which requeues with backoff.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from aiplane.apimachinery import objects
from aiplane.kube.client import ApiError, KubeClient
from aiplane.kube.expectations import Expectations
from aiplane.kube.resources import Resource

__all__ = ["ChildWriter", "after_write", "expectation_key", "key_of"]

Obj = dict[str, Any]


def expectation_key(kind: str, namespace: str | None, name: str) -> str:
    """The one key of an object in :class:`Expectations`: ``Kind/namespace/name``."""
    return f"{kind}/{namespace or ''}/{name}"


def key_of(obj: Mapping[str, Any]) -> str:
    """:func:`expectation_key` of an object (its ``kind``: informers fill it in on cached objects)."""
    return expectation_key(str(obj.get("kind") or ""), objects.namespace(obj), objects.name(obj))


def after_write(live: Mapping[str, Any] | None, body: Mapping[str, Any]) -> Obj:
    """A child as a create or replace of ``body`` will leave it, for a decision that reads its own
    writes: a new object (generation 1, no status), or the live one with ``body``, its status kept and
    its generation moved on when its spec changed (the API server's rule for a spec write)."""
    after = copy.deepcopy(dict(body))
    metadata = after.setdefault("metadata", {})
    if live is None:
        metadata["generation"] = 1
        after.pop("status", None)
        return after
    generation = objects.generation(live) or 0
    metadata["generation"] = generation + (objects.spec(live) != objects.spec(after))
    if "status" in live:
        after["status"] = copy.deepcopy(live["status"])
    return after


class ChildWriter:
    """Create, replace and delete children as ``field_manager``, recording each write.

    ``expectations``: where the writes are recorded (``None``: the controller does not wait for its
    cache, its writes are guarded by "does it differ" alone). ``owner`` (an expectation key, see
    :func:`key_of`) groups the writes for :meth:`Expectations.pending` and ``forget_owner``.
    """

    def __init__(
        self, client: KubeClient, field_manager: str, expectations: Expectations | None = None
    ) -> None:
        self.client = client
        self.field_manager = field_manager
        self.expectations = expectations

    def _wrote(
        self,
        key: str,
        before: Mapping[str, Any] | None,
        after: Obj | None,
        owner: str | None,
        *,
        conditional: bool = True,
    ) -> None:
        if self.expectations is not None:
            self.expectations.wrote(key, before, after, conditional=conditional, owner=owner)

    async def create(
        self,
        res: Resource,
        body: Mapping[str, Any],
        *,
        namespace: str | None = None,
        owner: str | None = None,
    ) -> Obj | None:
        """Create ``body``; ``None`` when an object of that name exists already."""
        try:
            created = await self.client.create(
                res,
                body,
                namespace=namespace or objects.namespace(body) or None,
                field_manager=self.field_manager,
            )
        except ApiError as exc:
            if exc.already_exists:
                return None
            raise
        self._wrote(key_of(created), None, created, owner)
        return created

    async def replace(
        self, res: Resource, live: Mapping[str, Any], body: Mapping[str, Any], *, owner: str | None = None
    ) -> Obj:
        """Replace ``live`` with ``body`` (which carries the resourceVersion it was based on)."""
        written = await self.client.replace(res, body, field_manager=self.field_manager)
        self._wrote(key_of(written), live, written, owner)
        return written

    async def patch(
        self, res: Resource, live: Mapping[str, Any], body: Mapping[str, Any], *, owner: str | None = None
    ) -> Obj:
        """Merge-patch ``live`` with ``body`` (which carries the resourceVersion it was based on), for a
        child whose writer may patch but not update it."""
        written = await self.client.patch(
            res,
            objects.name(live),
            body,
            namespace=objects.namespace(live) or None,
            field_manager=self.field_manager,
        )
        self._wrote(key_of(written), live, written, owner)
        return written

    async def apply(
        self,
        res: Resource,
        live: Mapping[str, Any] | None,
        body: Mapping[str, Any],
        *,
        force: bool = True,
        owner: str | None = None,
    ) -> Obj:
        """Server-side apply ``body`` (creating it when absent) over ``live``, the object it was decided
        on (``None``: absent). Recorded unconditional: no resourceVersion guards it, so a version
        someone else wrote may lie between ``live`` and the object written."""
        written = await self.client.apply(res, body, field_manager=self.field_manager, force=force)
        self._wrote(key_of(written), live, written, owner, conditional=False)
        return written

    async def ensure(
        self,
        res: Resource,
        live: Mapping[str, Any] | None,
        desired: Mapping[str, Any],
        *,
        differs: Callable[[Mapping[str, Any], Mapping[str, Any]], bool],
        updated: Callable[[Mapping[str, Any], Mapping[str, Any]], Mapping[str, Any]],
        owner: str | None = None,
    ) -> Obj | None:
        """Create ``desired`` when ``live`` is absent, replace ``live`` with ``updated(live, desired)``
        when ``differs(live, desired)``; the object written, or ``None`` when nothing was."""
        if live is None:
            return await self.create(res, desired, owner=owner)
        if not differs(live, desired):
            return None
        return await self.replace(res, live, updated(live, desired), owner=owner)

    async def delete(
        self, res: Resource, obj: Mapping[str, Any], *, owner: str | None = None, record_gone: bool = False
    ) -> bool:
        """Delete ``obj`` (uid precondition); ``False`` when it was gone or replaced by a new object.

        The delete is recorded unconditional (a uid is not a resourceVersion: a version someone else
        wrote may lie between ``obj`` and the deletion). ``record_gone``: a child found gone (or
        replaced) is recorded as deleted too, for a controller that decides on :meth:`Expectations.view`
        and must stop being served it before its informer's delete event.
        """
        # The kind from the resource: a LIST's items carry none (informers fill it in, callers may not).
        key = expectation_key(res.kind, objects.namespace(obj), objects.name(obj))
        try:
            result = await self.client.delete(
                res,
                objects.name(obj),
                namespace=objects.namespace(obj) or None,
                preconditions={"uid": objects.uid(obj)},
            )
        except ApiError as exc:
            if exc.not_found or exc.conflict:
                if record_gone:
                    self._wrote(key, obj, None, owner, conditional=False)
                return False
            raise
        # A delete returns the object when finalizers keep it (now terminating), else a Status.
        terminating = result if result.get("kind") == res.kind else None
        self._wrote(key, obj, terminating, owner, conditional=False)
        return True
