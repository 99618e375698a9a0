"""The kubeconfig and in-cluster reader that spares the operator kubernetes_asyncio's 37 MB.

It must read what kubernetes_asyncio's loader reads for the cases it takes (checked against that
loader), hand everything else to it, and leave ``kubernetes_asyncio`` unimported for the common cases.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client import Configuration

from aiplane.kube import kubeconfig
from aiplane.kube.client import HttpKubeClient

CA = b"-----BEGIN CERTIFICATE-----\nnot really\n-----END CERTIFICATE-----\n"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _write(tmp_path: Path, user: dict[str, Any], cluster: dict[str, Any] | None = None) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "c",
                "cluster": cluster
                or {"server": "https://api.example:6443/", "certificate-authority-data": _b64(CA)},
            }
        ],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u", "namespace": "ns"}}],
        "current-context": "ctx",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


async def _theirs(path: Path) -> Any:
    configuration = Configuration()
    await k8s_config.load_kube_config(config_file=str(path), client_configuration=configuration)
    return configuration


async def _same_as_kubernetes_asyncio(path: Path) -> kubeconfig.ClientConfiguration:
    ours = kubeconfig.from_kubeconfig(str(path))
    assert ours is not None
    theirs = await _theirs(path)
    assert (ours.host, ours.verify_ssl) == (theirs.host, theirs.verify_ssl)
    assert await ours.auth_settings() == await theirs.auth_settings()
    for attr in ("ssl_ca_cert", "cert_file", "key_file"):
        mine, other = getattr(ours, attr), getattr(theirs, attr)
        assert (mine is None) == (other is None), attr
        if mine is not None:
            assert Path(mine).read_bytes() == Path(other).read_bytes(), attr
    return ours


async def test_a_token_kubeconfig_reads_as_kubernetes_asyncio_reads_it(tmp_path: Path) -> None:
    ours = await _same_as_kubernetes_asyncio(_write(tmp_path, {"token": "s3cret"}))
    assert ours.host == "https://api.example:6443"
    assert (await ours.auth_settings())["BearerToken"]["value"] == "Bearer s3cret"
    assert ours.ssl_ca_cert is not None and Path(ours.ssl_ca_cert).read_bytes() == CA


async def test_client_certificates_files_relative_to_the_kubeconfig_and_data(tmp_path: Path) -> None:
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "client.crt").write_bytes(b"CERT")
    (tmp_path / "ca.crt").write_bytes(CA)
    user = {"client-certificate": "certs/client.crt", "client-key-data": _b64(b"KEY")}
    cluster = {"server": "https://10.0.0.1", "certificate-authority": "ca.crt"}
    ours = await _same_as_kubernetes_asyncio(_write(tmp_path, user, cluster))
    assert await ours.auth_settings() == {}
    assert ours.cert_file == str(tmp_path / "certs" / "client.crt")
    assert ours.key_file is not None and Path(ours.key_file).read_bytes() == b"KEY"


async def test_token_file_and_insecure_skip_tls_verify(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("from-file")
    cluster = {"server": "https://api.example", "insecure-skip-tls-verify": True}
    path = _write(tmp_path, {"tokenFile": "token"}, cluster)
    ours = await _same_as_kubernetes_asyncio(path)
    assert ours.verify_ssl is False
    # A file ending in a newline: trimmed, as client-go does (kubernetes_asyncio would send the newline).
    (tmp_path / "token").write_text("from-file\n")
    again = kubeconfig.from_kubeconfig(str(path))
    assert again is not None and again.token == "from-file"


@pytest.mark.parametrize(
    "user",
    [
        {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "get-token"}},
        {"auth-provider": {"name": "oidc", "config": {}}},
        {"username": "admin", "password": "pw"},
        {"token": "t", "as": "someone-else"},
    ],
    ids=["exec", "auth-provider", "basic", "unknown-field"],
)
def test_what_only_kubernetes_asyncio_implements_is_left_to_it(tmp_path: Path, user: dict[str, Any]) -> None:
    assert kubeconfig.from_kubeconfig(str(_write(tmp_path, user))) is None


def test_merged_kubeconfig_lists_and_malformed_files_are_left_to_kubernetes_asyncio(tmp_path: Path) -> None:
    path = _write(tmp_path, {"token": "t"})
    assert kubeconfig.from_kubeconfig(None, environ={"KUBECONFIG": f"{path}:{path}"}) is None
    assert kubeconfig.from_kubeconfig(None, environ={"KUBECONFIG": str(path)}) is not None
    assert kubeconfig.from_kubeconfig(str(path), context="missing") is None
    (tmp_path / "bad").write_text("clusters: [")
    assert kubeconfig.from_kubeconfig(str(tmp_path / "bad")) is None


async def test_basic_auth_still_works_through_kubernetes_asyncio(tmp_path: Path) -> None:
    path = _write(tmp_path, {"username": "admin", "password": "pw"}, {"server": "http://127.0.0.1:1"})
    client = await HttpKubeClient.from_kubeconfig(str(path))
    try:
        assert await client.configuration.auth_settings() == {
            "BearerToken": {
                "type": "api_key",
                "in": "header",
                "key": "authorization",
                "value": "Basic " + _b64(b"admin:pw"),
            }
        }
    finally:
        await client.close()


def test_in_cluster_reads_the_service_account_and_rereads_a_rotated_token(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("first")
    (tmp_path / "ca.crt").write_bytes(CA)
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    config = kubeconfig.in_cluster(env, tmp_path)
    assert config.host == "https://[fd00::1]:443"
    assert config.ssl_ca_cert == str(tmp_path / "ca.crt")
    (tmp_path / "token").write_text("second")
    assert config._current_token() == "first"  # within the refresh period: no read
    config._token_read_at -= kubeconfig.TOKEN_REFRESH_SECONDS
    assert config._current_token() == "second"
    with pytest.raises(ValueError, match="KUBERNETES_SERVICE_HOST"):
        kubeconfig.in_cluster({}, tmp_path)
    with pytest.raises(ValueError, match="token file"):
        kubeconfig.in_cluster(env, tmp_path / "nowhere")


_IMPORTS_AFTER_CLIENT = """
import asyncio, json, sys
from aiplane.kube.client import HttpKubeClient
async def main():
    client = await HttpKubeClient.from_kubeconfig(sys.argv[1])
    await client.close()
asyncio.run(main())
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "kubernetes_asyncio")))
"""


def test_a_token_kubeconfig_does_not_import_kubernetes_asyncio(tmp_path: Path) -> None:
    """Its import is 37 MB of the operator's resident memory: a fresh interpreter must not load it."""
    path = _write(tmp_path, {"token": "t"}, {"server": "http://127.0.0.1:1"})
    out = subprocess.run(
        [sys.executable, "-c", _IMPORTS_AFTER_CLIENT, str(path)], check=True, capture_output=True, text=True
    ).stdout
    assert json.loads(out) == []
