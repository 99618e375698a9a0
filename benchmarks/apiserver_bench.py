"""Throughput of the embedded API server, measured like a client sees it (not a test).

Starts ``aiplane sim`` in its own process (HTTPS, bearer token, exactly what kubectl talks to), then,
from one asyncio client process with a pool of keep-alive connections:

* GET of one ConfigMap, many in flight: GETs/s (target >= 2,000/s on 2 cores)
* merge-PATCH of ConfigMaps (PUT if the server does not do PATCH yet): writes/s (target >= 1,000/s)
* LIST of 100 ConfigMaps: LISTs/s
* watch fan-out: 20 watchers, 10,000 events; checks that every watcher got every event once, in
  order, and reports the delivery rate (events received by all watchers per second)

``--target real`` measures kube-apiserver instead (the real control plane of ``scripts/build-kube``:
etcd, kube-apiserver v1.37, the controller-manager, the scheduler and kwok, on 127.0.0.1; the admin
client certificate, which API Priority and Fairness exempts as the sim has no such limit), and
``--real`` (= ``--target both``) runs both, one after the other, with the same client and load, and
prints them side by side with each server's CPU seconds over its run (the sim's process; kube-apiserver
plus etcd).

Usage: ``.venv/bin/python benchmarks/apiserver_bench.py [--seconds 5] [--concurrency 32] [--real]``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import os
import ssl
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import simproc
from benchmarks.procstats import cpu_seconds

NS = "bench"
OBJECTS = 100


@dataclass
class Target:
    url: str
    token: str | None
    ssl: ssl.SSLContext


def target(kubeconfig: Path) -> Target:
    """Server, credentials (a bearer token, or a client certificate) and CA of a kubeconfig, for a plain
    aiohttp client."""
    config = yaml.safe_load(kubeconfig.read_text())
    cluster = config["clusters"][0]["cluster"]
    user = config["users"][0]["user"]
    context = ssl.create_default_context(
        cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
    )
    if "client-certificate-data" in user:
        # ssl loads a certificate chain only from files.
        with tempfile.TemporaryDirectory(prefix="aiplane-bench-cert-") as tmp:
            cert, key = Path(tmp) / "client.crt", Path(tmp) / "client.key"
            cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
            key.write_bytes(base64.b64decode(user["client-key-data"]))
            context.load_cert_chain(cert, key)
    return Target(cluster["server"], user.get("token"), context)


def session(target: Target, connections: int) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(limit=connections, ssl=target.ssl)
    headers = {"Accept": "application/json"}
    if target.token:
        headers["Authorization"] = f"Bearer {target.token}"
    return aiohttp.ClientSession(
        connector=connector, headers=headers, timeout=aiohttp.ClientTimeout(total=None, sock_read=120)
    )


def cm_path(name: str = "") -> str:
    base = f"/api/v1/namespaces/{NS}/configmaps"
    return f"{base}/{name}" if name else base


async def setup(http: aiohttp.ClientSession, url: str) -> None:
    async with http.post(f"{url}/api/v1/namespaces", json={"metadata": {"name": NS}}) as resp:
        assert resp.status in (201, 409), await resp.text()
    for i in range(OBJECTS):
        body = {"metadata": {"name": f"cm{i}", "labels": {"app": "bench"}}, "data": {"k": "v", "n": str(i)}}
        async with http.post(f"{url}{cm_path()}", json=body) as resp:
            assert resp.status in (201, 409), await resp.text()


async def run_for(seconds: float, concurrency: int, one: Any) -> tuple[int, float]:
    """Call ``one(i)`` from ``concurrency`` tasks for ``seconds``; (requests done, elapsed)."""
    stop = time.perf_counter() + seconds
    done = 0

    async def worker(w: int) -> None:
        nonlocal done
        i = w
        while time.perf_counter() < stop:
            await one(i)
            done += 1
            i += concurrency

    started = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    return done, time.perf_counter() - started


async def detect_patch(http: aiohttp.ClientSession, url: str) -> bool:
    headers = {"Content-Type": "application/merge-patch+json"}
    async with http.patch(f"{url}{cm_path('cm0')}", data=b'{"data":{"probe":"1"}}', headers=headers) as resp:
        await resp.read()
        return resp.status == 200


async def fan_out(
    http: aiohttp.ClientSession, url: str, watchers: int, events: int, concurrency: int, patch: bool
) -> dict[str, Any]:
    async with http.get(f"{url}{cm_path()}", params={"labelSelector": "app=bench"}) as resp:
        start_rv = (await resp.json())["metadata"]["resourceVersion"]
    received: list[list[int]] = [[] for _ in range(watchers)]
    all_done = asyncio.Event()
    finished = 0
    last_seen = [0.0] * watchers

    async def watcher(w: int) -> None:
        nonlocal finished
        # Only the benchmark's objects: kube-controller-manager publishes kube-root-ca.crt in every namespace.
        params = {
            "watch": "1",
            "resourceVersion": start_rv,
            "timeoutSeconds": "600",
            "labelSelector": "app=bench",
        }
        async with http.get(f"{url}{cm_path()}", params=params) as resp:
            assert resp.status == 200
            async for line in resp.content:
                event = orjson.loads(line)
                received[w].append(int(event["object"]["metadata"]["resourceVersion"]))
                if len(received[w]) == events:
                    last_seen[w] = time.perf_counter()
                    finished += 1
                    if finished == watchers:
                        all_done.set()
                    return

    tasks = [asyncio.create_task(watcher(w)) for w in range(watchers)]
    await asyncio.sleep(0.5)  # let every watch be established before the first write
    written: list[int] = []
    headers = {"Content-Type": "application/merge-patch+json"}

    async def write(i: int) -> None:
        name = f"cm{i % OBJECTS}"
        if patch:
            body = orjson.dumps({"data": {"n": str(i)}})
            async with http.patch(f"{url}{cm_path(name)}", data=body, headers=headers) as resp:
                obj = await resp.json()
        else:
            body = orjson.dumps(
                {"metadata": {"name": name, "labels": {"app": "bench"}}, "data": {"k": "v", "n": str(i)}}
            )
            async with http.put(
                f"{url}{cm_path(name)}", data=body, headers={"Content-Type": "application/json"}
            ) as resp:
                obj = await resp.json()
        written.append(int(obj["metadata"]["resourceVersion"]))

    started = time.perf_counter()
    sem = asyncio.Semaphore(concurrency)

    async def limited(i: int) -> None:
        async with sem:
            await write(i)

    await asyncio.gather(*(limited(i) for i in range(events)))
    writes_done = time.perf_counter()
    await asyncio.wait_for(all_done.wait(), 300)
    elapsed = max(last_seen) - started
    for task in tasks:
        task.cancel()
    expected = sorted(written)
    complete = all(r == expected for r in received)
    return {
        "watchers": watchers,
        "events": events,
        "write_seconds": writes_done - started,
        "delivery_seconds": elapsed,
        "lag_seconds": max(last_seen) - writes_done,
        "lossless_in_order": complete,
        "deliveries_per_s": watchers * events / elapsed,
    }


async def bench(
    target: Target, seconds: float, concurrency: int, watchers: int, events: int
) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    url = target.url
    async with session(target, concurrency + watchers + 4) as http:
        await setup(http, url)

        async def get(i: int) -> None:
            async with http.get(f"{url}{cm_path(f'cm{i % OBJECTS}')}") as resp:
                await resp.read()
                assert resp.status == 200

        n, dt = await run_for(seconds, concurrency, get)
        rows.append(("GET configmap", f"{n / dt:,.0f}/s", ">= 2,000/s"))

        patch = await detect_patch(http, url)
        headers = {"Content-Type": "application/merge-patch+json"}

        async def write(i: int) -> None:
            name = f"cm{i % OBJECTS}"
            if patch:
                body = orjson.dumps({"data": {"n": str(i)}})
                async with http.patch(f"{url}{cm_path(name)}", data=body, headers=headers) as resp:
                    await resp.read()
                    assert resp.status == 200
            else:
                body = orjson.dumps(
                    {"metadata": {"name": name, "labels": {"app": "bench"}}, "data": {"k": "v", "n": str(i)}}
                )
                async with http.put(
                    f"{url}{cm_path(name)}", data=body, headers={"Content-Type": "application/json"}
                ) as resp:
                    await resp.read()
                    assert resp.status == 200

        n, dt = await run_for(seconds, concurrency, write)
        label = "PATCH (merge) configmap" if patch else "PUT configmap (no PATCH yet)"
        rows.append((label, f"{n / dt:,.0f}/s", ">= 1,000/s"))

        async def lst(i: int) -> None:
            async with http.get(f"{url}{cm_path()}", params={"labelSelector": "app=bench"}) as resp:
                await resp.read()
                assert resp.status == 200

        n, dt = await run_for(seconds, max(4, concurrency // 4), lst)
        rows.append((f"LIST {OBJECTS} configmaps", f"{n / dt:,.0f}/s", ""))

        result = await fan_out(http, url, watchers, events, concurrency, patch)
        rows.append(
            (
                f"watch fan-out {watchers}x{events:,}",
                f"{result['deliveries_per_s']:,.0f} events/s",
                "lossless, in order" if result["lossless_in_order"] else "LOST OR REORDERED EVENTS",
            )
        )
        rows.append(("  writes during fan-out", f"{events / result['write_seconds']:,.0f}/s", ""))
        rows.append(("  last delivery after", f"{result['delivery_seconds']:.2f} s", ""))
        rows.append(("  ... and after the last write", f"{result['lag_seconds'] * 1000:.0f} ms", ""))
    return rows


@dataclass
class Server:
    """A server under test: its kubeconfig and the processes whose CPU is its cost."""

    name: str
    kubeconfig: Path
    pids: list[int]


@contextlib.contextmanager
def server(kind: str) -> Iterator[Server]:
    if kind == "sim":
        with simproc.sim_running("aiplane-bench-", start_timeout=60) as sim:
            yield Server("aiplane sim", sim.kubeconfig, [sim.pid])
    else:
        with simproc.real_running("aiplane-bench-real-") as cluster:
            pids = [cluster.pids["kube-apiserver"], cluster.pids["etcd"]]
            yield Server("kube-apiserver v1.37 + etcd", cluster.kubeconfig, pids)


def measure(kind: str, args: argparse.Namespace) -> tuple[str, list[tuple[str, str, str]], float]:
    """(server name, rows, server CPU seconds over the measurement) of one server."""
    with server(kind) as srv:
        cpu0 = sum(cpu_seconds(pid) for pid in srv.pids)
        rows = asyncio.run(
            bench(target(srv.kubeconfig), args.seconds, args.concurrency, args.watchers, args.events)
        )
        return srv.name, rows, sum(cpu_seconds(pid) for pid in srv.pids) - cpu0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each rate measurement")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight")
    parser.add_argument("--watchers", type=int, default=20)
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument(
        "--target", choices=["sim", "real", "both"], default="sim", help="which API server (default: sim)"
    )
    parser.add_argument("--real", action="store_true", help="both servers side by side (--target both)")
    args = parser.parse_args()
    kinds = ["sim", "real"] if args.real or args.target == "both" else [args.target]
    results = [measure(kind, args) for kind in kinds]
    width = max(len(r[0]) for r in results[0][1])
    print(f"{os.cpu_count()} cores, {args.concurrency} requests in flight, HTTPS, one client process")
    header = "".join(f"  {name:>28}" for name, _, _ in results)
    print(f"{'measure':<{width}}{header}  target/check")
    for i, (label, _, _) in enumerate(results[0][1]):
        values = "".join(f"  {rows[i][1]:>28}" for _, rows, _ in results)
        notes = " | ".join(dict.fromkeys(rows[i][2] for _, rows, _ in results))
        print(f"{label:<{width}}{values}  {notes}")
    cpus = "".join(f"  {f'{cpu:.1f} s':>28}" for _, _, cpu in results)
    print(f"{'server CPU over the run':<{width}}{cpus}")
    return 0 if all("LOST" not in r[2] for _, rows, _ in results for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
