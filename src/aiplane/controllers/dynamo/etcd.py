"""Removing a component's registrations from etcd when its DynamoComponentDeployment goes away.

Upstream's DCD finalizer deletes every key with the prefix ``/<dynamoNamespace>/components/<service>``
so clients stop discovering workers that no longer exist. We talk to etcd through its v3 JSON gateway
(``POST /v3/kv/deleterange``, keys base64-encoded) with aiohttp, which the operator already depends
on, rather than pulling in a gRPC client for one call. ``endpoints`` is upstream's ``ETCD_ENDPOINTS``
form: comma-separated ``host:port`` or ``http(s)://host:port``; they are tried in order, as a client
fails over between cluster members.

As upstream, the prefix has no trailing ``/``: a service named ``worker`` also removes the keys of a
service named ``worker-prefill`` in the same Dynamo namespace.
"""

from __future__ import annotations

import base64
from typing import Final

import aiohttp

__all__ = ["EtcdError", "component_prefix", "delete_component_keys", "prefix_range_end"]

#: How long one endpoint gets to answer before the next is tried.
REQUEST_TIMEOUT: Final = 5.0


class EtcdError(RuntimeError):
    """etcd could not be reached, or refused the request."""


def component_prefix(dynamo_namespace: str, service_name: str) -> str:
    """The key prefix under which a component's instances are registered."""
    if not dynamo_namespace:
        raise ValueError("spec.dynamoNamespace: needed to find the component's etcd keys")
    if not service_name:
        raise ValueError("spec.serviceName: needed to find the component's etcd keys")
    return f"/{dynamo_namespace}/components/{service_name}"


def prefix_range_end(prefix: bytes) -> bytes:
    """The end of the key range holding every key that starts with ``prefix`` (clientv3's
    ``GetPrefixRangeEnd``): the prefix with its last byte below 0xff incremented, trailing 0xff bytes
    dropped; ``\\x00`` (every key) when there is no such byte."""
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return b"\x00"


def _base_urls(endpoints: str) -> list[str]:
    urls = []
    for endpoint in (e.strip() for e in endpoints.split(",")):
        if endpoint:
            urls.append((endpoint if "://" in endpoint else f"http://{endpoint}").rstrip("/"))
    if not urls:
        raise ValueError(f"endpoints: no etcd endpoint in {endpoints!r}")
    return urls


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


async def delete_component_keys(endpoints: str, dynamo_namespace: str, service_name: str) -> None:
    """Deletes the etcd keys with prefix ``/<dynamo_namespace>/components/<service_name>``.

    Raises EtcdError when no endpoint answers (each one's failure is named) or when etcd refuses the
    request, ValueError when a name or the endpoint list is empty.
    """
    prefix = component_prefix(dynamo_namespace, service_name).encode()
    body = {"key": _b64(prefix), "range_end": _b64(prefix_range_end(prefix))}
    failures: list[str] = []
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        for base in _base_urls(endpoints):
            try:
                async with session.post(f"{base}/v3/kv/deleterange", json=body) as response:
                    if response.status == 200:
                        return
                    detail = (await response.text()).strip()[:200]
                    if response.status < 500:
                        raise EtcdError(
                            f"etcd at {base} refused deleting {prefix.decode()!r}: HTTP {response.status} {detail}"
                        )
                    failures.append(f"{base}: HTTP {response.status} {detail}")
            except (aiohttp.ClientError, TimeoutError) as err:
                failures.append(f"{base}: {type(err).__name__} {err}".rstrip())
    raise EtcdError(f"no etcd endpoint answered deleting {prefix.decode()!r}: {'; '.join(failures)}")
