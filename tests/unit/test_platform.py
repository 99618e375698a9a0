"""The platform decoration of pod templates: what a workload's pods get from KaiwoConfig + AIMNamespaceConfig."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from aiplane.api.config import AIMNamespaceConfigSpec, KaiwoConfigSpec
from aiplane.controllers.platform import (
    GCS_VOLUME,
    Platform,
    decorate_pod_spec,
    default_gpu_resource,
    scheduler_name,
    secret_uses,
)

NSCFG = AIMNamespaceConfigSpec.model_validate(
    {
        "credentials": {
            "huggingFaceToken": {"secretName": "hf", "secretKey": "token"},
            "s3": [
                {
                    "endpointUrl": "https://s3.example",
                    "accessKeyId": {"secretName": "s3", "secretKey": "id"},
                    "secretAccessKey": {"secretName": "s3", "secretKey": "secret"},
                },
                {"accessKeyId": {"secretName": "other", "secretKey": "id"}},
            ],
            "gcs": [{"applicationCredentials": {"secretName": "gcs", "secretKey": "sa.json"}}],
            "azureBlob": [{"connectionString": {"secretName": "az", "secretKey": "conn"}}],
        },
        "images": {"imagePullSecrets": ["regcred"]},
    }
)


def _pod(*containers: dict[str, Any]) -> dict[str, Any]:
    return {"containers": list(containers) or [{"name": "main", "image": "x"}]}


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e for e in container.get("env") or []}


def test_credentials_become_secret_references_never_values() -> None:
    out = decorate_pod_spec(_pod(), Platform(namespace_config=NSCFG))
    env = _env(out["containers"][0])
    assert env["HF_TOKEN"]["valueFrom"] == {"secretKeyRef": {"name": "hf", "key": "token"}}
    assert env["HUGGING_FACE_HUB_TOKEN"]["valueFrom"] == {"secretKeyRef": {"name": "hf", "key": "token"}}
    assert env["AWS_ACCESS_KEY_ID"]["valueFrom"]["secretKeyRef"] == {
        "name": "s3",
        "key": "id",
    }  # the first S3
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"] == {"name": "s3", "key": "secret"}
    assert env["AWS_ENDPOINT_URL"] == {"name": "AWS_ENDPOINT_URL", "value": "https://s3.example"}
    assert env["AZURE_STORAGE_CONNECTION_STRING"]["valueFrom"]["secretKeyRef"] == {
        "name": "az",
        "key": "conn",
    }
    path = env["GOOGLE_APPLICATION_CREDENTIALS"]["value"]
    mount = next(m for m in out["containers"][0]["volumeMounts"] if m["name"] == GCS_VOLUME)
    assert path.startswith(mount["mountPath"] + "/")
    volume = next(v for v in out["volumes"] if v["name"] == GCS_VOLUME)
    assert volume["secret"]["secretName"] == "gcs"
    assert volume["secret"]["items"][0]["key"] == "sa.json"
    assert out["imagePullSecrets"] == [{"name": "regcred"}]
    assert all(
        "value" not in e or e["name"] in {"AWS_ENDPOINT_URL", "GOOGLE_APPLICATION_CREDENTIALS"}
        for e in env.values()
    )


def test_the_workloads_own_variables_win_env_and_envfrom() -> None:
    container = {
        "name": "main",
        "env": [
            {"name": "HF_TOKEN", "value": "mine"},
            {"name": "GOOGLE_APPLICATION_CREDENTIALS", "value": "/g"},
        ],
        "envFrom": [{"secretRef": {"name": "my-aws"}}, {"prefix": "X_", "configMapRef": {"name": "cm"}}],
    }
    platform = Platform(
        namespace_config=NSCFG,
        secret_keys={"my-aws": frozenset({"AWS_ACCESS_KEY_ID"})},
        configmap_keys={"cm": frozenset({"AWS_SECRET_ACCESS_KEY"})},
    )
    out = decorate_pod_spec(_pod(container), platform)
    env = out["containers"][0]["env"]
    names = [e["name"] for e in env]
    assert names.count("HF_TOKEN") == 1 and env[0] == {"name": "HF_TOKEN", "value": "mine"}
    assert "AWS_ACCESS_KEY_ID" not in names  # brought by envFrom: Kubernetes would let ours override it
    assert "AWS_SECRET_ACCESS_KEY" in names  # the ConfigMap brings X_AWS_SECRET_ACCESS_KEY, not this one
    assert "volumeMounts" not in out["containers"][0]  # its own GCS credentials: no mount
    assert "volumes" not in out
    assert (
        container["env"][0] == {"name": "HF_TOKEN", "value": "mine"} and len(container["env"]) == 2
    )  # input intact


def test_init_containers_get_credentials_too_and_pull_secrets_merge() -> None:
    spec = {
        "initContainers": [{"name": "fetch"}],
        **_pod(),
        "imagePullSecrets": [{"name": "regcred"}, {"name": "own"}],
    }
    out = decorate_pod_spec(spec, Platform(namespace_config=NSCFG))
    assert "HF_TOKEN" in _env(out["initContainers"][0])
    assert out["imagePullSecrets"] == [{"name": "regcred"}, {"name": "own"}]


def test_nothing_configured_changes_nothing() -> None:
    spec = _pod({"name": "main", "resources": {"limits": {"amd.com/gpu": 1}}})
    assert decorate_pod_spec(spec, Platform()) == spec


def test_gpu_toleration_only_when_tainting_and_the_pod_requests_a_gpu() -> None:
    kaiwo = KaiwoConfigSpec.model_validate({"nodes": {"addTaintsToGpuNodes": True}})
    gpu = _pod({"name": "main", "resources": {"limits": {"amd.com/cpx_nps4": 1}}})
    cpu = _pod({"name": "main", "resources": {"requests": {"cpu": 1}}})
    tol = {"key": "kaiwo.silogen.ai/gpu", "operator": "Exists", "effect": "NoSchedule"}
    assert decorate_pod_spec(gpu, Platform(kaiwo=kaiwo))["tolerations"] == [tol]
    assert "tolerations" not in decorate_pod_spec(cpu, Platform(kaiwo=kaiwo))
    off = KaiwoConfigSpec()
    assert "tolerations" not in decorate_pod_spec(gpu, Platform(kaiwo=off))


def test_hf_home_from_storage_unless_set() -> None:
    kaiwo = KaiwoConfigSpec.model_validate({"data": {"defaultHfMountPath": "/models"}})
    out = decorate_pod_spec(_pod(), Platform(kaiwo=kaiwo))
    assert _env(out["containers"][0])["HF_HOME"] == {"name": "HF_HOME", "value": "/models"}
    own = _pod({"name": "m", "env": [{"name": "HF_HOME", "value": "/mine"}]})
    assert decorate_pod_spec(own, Platform(kaiwo=kaiwo))["containers"][0]["env"] == [
        {"name": "HF_HOME", "value": "/mine"}
    ]


def test_scheduler_name_rule() -> None:
    assert scheduler_name(Platform()) is None
    assert scheduler_name(Platform(kaiwo=KaiwoConfigSpec())) is None  # defaulted: kaiwo-scheduler, not run
    volcano = KaiwoConfigSpec.model_validate({"scheduling": {"kubeSchedulerName": "volcano"}})
    assert decorate_pod_spec(_pod(), Platform(kaiwo=volcano))["schedulerName"] == "volcano"
    own = {**_pod(), "schedulerName": "default-scheduler"}
    assert decorate_pod_spec(own, Platform(kaiwo=volcano))["schedulerName"] == "default-scheduler"
    assert "schedulerName" not in decorate_pod_spec(_pod(), Platform(kaiwo=KaiwoConfigSpec()))


def test_default_gpu_resource_never_names_an_unadvertised_resource() -> None:
    kaiwo = KaiwoConfigSpec()
    assert default_gpu_resource(Platform()) == "nvidia.com/gpu"
    amd = frozenset({"cpu", "memory", "amd.com/gpu"})
    nvidia = frozenset({"cpu", "memory", "nvidia.com/gpu"})
    assert default_gpu_resource(Platform(kaiwo=kaiwo, advertised_resources=amd)) == "amd.com/gpu"
    assert default_gpu_resource(Platform(kaiwo=kaiwo, advertised_resources=nvidia)) == "nvidia.com/gpu"


def test_secret_uses_name_field_paths() -> None:
    uses = secret_uses(NSCFG)
    assert uses[0].path == "spec.credentials.huggingFaceToken" and uses[0].secret == "hf"
    assert ("spec.images.imagePullSecrets[0]", "regcred", None) in [(u.path, u.secret, u.key) for u in uses]


_names = st.sampled_from(
    ["HF_TOKEN", "AWS_ACCESS_KEY_ID", "HF_HOME", "FOO", "AZURE_STORAGE_CONNECTION_STRING"]
)
_containers = st.lists(
    st.fixed_dictionaries(
        {
            "name": st.sampled_from(["a", "b", "c"]),
            "env": st.lists(
                st.builds(lambda n, v: {"name": n, "value": v}, _names, st.text(max_size=3)), max_size=3
            ),
        }
    ),
    min_size=1,
    max_size=3,
)


@given(_containers, st.booleans(), st.booleans())
def test_decoration_is_idempotent_and_keeps_workload_values(
    containers: list[dict[str, Any]], ns: bool, kw: bool
) -> None:
    platform = Platform(
        kaiwo=KaiwoConfigSpec.model_validate({"nodes": {"addTaintsToGpuNodes": True}}) if kw else None,
        namespace_config=NSCFG if ns else None,
    )
    spec = {"containers": containers}
    once = decorate_pod_spec(spec, platform)
    assert decorate_pod_spec(once, platform) == once
    for before, after in zip(containers, once["containers"], strict=True):
        # every variable the workload set keeps its first definition, at the front, unchanged
        assert after["env"][: len(before["env"])] == before["env"]
        names = [e["name"] for e in after["env"]]
        injected = names[len(before["env"]) :]
        assert not set(injected) & {e["name"] for e in before["env"]}
        assert len(injected) == len(set(injected))
