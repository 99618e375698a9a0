"""A minimal synchronous HTTPS client for the launcher's own few requests, as the cluster's admin.

The launcher waits on ``/readyz``, creates the fleet's Nodes and the CRDs, and reads Nodes back; the
standard library does that with the admin's client certificate, without an event loop or the generated
Kubernetes clients.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from typing import Any

from aiplane.realcluster.pki import ADMIN, Pki


class ApiError(Exception):
    """A request the API server answered with an error status."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"{status}: {body[:500]}")
        self.status = status


class Admin:
    """Requests to one API server with the admin identity."""

    def __init__(self, server: str, pki: Pki) -> None:
        self.server = server
        self._context = ssl.create_default_context(cafile=str(pki.path("ca.crt")))
        self._context.load_cert_chain(pki.path(f"{ADMIN.stem}.crt"), pki.path(f"{ADMIN.stem}.key"))

    def request(self, method: str, path: str, body: Any = None, timeout: float = 10.0) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, context=self._context, timeout=timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as error:
            raise ApiError(error.code, error.read().decode(errors="replace")) from None
        text = raw.decode()
        return json.loads(text) if text.startswith("{") else text

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def create(self, path: str, body: dict[str, Any]) -> Any:
        """POST ``body``; an object that already exists is left as it is (``cluster up`` may be re-run)."""
        try:
            return self.request("POST", path, body)
        except ApiError as error:
            if error.status != 409:
                raise
            return None
