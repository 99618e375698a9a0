"""The certificates and keys of a local control plane, as kubeadm lays them out.

One cluster CA signs the API server's serving certificate (127.0.0.1 and localhost) and the client
certificates of each component: the admin in ``system:masters``, the controller-manager and the scheduler
under the user names RBAC's bootstrap policy binds (``system:kube-controller-manager``,
``system:kube-scheduler``), and kwok. A second CA signs the front-proxy client the aggregation layer uses,
and a key pair signs service-account tokens. Everything is EC P-256 and valid for a year: the cluster is
throwaway, made fresh by every ``cluster up``.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=365)


@dataclass(frozen=True)
class Pair:
    """A certificate and its key, PEM-encoded."""

    cert: bytes
    key: bytes


@dataclass(frozen=True)
class Client:
    """A client identity: the file stem it is written under and the name RBAC sees."""

    stem: str
    user: str
    groups: tuple[str, ...] = ()


# The identities the control plane's own clients use (kubeconfig file stem, user, groups).
ADMIN = Client("admin", "kubernetes-admin", ("system:masters",))
CONTROLLER_MANAGER = Client("controller-manager", "system:kube-controller-manager")
SCHEDULER = Client("scheduler", "system:kube-scheduler")
# kwok plays every fake node's kubelet with one identity, which the Node authorizer cannot scope to a
# node, so it is an administrator (as in kwokctl's clusters).
KWOK = Client("kwok", "kwok-controller", ("system:masters",))
CLIENTS = (ADMIN, CONTROLLER_MANAGER, SCHEDULER, KWOK)
FRONT_PROXY_CLIENT = "front-proxy-client"


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _ca(common_name: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    now = datetime.datetime.now(datetime.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    usage = x509.KeyUsage(
        digital_signature=True,
        key_cert_sign=True,
        crl_sign=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        encipher_only=False,
        decipher_only=False,
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _leaf(
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
    common_name: str,
    *,
    groups: tuple[str, ...] = (),
    hosts: tuple[str, ...] = (),
) -> Pair:
    """A certificate signed by ``ca``: a server certificate when ``hosts`` is given, else a client one."""
    now = datetime.datetime.now(datetime.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in groups]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    usage = ExtendedKeyUsageOID.SERVER_AUTH if hosts else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(attributes))
        .issuer_name(ca[0].subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca[1].public_key()), critical=False)
    )
    if hosts:
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(ca[1], hashes.SHA256())
    return Pair(cert.public_bytes(serialization.Encoding.PEM), _pem_key(key))


def _write(path: Path, data: bytes, *, secret: bool = False) -> None:
    path.write_bytes(data)
    if secret:
        path.chmod(0o600)


@dataclass(frozen=True)
class Pki:
    """Where the files are (all under one directory)."""

    directory: Path

    def path(self, name: str) -> Path:
        return self.directory / name


# The API server is reached as 127.0.0.1 or localhost, and from pods (none run here) by the service names.
_SERVING_HOSTS = (
    "127.0.0.1",
    "localhost",
    "10.96.0.1",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


def generate(directory: Path) -> Pki:
    """Write the cluster's certificates and keys into ``directory`` (created, private)."""
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    ca = _ca("aiplane-kubernetes-ca")
    _write(directory / "ca.crt", ca[0].public_bytes(serialization.Encoding.PEM))
    _write(directory / "ca.key", _pem_key(ca[1]), secret=True)
    serving = _leaf(ca, "kube-apiserver", hosts=_SERVING_HOSTS)
    _write(directory / "apiserver.crt", serving.cert)
    _write(directory / "apiserver.key", serving.key, secret=True)
    for client in CLIENTS:
        pair = _leaf(ca, client.user, groups=client.groups)
        _write(directory / f"{client.stem}.crt", pair.cert)
        _write(directory / f"{client.stem}.key", pair.key, secret=True)
    front_ca = _ca("aiplane-front-proxy-ca")
    _write(directory / "front-proxy-ca.crt", front_ca[0].public_bytes(serialization.Encoding.PEM))
    front = _leaf(front_ca, FRONT_PROXY_CLIENT)
    _write(directory / "front-proxy-client.crt", front.cert)
    _write(directory / "front-proxy-client.key", front.key, secret=True)
    sa_key = ec.generate_private_key(ec.SECP256R1())
    _write(directory / "sa.key", _pem_key(sa_key), secret=True)
    _write(
        directory / "sa.pub",
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    )
    return Pki(directory)


def write_kubeconfig(pki: Pki, client: Client, server: str, path: Path) -> None:
    """A kubeconfig for ``client`` with everything inline, so it can be copied elsewhere alone."""

    def b64(name: str) -> str:
        return base64.b64encode(pki.path(name).read_bytes()).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "aiplane", "cluster": {"server": server, "certificate-authority-data": b64("ca.crt")}}
        ],
        "users": [
            {
                "name": client.user,
                "user": {
                    "client-certificate-data": b64(f"{client.stem}.crt"),
                    "client-key-data": b64(f"{client.stem}.key"),
                },
            }
        ],
        "contexts": [{"name": "aiplane", "context": {"cluster": "aiplane", "user": client.user}}],
        "current-context": "aiplane",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    path.chmod(0o600)


def _load_ca(pki: Pki) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert = x509.load_pem_x509_certificate(pki.path("ca.crt").read_bytes())
    key = serialization.load_pem_private_key(pki.path("ca.key").read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"{pki.path('ca.key')} is not an EC key")
    return cert, key


def issue_client(pki: Pki, client: Client) -> None:
    """A client certificate for ``client``, signed by the cluster CA, beside the others (for components
    started after the control plane: the upstream controllers of ``cluster up --with``)."""
    pair = _leaf(_load_ca(pki), client.user, groups=client.groups)
    _write(pki.path(f"{client.stem}.crt"), pair.cert)
    _write(pki.path(f"{client.stem}.key"), pair.key, secret=True)


def issue_serving(pki: Pki, common_name: str, directory: Path) -> None:
    """A serving certificate for 127.0.0.1 and localhost, signed by the cluster CA, written as ``tls.crt`` and
    ``tls.key`` into ``directory``: where a controller-runtime webhook server reads its certificate. The API
    server trusts it through the webhook configuration's caBundle (the cluster CA)."""
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    pair = _leaf(_load_ca(pki), common_name, hosts=("127.0.0.1", "localhost"))
    _write(directory / "tls.crt", pair.cert)
    _write(directory / "tls.key", pair.key, secret=True)
