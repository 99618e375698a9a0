"""Client configuration for the common cases without importing kubernetes_asyncio (memory).

``kubernetes_asyncio.client`` imports its whole generated API (about 960 modules) just to be imported,
and its config loaders import it: 37 MB of the operator's resident memory, for reading a YAML file.
So the two configurations nearly every deployment uses are read here:

* **in-cluster** (:func:`in_cluster`): ``https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT``,
  the ServiceAccount's CA file, and its token file re-read every minute (projected tokens rotate), as
  client-go's ``rest.InClusterConfig`` and kubernetes_asyncio's loader do;
* **a kubeconfig** (:func:`from_kubeconfig`) whose context's user authenticates with ``token`` /
  ``tokenFile`` and/or a client certificate (``client-certificate[-data]``, ``client-key[-data]``), or
  not at all, against a cluster with ``server``, ``certificate-authority[-data]`` and
  ``insecure-skip-tls-verify``: what ``kind``, ``k3s``, service-account kubeconfigs and ``aiplane sim``
  write.

Anything else — exec credential plugins, auth providers (gcp, oidc, azure), basic auth, a ``KUBECONFIG``
list of files to merge, fields this reader does not know — returns ``None`` from
:func:`from_kubeconfig`, and the caller uses kubernetes_asyncio's loader, which implements them (and
their refresh). The reader is kubernetes_asyncio's ``KubeConfigLoader`` for these fields: ``-data``
(base64) wins over the file, relative paths are relative to the kubeconfig's directory, ``token`` wins
over ``tokenFile`` (read once), a trailing ``/`` of ``server`` is dropped, TLS files are only read for
an ``https`` server, and ``-data`` contents are written to private temporary files (removed at exit),
because ``ssl.SSLContext.load_cert_chain`` reads files.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import os
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

__all__ = ["ClientConfiguration", "from_kubeconfig", "in_cluster", "kubeconfig_path"]

SERVICE_ACCOUNT_DIR: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount")
#: How often the in-cluster token file is read again (client-go and kubernetes_asyncio: a minute).
TOKEN_REFRESH_SECONDS: Final = 60.0
#: The user fields this reader implements; a user with any other field goes to kubernetes_asyncio.
_USER_FIELDS: Final = frozenset(
    {"token", "tokenFile", "client-certificate", "client-certificate-data", "client-key", "client-key-data"}
)
#: The cluster fields it implements (or, as kubernetes_asyncio, ignores: ``tls-server-name``,
#: ``proxy-url``, ``extensions``, ``disable-compression`` are not used by the client either way).
_CLUSTER_FIELDS: Final = frozenset(
    {
        "server",
        "certificate-authority",
        "certificate-authority-data",
        "insecure-skip-tls-verify",
        "tls-server-name",
        "proxy-url",
        "extensions",
        "disable-compression",
    }
)


@dataclass
class ClientConfiguration:
    """What :class:`~aiplane.kube.client.HttpKubeClient` reads of kubernetes_asyncio's ``Configuration``:
    the same attribute names and ``auth_settings()``, so either configuration drives the client."""

    host: str
    ssl_ca_cert: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify_ssl: bool = True
    #: kubernetes_asyncio's default pool size.
    connection_pool_maxsize: int = 100
    #: A bearer token (without the ``Bearer`` prefix); ``token_file`` is re-read when set.
    token: str | None = None
    token_file: Path | None = None
    _token_read_at: float = field(default=0.0, repr=False)

    async def auth_settings(self) -> dict[str, dict[str, str]]:
        """kubernetes_asyncio's shape: the ``authorization`` header, when there is a token."""
        token = self._current_token()
        if not token:
            return {}
        return {
            "BearerToken": {
                "type": "api_key",
                "in": "header",
                "key": "authorization",
                "value": f"Bearer {token}",
            }
        }

    def _current_token(self) -> str | None:
        if self.token_file is not None and time.monotonic() - self._token_read_at >= TOKEN_REFRESH_SECONDS:
            with contextlib.suppress(OSError):  # a rotation in progress: keep the token we have
                self.token = _read_token(self.token_file)
            self._token_read_at = time.monotonic()
        return self.token


def _read_token(path: Path) -> str:
    token = path.read_text(encoding="utf-8").strip()
    if not token:
        raise ValueError(f"token file {path} is empty")
    return token


def _join_host_port(host: str, port: str) -> str:
    """Go's ``net.JoinHostPort``: IPv6 literals in brackets."""
    return f"[{host}]:{port}" if ":" in host or "%" in host else f"{host}:{port}"


