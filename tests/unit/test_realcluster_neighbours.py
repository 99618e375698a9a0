"""``cluster up --with`` without the binaries: which neighbours it accepts, and how it rewrites upstream's
manifests for a cluster without Services (every webhook on 127.0.0.1 under the cluster CA, with upstream's
selectors), and the webhook serving certificates it issues."""

from __future__ import annotations

import base64
import ipaddress
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from aiplane.realcluster import neighbours as nb
from aiplane.realcluster import pki


def test_with_takes_known_names_in_a_fixed_order_and_all() -> None:
    assert nb.parse_with("") == ()
    assert nb.parse_with("kueue, lws,kueue") == ("lws", "kueue")
    assert nb.parse_with("all") == nb.KNOWN


def test_with_refuses_volcano_saying_why_and_unknown_names() -> None:
    with pytest.raises(nb.NeighbourError, match=r"volcano\.sh/volcano"):
        nb.parse_with("lws,volcano")
    with pytest.raises(nb.NeighbourError, match="unknown neighbour 'jobset'"):
        nb.parse_with("jobset")


def _hook(name: str, path: str, resource: str) -> dict[str, Any]:
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Fail",
        "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": path}},
        "rules": [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": [resource]}
        ],
    }


def _module(root: Path, name: str, crd: str) -> None:
    """A built module's manifests, shaped as scripts/build-neighbours copies them."""
    (root / name / "crds").mkdir(parents=True)
    (root / name / "crd-patches").mkdir()
    (root / name / "crds" / "crd.yaml").write_text(
        yaml.safe_dump(
            {"kind": "CustomResourceDefinition", "metadata": {"name": crd}, "spec": {"group": "x"}}
        )
    )
    patch = {
        "metadata": {"name": crd},
        "spec": {
            "conversion": {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": {
                        "service": {"name": "webhook-service", "namespace": "system", "path": "/convert"}
                    },
                    "conversionReviewVersions": ["v1"],
                },
            }
        },
    }
    (root / name / "crd-patches" / "webhook_in.yaml").write_text(yaml.safe_dump(patch))
    configs = [
        {
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "mutating-webhook-configuration"},
            "webhooks": [_hook("mpod.kb.io", "/mutate--v1-pod", "pods")],
        },
        {
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "validating-webhook-configuration"},
            "webhooks": [_hook("vpod.kb.io", "/validate--v1-pod", "pods")],
        },
    ]
    (root / name / "webhooks.yaml").write_text(yaml.safe_dump_all(configs))


def _prepare(tmp_path: Path, names: tuple[str, ...]) -> tuple[nb.Plan, pki.Pki]:
    source = tmp_path / "built"
    _module(source, "lws", "leaderworkersets.leaderworkerset.x-k8s.io")
    _module(source, "kueue", "workloads.kueue.x-k8s.io")
    (source / "gateway-api" / "crds").mkdir(parents=True)
    state = tmp_path / "state"
    (state / "kubeconfig").mkdir(parents=True)
    keys = pki.generate(state / "pki")
    return nb.prepare(names, source, state, keys, "https://127.0.0.1:6443"), keys


def test_every_webhook_is_reached_on_loopback_under_the_cluster_ca(tmp_path: Path) -> None:
    plan, keys = _prepare(tmp_path, ("lws", "kueue"))
    ca_bundle = base64.b64encode(keys.path("ca.crt").read_bytes()).decode()
    ports = {p.name: p.webhook_port for p in plan.processes}
    client_configs = [hook["clientConfig"] for config in plan.webhooks for hook in config["webhooks"]]
    client_configs += [crd["spec"]["conversion"]["webhook"]["clientConfig"] for crd in plan.crds]
    assert len(client_configs) == 6
    for client_config in client_configs:
        assert set(client_config) == {"url", "caBundle"}
        assert client_config["caBundle"] == ca_bundle
    assert {c["metadata"]["name"] for c in plan.webhooks} == {
        f"{name}-{kind}-webhook-configuration"
        for name in ("lws", "kueue")
        for kind in ("mutating", "validating")
    }
    lws_hooks = [h for c in plan.webhooks if c["metadata"]["name"].startswith("lws-") for h in c["webhooks"]]
    assert {h["clientConfig"]["url"] for h in lws_hooks} == {
        f"https://127.0.0.1:{ports['lws']}/mutate--v1-pod",
        f"https://127.0.0.1:{ports['lws']}/validate--v1-pod",
    }
    # LWS's pod webhooks see only LWS's pods; Kueue's skip kube-system and its own namespace (upstream's patches).
    assert all(
        h["objectSelector"]["matchExpressions"][0]["key"] == "leaderworkerset.sigs.k8s.io/name"
        for h in lws_hooks
    )
    kueue_hooks = [
        h for c in plan.webhooks if c["metadata"]["name"].startswith("kueue-") for h in c["webhooks"]
    ]
    assert all(
        h["namespaceSelector"]["matchExpressions"][0]["values"] == ["kube-system", "kueue-system"]
        for h in kueue_hooks
    )


def test_kueue_manages_leaderworkersets_only_beside_lws(tmp_path: Path) -> None:
    def frameworks(plan: nb.Plan) -> list[str]:
        (kueue,) = (p for p in plan.processes if p.name == "kueue")
        config_path = next(a for a in kueue.argv if a.startswith("--config=")).partition("=")[2]
        config = yaml.safe_load(Path(config_path).read_text())
        assert config["manageJobsWithoutQueueName"] is False
        return list(config["integrations"]["frameworks"])

    assert frameworks(_prepare(tmp_path / "a", ("lws", "kueue"))[0]) == list(nb.KUEUE_FRAMEWORKS)
    assert "leaderworkerset.x-k8s.io/leaderworkerset" not in frameworks(
        _prepare(tmp_path / "b", ("kueue",))[0]
    )


def test_webhook_serving_certificate_is_for_loopback_and_signed_by_the_cluster_ca(tmp_path: Path) -> None:
    keys = pki.generate(tmp_path / "pki")
    pki.issue_serving(keys, "lws-webhook", tmp_path / "certs")
    cert = x509.load_pem_x509_certificate((tmp_path / "certs" / "tls.crt").read_bytes())
    ca = x509.load_pem_x509_certificate(keys.path("ca.crt").read_bytes())
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in names.get_values_for_type(x509.IPAddress)
    assert (tmp_path / "certs" / "tls.key").stat().st_mode & 0o077 == 0
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
