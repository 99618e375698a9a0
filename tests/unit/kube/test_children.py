"""The child executor: the races every controller meets on its children are not errors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiplane.kube.children import ChildWriter, expectation_key
from aiplane.kube.expectations import Expectations
from aiplane.kube.resources import CONFIGMAPS, NAMESPACES
from aiplane.sim.client import InMemoryKubeClient

NS = "team-a"


def config_map(data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cm", "namespace": NS},
        "data": {"k": data},
    }


async def test_create_replace_delete_with_the_races_handled_and_each_write_recorded() -> None:
    client = InMemoryKubeClient.fresh(install_crds=False)
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    expectations = Expectations()
    writer = ChildWriter(client, "test-manager", expectations)
    key = expectation_key("ConfigMap", NS, "cm")

    created = await writer.create(CONFIGMAPS, config_map("a"), owner="Owner/team-a/o")
    assert created is not None and created["metadata"]["managedFields"][0]["manager"] == "test-manager"
    assert expectations.keys("Owner/team-a/o") == [key]
    assert await writer.create(CONFIGMAPS, config_map("b")) is None  # exists already: not an error

    def differs(live: Mapping[str, Any], want: Mapping[str, Any]) -> bool:
        return bool(live["data"] != want["data"])

    def updated(live: Mapping[str, Any], want: Mapping[str, Any]) -> dict[str, Any]:
        meta = {**want["metadata"], "resourceVersion": live["metadata"]["resourceVersion"]}
        return {**want, "metadata": meta}

    assert await writer.ensure(CONFIGMAPS, created, config_map("a"), differs=differs, updated=updated) is None
    replaced = await writer.ensure(CONFIGMAPS, created, config_map("c"), differs=differs, updated=updated)
    assert replaced is not None and replaced["data"] == {"k": "c"}
    viewed = expectations.view(key, created)  # the cache still shows the old version
    assert (
        viewed is not None
        and viewed["metadata"]["resourceVersion"] == replaced["metadata"]["resourceVersion"]
    )

    stranger = {**replaced, "metadata": {**replaced["metadata"], "uid": "another-incarnation"}}
    assert not await writer.delete(CONFIGMAPS, stranger)  # uid precondition: a 409, not an error
    assert await writer.delete(CONFIGMAPS, replaced)
    assert expectations.view(key, replaced) is None  # read your delete
    assert not await writer.delete(CONFIGMAPS, replaced)  # gone: a 404, not an error


async def test_applies_and_deletes_are_unconditional_and_a_child_found_gone_can_be_recorded() -> None:
    """An apply and a delete carry no resourceVersion: a version someone else wrote may lie between
    the object decided on and ours, so the view they leave is not exact (the PartitioningPlan admits
    nothing on it). A controller deciding on views records a child found gone as deleted."""
    client = InMemoryKubeClient.fresh(install_crds=False)
    await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    expectations = Expectations()
    writer = ChildWriter(client, "test-manager", expectations)
    key = expectation_key("ConfigMap", NS, "cm")

    applied = await writer.apply(CONFIGMAPS, None, config_map("a"))
    viewed = expectations.view(key, None)  # the cache does not show it yet
    assert (
        viewed is not None and viewed["metadata"]["resourceVersion"] == applied["metadata"]["resourceVersion"]
    )
    assert not expectations.exact(key)
    expectations.forget(key)
    assert await writer.delete(CONFIGMAPS, applied)
    assert expectations.view(key, applied) is None and not expectations.exact(key)

    expectations.forget(key)
    assert not await writer.delete(CONFIGMAPS, applied)  # a 404: nothing recorded by default
    assert expectations.view(key, applied) == applied
    assert not await writer.delete(CONFIGMAPS, applied, record_gone=True)
    assert expectations.view(key, applied) is None  # read "it is gone" before the delete event


def test_a_create_deleted_by_someone_else_before_the_cache_showed_it_is_not_waited_for() -> None:
    """kube's taint manager deletes a pod by name: it can delete the pod we just recreated under that name
    before our cache shows it. Its delete event ends the wait; an older incarnation's does not."""
    waits = Expectations(keep_objects=False)  # as the ModelInfer controller keeps them: versions only
    key = expectation_key("Pod", "team-a", "p")
    created = {"metadata": {"name": "p", "namespace": "team-a", "uid": "new", "resourceVersion": "9"}}
    waits.wrote(key, None, created, conditional=True, owner="mi")
    assert waits.pending("mi", lambda _: None)
    waits.deleted(key, {"metadata": {"name": "p", "namespace": "team-a", "uid": "old"}})
    assert waits.pending("mi", lambda _: None), "the old pod's delete event says nothing of the new one"
    waits.deleted(key, created)
    assert not waits.pending("mi", lambda _: None)
