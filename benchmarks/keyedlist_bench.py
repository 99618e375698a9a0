"""Writes to an object with a large keyed list (a Pod with thousands of env vars; a benchmark, not a test).

Every write validates the new object against the old one, correlating list-map items by key
(``x-kubernetes-list-type: map``), and recomputes managedFields. With a scan of the old list per new
item, one Pod with 3,000 env vars made each write take seconds and stalled every other client of the
embedded API server meanwhile (10,000: about a minute). Measured here over HTTP against an in-process
``ApiServer``, once per write kind, in seconds per write:

- ``status``: merge-PATCH of ``/status`` (what kubelet-like writers do),
- ``label``: strategic-merge PATCH of a label,
- ``put``: GET + PUT of the whole object,
- ``apply``: server-side apply of the whole Pod (force), then ``status`` again (managedFields now list
  every env var for the applier).

Figures (2 shared cores, seconds per write; before → after, docs/sim.md): 3,000 env vars: status
5.2 → 0.21, label 6.9 → 0.23, PUT 4.7 → 0.19, apply 5.0 → 0.36; 10,000: status 53 → 0.81, label
83 → 0.81, PUT 50 → 0.84, apply 67 → 1.6.

Usage: ``.venv/bin/python benchmarks/keyedlist_bench.py [--env 3000 10000] [--src DIR]``; ``--src`` runs
another checkout's ``src`` (e.g. ``git archive <commit> src | tar -x -C /tmp/old``) for a before/after.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import orjson

NS = "bench"


async def measure(env: int) -> dict[str, float]:
    """Seconds per write for a Pod with ``env`` env vars."""
    # Imported here: --src chooses which checkout of aiplane this run measures.
    from aiohttp.test_utils import TestClient, TestServer  # noqa: PLC0415

    from aiplane.sim.apiserver.server import ApiServer  # noqa: PLC0415

    server = ApiServer()
    server.api.create(server.api.resource("v1", "Namespace"), None, {"metadata": {"name": NS}})
    pods = f"/api/v1/namespaces/{NS}/pods"
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "containers": [
                {"name": "c", "image": "x", "env": [{"name": f"E{i}", "value": str(i)} for i in range(env)]}
            ]
        },
    }
    out: dict[str, float] = {}
    headers = {"Authorization": f"Bearer {server.token}"}
    async with TestClient(TestServer(server.app()), headers=headers) as http:

        async def timed(name: str, method: str, path: str, body: Any, ctype: str) -> None:
            start = time.perf_counter()
            resp = await http.request(method, path, data=orjson.dumps(body), headers={"Content-Type": ctype})
            out[name] = time.perf_counter() - start
            assert resp.status < 300, (name, resp.status, await resp.text())

        await timed("create", "POST", pods, pod, "application/json")
        merge, strategic = "application/merge-patch+json", "application/strategic-merge-patch+json"
        await timed("status", "PATCH", f"{pods}/p/status", {"status": {"message": "m"}}, merge)
        await timed("label", "PATCH", f"{pods}/p", {"metadata": {"labels": {"a": "1"}}}, strategic)
        got = await (await http.get(f"{pods}/p")).json()
        got["metadata"]["labels"]["b"] = "2"
        await timed("put", "PUT", f"{pods}/p", got, "application/json")
        pod["metadata"]["labels"] = {"c": "3"}
        apply = "application/apply-patch+yaml"
        await timed("apply", "PATCH", f"{pods}/p?fieldManager=bench&force=true", pod, apply)
        await timed("status after apply", "PATCH", f"{pods}/p/status", {"status": {"message": "n"}}, merge)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--env", type=int, nargs="+", default=[3000, 10000], help="env vars in the Pod")
    parser.add_argument("--src", type=Path, default=Path(__file__).resolve().parents[1] / "src")
    args = parser.parse_args()
    sys.path.insert(0, str(args.src.resolve()))
    print(
        f"{'env vars':>8}  "
        + "  ".join(f"{k:>18}" for k in ("status", "label", "put", "apply"))
        + "  status after apply"
    )
    for env in args.env:
        t = asyncio.run(measure(env))
        cells = "  ".join(f"{t[k]:>17.2f}s" for k in ("status", "label", "put", "apply"))
        print(f"{env:>8}  {cells}  {t['status after apply']:>17.2f}s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
