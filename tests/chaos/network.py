"""Network faults between the operator and the API server, through ``tests/chaos/proxy.py``.

The operator's kubeconfig points at the proxy; the test's own client and the checkers stay in
process, so only the operator's view of the cluster suffers.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any

NETWORK_FAULTS = ("blackhole", "outage", "reset", "latency")


@dataclass
class NetworkChaos:
    """What the monkey does for the network kinds; ``proxy`` is a started ``ChaosProxy``."""

    proxy: Any
    outage_for: tuple[float, float] = (1.0, 4.0)
    latency_for: tuple[float, float] = (1.0, 4.0)

    async def inject(self, kind: str, rng: random.Random) -> None:
        proxy = self.proxy
        if kind == "blackhole":
            # Half-open: the open connections (watches, pooled keep-alives) go silent, new ones work.
            proxy.black_hole()
        elif kind == "outage":
            proxy.black_hole(new_connections=True)
            await asyncio.sleep(rng.uniform(*self.outage_for))
            proxy.heal()
        elif kind == "reset":
            proxy.reset()
        elif kind == "latency":
            proxy.latency = rng.uniform(0.05, 0.3)
            await asyncio.sleep(rng.uniform(*self.latency_for))
            proxy.latency = 0.0
        else:
            raise ValueError(f"unknown network fault {kind!r}")


async def start_proxy(url: str) -> Any:
    """A ``ChaosProxy`` in front of the cluster at ``url`` (https://127.0.0.1:PORT)."""
    from tests.chaos.proxy import ChaosProxy  # the live branch's proxy

    host, port = url.removeprefix("https://").rsplit(":", 1)
    proxy = ChaosProxy(host, int(port))
    await proxy.start()
    return proxy
