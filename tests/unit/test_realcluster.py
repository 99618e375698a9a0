"""The real control plane's launcher without the binaries: the fake nodes it registers, the certificates
it makes, and that ``cluster down`` signals only processes of its own cluster."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from hypothesis import given
from hypothesis import strategies as st

from aiplane.realcluster import pki, running_pids, stop_cluster
from aiplane.realcluster.launcher import audit_policy
from aiplane.realcluster.net import free_port
from aiplane.realcluster.nodes import fake_nodes
from aiplane.realcluster.scheduling import (
    UNSCHEDULABLE_FLUSH_PERIOD_SECONDS,
    UNSCHEDULABLE_FLUSH_SECONDS,
    coscheduling_config,
)
from aiplane.sim.fleet import AMD_PRODUCTS, NVIDIA_PRODUCTS, Fleet, GpuSpec, NodePool, node_objects

_gpus = st.one_of(
    st.none(),
    st.builds(GpuSpec, vendor=st.just("amd"), product=st.sampled_from(sorted(AMD_PRODUCTS))),
    st.builds(GpuSpec, vendor=st.just("nvidia"), product=st.sampled_from(sorted(NVIDIA_PRODUCTS))),
)
_pools = st.lists(
    st.builds(
        NodePool,
        name=st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True),
        count=st.integers(0, 3),
        gpu=_gpus,
        controlPlane=st.booleans(),
    ),
    max_size=4,
    unique_by=lambda pool: pool.name,
)


@given(_pools)
def test_fake_nodes_are_the_twins_nodes_for_kwok_to_bring_up(pools: list[NodePool]) -> None:
    fleet = Fleet(nodePools=pools)
    twin = node_objects(fleet)
    fakes = fake_nodes(fleet)
    assert [n["metadata"]["name"] for n in fakes] == [n["metadata"]["name"] for n in twin]
    for fake, node in zip(fakes, twin, strict=True):
        # Same scheduling facts as the twin: labels, taints, capacity (GPUs included).
        assert fake["metadata"]["labels"] == node["metadata"]["labels"]
        assert fake["spec"].get("taints") == node["spec"].get("taints")
        assert fake["status"]["allocatable"] == node["status"]["allocatable"]
        # kwok's node-initialize stage takes up only nodes marked for it that are not Ready yet.
        assert fake["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
        assert "conditions" not in fake["status"]


def test_the_pki_serves_loopback_and_names_each_component_as_rbac_expects(tmp_path: Path) -> None:
    keys = pki.generate(tmp_path / "pki")
    ca = x509.load_pem_x509_certificate(keys.path("ca.crt").read_bytes())
    ca_key = ca.public_key()
    assert isinstance(ca_key, ec.EllipticCurvePublicKey)
    serving = x509.load_pem_x509_certificate(keys.path("apiserver.crt").read_bytes())
    serving.verify_directly_issued_by(ca)
    names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in names.get_values_for_type(x509.DNSName)
    assert "127.0.0.1" in {str(ip) for ip in names.get_values_for_type(x509.IPAddress)}
    for client in pki.CLIENTS:
        cert = x509.load_pem_x509_certificate(keys.path(f"{client.stem}.crt").read_bytes())
        cert.verify_directly_issued_by(ca)
        subject = cert.subject
        assert subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == client.user
        groups = tuple(a.value for a in subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME))
        assert groups == client.groups
        usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert keys.path("ca.key").stat().st_mode & 0o077 == 0
    assert keys.path("sa.key").stat().st_mode & 0o077 == 0


def test_down_signals_no_process_that_is_not_its_clusters(tmp_path: Path) -> None:
    """A pid in state.json that now belongs to another program (pids are reused) is left alone."""
    state = tmp_path / "cluster"
    state.mkdir()
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        record = {
            "server": "https://127.0.0.1:1",
            "kubeconfig": "x",
            "pids": {"kube-apiserver": stranger.pid},
        }
        (state / "state.json").write_text(json.dumps(record), encoding="utf-8")
        assert running_pids(state) == {}
        stop_cluster(state)
        assert stranger.poll() is None
        assert not state.exists()
    finally:
        stranger.kill()
        stranger.wait()


def test_the_node_write_audit_records_every_clients_node_writes_in_full() -> None:
    """Who last wrote a Node's taints (kube-controller-manager and kwok included, whom the default
    policy leaves out) is only known when their Node writes are recorded with their bodies."""
    default = audit_policy()
    full = audit_policy(node_writes=True)
    first = full["rules"][0]
    assert first["level"] == "RequestResponse" and "users" not in first and "userGroups" not in first
    assert {"group": "", "resources": ["nodes"]} in first["resources"]
    assert full["rules"][len(full["rules"]) - len(default["rules"]) :] == default["rules"]
    assert not any(r["level"] == "RequestResponse" for r in default["rules"])


def test_free_ports_are_never_handed_out_twice_and_stay_off_the_ephemeral_range() -> None:
    """Kueue once got one port for its webhook and its health probe and exited ("address already in use")
    at start-up: two picks in a row must differ, and none may be a port an outgoing connection can take."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text(encoding="ascii").split()[0])
    ports = [free_port() for _ in range(2000)]
    assert len(set(ports)) == len(ports)
    assert all(port < low for port in ports)
    with socket.socket() as held:
        held.bind(("127.0.0.1", ports[-1]))
        held.listen()
        assert free_port() != ports[-1]


def test_a_gang_member_waits_at_permit_until_its_turned_down_sibling_is_flushed_back() -> None:
    """Kueue ungates a gang's replacement pods one apart; Coscheduling turns the first down while its
    sibling is gated and is not told of the ungating, so the first returns only with kube-scheduler's
    flush of unschedulable pods. With a 10 s Permit wait the second timed out first and the two then
    turned each other down at every flush: the replaced member stayed Pending for good (seen in CI)."""
    profile = coscheduling_config(Path("kubeconfig"))["profiles"][0]
    args = next(p["args"] for p in profile["pluginConfig"] if p["name"] == "Coscheduling")
    flushed_back_within = UNSCHEDULABLE_FLUSH_SECONDS + UNSCHEDULABLE_FLUSH_PERIOD_SECONDS
    assert args["permitWaitingTimeSeconds"] >= flushed_back_within
