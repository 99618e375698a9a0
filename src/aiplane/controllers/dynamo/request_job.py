"""The online profiling Job and the output ConfigMap contract (pure object builders).

Upstream (reference §3 "Profiling Job"): Job ``profile-online-<dgdr>`` labelled
``app=dynamo-profiler``, ``dgdr=<name>``, ``nvidia.com/managed-by=dynamo-operator``, owned by the
DGDR, ``backoffLimit: 3``, ``restartPolicy: Never``, ServiceAccount ``dgdr-profiling-job``,
imagePullSecret ``nvcr-imagepullsecret``; a ``profiler`` container (the operator's
``--profiler-image``, ``python -m benchmarks.profiler.profile_sla``, 16 CPU / 10Gi) writing to the
PVC ``dynamo-pvc`` at ``/data``, and an ``output-copier`` sidecar that waits for
``/data/config_with_planner.yaml`` and applies ConfigMap ``dgdr-output-<dgdr>`` (labels
``dgdr.nvidia.com/name`` and managed-by) holding it. The offline path writes the same ConfigMap
itself, plus our plan as JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import yaml

from aiplane.api.dynamo import DynamoGraphDeploymentRequestSpec
from aiplane.apimachinery import objects
from aiplane.controllers.dynamo.request_decide import JobSeen
from aiplane.controllers.dynamo.request_graph import LABEL_DGDR_NAME, LABEL_MANAGED_BY, MANAGED_BY

__all__ = [
    "JOB_NAME_PREFIX",
    "OUTPUT_KEY",
    "PLAN_KEY",
    "job_seen",
    "output_configmap",
    "output_name",
    "profiling_job",
]

Obj = dict[str, Any]

JOB_NAME_PREFIX: Final = "profile-online-"
OUTPUT_KEY: Final = "config_with_planner.yaml"
PLAN_KEY: Final = "plan.json"
SERVICE_ACCOUNT: Final = "dgdr-profiling-job"
PVC: Final = "dynamo-pvc"
COPIER_IMAGE: Final = "bitnami/kubectl:latest"


def output_name(dgdr: str) -> str:
    return f"dgdr-output-{dgdr}"


def _owner(dgdr: Mapping[str, Any]) -> Obj:
    return {
        "apiVersion": str(dgdr.get("apiVersion") or "nvidia.com/v1alpha1"),
        "kind": "DynamoGraphDeploymentRequest",
        "name": objects.name(dgdr),
        "uid": objects.uid(dgdr),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _copier_script(dgdr: str, namespace: str) -> str:
    cm = output_name(dgdr)
    return (
        f"while [ ! -f /data/{OUTPUT_KEY} ]; do sleep 10; done; "
        f"kubectl create configmap {cm} -n {namespace} --from-file={OUTPUT_KEY}=/data/{OUTPUT_KEY} "
        '$(for f in /data/*/interpolation/raw_data.npz; do [ -f "$f" ] && '
        "echo --from-literal=$(echo $f | cut -d/ -f3)_raw_data.npz=$(base64 -w0 $f); done) "
        "--dry-run=client -o yaml | "
        f"kubectl label --local -f - {LABEL_DGDR_NAME}={dgdr} {LABEL_MANAGED_BY}={MANAGED_BY} -o yaml | "
        "kubectl apply -f -"
    )


def profiling_job(dgdr: Mapping[str, Any], spec: DynamoGraphDeploymentRequestSpec, image: str) -> Obj:
    """Upstream's online profiling Job for this request."""
    name, namespace = objects.name(dgdr), objects.namespace(dgdr)
    gpu = spec.gpu
    args = [
        "--namespace", namespace,
        "--backend", spec.backend,
        "--ttft", str(spec.sla.ttft),
        "--itl", str(spec.sla.itl),
        "--isl", str(spec.sla.isl),
        "--osl", str(spec.sla.osl),
        "--output-dir", "/data",
        "--min-num-gpus-per-engine", str(gpu.minNumGPUsPerEngine if gpu else 1),
        "--max-num-gpus-per-engine", str(gpu.maxNumGPUsPerEngine if gpu else 8),
    ]  # fmt: skip
    volumes: list[Obj] = [{"name": "output", "persistentVolumeClaim": {"claimName": PVC}}]
    mounts: list[Obj] = [{"name": "output", "mountPath": "/data"}]
    ref = spec.profilingConfig.configMapRef if spec.profilingConfig else None
    if ref is not None:
        args += ["--config", "/config/disagg.yaml"]
        volumes.append(
            {
                "name": "profiling-config",
                "configMap": {"name": ref.name, "items": [{"key": ref.key, "path": "disagg.yaml"}]},
            }
        )
        mounts.append({"name": "profiling-config", "mountPath": "/config", "readOnly": True})
    profiler = {
        "name": "profiler",
        "image": image,
        "command": ["python", "-m", "benchmarks.profiler.profile_sla"],
        "args": args,
        "resources": {"requests": {"cpu": "16", "memory": "10Gi"}},
        "env": [
            {
                "name": "HUGGING_FACE_HUB_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": "hf-token-secret", "key": "HF_TOKEN"}},
            },
            {"name": "NATS_SERVER", "value": f"nats://{namespace}-nats:4222"},
            {"name": "ETCD_ENDPOINTS", "value": f"{namespace}-etcd:2379"},
        ],
        "volumeMounts": mounts,
    }
    copier = {
        "name": "output-copier",
        "image": COPIER_IMAGE,
        "command": ["/bin/sh", "-c"],
        "args": [_copier_script(name, namespace)],
        "volumeMounts": [{"name": "output", "mountPath": "/data", "readOnly": True}],
    }
    labels = {"app": "dynamo-profiler", "dgdr": name, LABEL_MANAGED_BY: MANAGED_BY}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"{JOB_NAME_PREFIX}{name}",
            "namespace": namespace,
            "labels": labels,
            "ownerReferences": [_owner(dgdr)],
        },
        "spec": {
            "backoffLimit": 3,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": SERVICE_ACCOUNT,
                    "restartPolicy": "Never",
                    "imagePullSecrets": [{"name": "nvcr-imagepullsecret"}],
                    "containers": [profiler, copier],
                    "volumes": volumes,
                },
            },
        },
    }


def job_seen(job: Mapping[str, Any]) -> JobSeen:
    """Complete / Failed from the Job's conditions (batch/v1: type Complete or Failed, status True)."""
    for cond in objects.status(job).get("conditions") or []:
        if not isinstance(cond, Mapping) or cond.get("status") != "True":
            continue
        if cond.get("type") == "Failed":
            return JobSeen(failed=True, message=str(cond.get("message") or cond.get("reason") or ""))
        if cond.get("type") == "Complete":
            return JobSeen(complete=True)
    return JobSeen()


def output_configmap(dgdr: Mapping[str, Any], generated: Mapping[str, Any], plan_json: str) -> Obj:
    """The offline path's output: the same ConfigMap the online Job's copier applies, plus the plan.

    Not owned by the request (upstream keeps it after the request is deleted; find it by label).
    """
    name = objects.name(dgdr)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": output_name(name),
            "namespace": objects.namespace(dgdr),
            "labels": {LABEL_DGDR_NAME: name, LABEL_MANAGED_BY: MANAGED_BY},
        },
        "data": {
            OUTPUT_KEY: yaml.safe_dump(dict(generated), sort_keys=False),
            PLAN_KEY: plan_json,
        },
    }