def in_cluster(
    environ: Mapping[str, str] | None = None, account_dir: Path = SERVICE_ACCOUNT_DIR
) -> ClientConfiguration:
    """The pod's ServiceAccount configuration; ``ValueError`` naming what is missing."""
    env = os.environ if environ is None else environ
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ValueError("in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set")
    token_file, ca_file = account_dir / "token", account_dir / "ca.crt"
    if not token_file.is_file():
        raise ValueError(f"in-cluster: service account token file {token_file} does not exist")
    if not ca_file.is_file() or not ca_file.read_bytes():
        raise ValueError(f"in-cluster: service account CA file {ca_file} does not exist or is empty")
    return ClientConfiguration(
        host=f"https://{_join_host_port(host, port)}",
        ssl_ca_cert=str(ca_file),
        token=_read_token(token_file),
        token_file=token_file,
        _token_read_at=time.monotonic(),
    )


def kubeconfig_path(path: str | None, environ: Mapping[str, str] | None = None) -> Path | None:
    """The one kubeconfig file to read: ``path``, else ``$KUBECONFIG`` if it names one file, else
    ``~/.kube/config``; ``None`` when ``$KUBECONFIG`` lists several (they are merged: not done here)."""
    if path:
        return Path(path).expanduser()
    env = (os.environ if environ is None else environ).get("KUBECONFIG", "")
    paths = [p for p in env.split(os.pathsep) if p]
    if len(paths) > 1:
        return None
    return Path(paths[0] if paths else "~/.kube/config").expanduser()


def _named(doc: Mapping[str, Any], section: str, name: object, entry: str) -> Mapping[str, Any] | None:
    for item in doc.get(section) or ():
        if isinstance(item, Mapping) and item.get("name") == name:
            value = item.get(entry)
            return value if isinstance(value, Mapping) else {}
    return None


def from_kubeconfig(
    path: str | None = None, context: str | None = None, environ: Mapping[str, str] | None = None
) -> ClientConfiguration | None:
    """The configuration of ``context`` (default: the current one) of the kubeconfig at ``path`` (see
    :func:`kubeconfig_path`), or ``None`` when it needs what only kubernetes_asyncio implements (the
    module docstring) — including every malformed file, so that its loader reports the error."""
    file = kubeconfig_path(path, environ)
    if file is None or not file.is_file():
        return None
    try:
        doc = yaml.safe_load(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    if not isinstance(doc, Mapping):
        return None
    ctx = _named(doc, "contexts", context or doc.get("current-context"), "context")
    if not ctx:
        return None
    cluster = _named(doc, "clusters", ctx.get("cluster"), "cluster")
    user = _named(doc, "users", ctx.get("user"), "user") if ctx.get("user") else {}
    if not cluster or user is None or not set(cluster) <= _CLUSTER_FIELDS or not set(user) <= _USER_FIELDS:
        return None
    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        return None
    try:
        return _configuration(server.rstrip("/"), cluster, user, file.resolve().parent)
    except (OSError, ValueError):  # an unreadable file, bad base64: kubernetes_asyncio's error message
        return None


def _configuration(
    host: str, cluster: Mapping[str, Any], user: Mapping[str, Any], base: Path
) -> ClientConfiguration | None:
    token = _file_or_data(user, "tokenFile", "token", base, base64_data=False)
    config = ClientConfiguration(host=host, token=token.decode().strip() if token else None)
    if host.startswith("https"):
        config.ssl_ca_cert = _as_file(cluster, "certificate-authority", base)
        config.cert_file = _as_file(user, "client-certificate", base)
        config.key_file = _as_file(user, "client-key", base)
    skip = cluster.get("insecure-skip-tls-verify")
    if skip is not None:
        if not isinstance(skip, bool):
            return None
        config.verify_ssl = not skip
    return config


def _file_or_data(
    obj: Mapping[str, Any], file_key: str, data_key: str, base: Path, *, base64_data: bool = True
) -> bytes | None:
    """kubernetes_asyncio's ``FileOrData``: the (decoded) data if set, else the file's content."""
    data = obj.get(data_key)
    if data:
        return base64.standard_b64decode(str(data)) if base64_data else str(data).encode()
    name = obj.get(file_key)
    if name:
        return (base / str(name)).read_bytes()
    return None


def _as_file(obj: Mapping[str, Any], key: str, base: Path) -> str | None:
    """A path holding ``obj[key + '-data']`` (decoded, in a private temporary file), else
    ``obj[key]`` relative to ``base``."""
    data = obj.get(f"{key}-data")
    if data:
        return _temp_file(base64.standard_b64decode(str(data)))
    name = obj.get(key)
    return os.path.normpath(base / str(name)) if name else None


_temp_files: dict[bytes, str] = {}


def _temp_file(content: bytes) -> str:
    """One file per distinct content, readable by the owner only, removed when the process exits."""
    found = _temp_files.get(content)
    if found is not None:
        return found
    if not _temp_files:
        atexit.register(_remove_temp_files)
    fd, name = tempfile.mkstemp(prefix="aiplane-kubeconfig-")
    with os.fdopen(fd, "wb") as handle:
        handle.write(content)
    _temp_files[content] = name
    return name


def _remove_temp_files() -> None:
    for name in _temp_files.values():
        with contextlib.suppress(OSError):
            os.remove(name)
    _temp_files.clear()
