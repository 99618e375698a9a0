"""Admission validation of the embedded API server: what kube-apiserver's ``ValidateObjectMeta``, the
per-kind strategies and apiextensions check before a write is stored, with kube's field paths and texts.
"""

from __future__ import annotations

import re
from typing import Any, Final
from urllib.parse import urlsplit

from aiplane.apimachinery import field as fe
from aiplane.apimachinery.field import FieldError
from aiplane.apimachinery.selectors import dns1123_subdomain_errors, label_key_errors, label_value_errors
from aiplane.apimachinery.values import json_copy
from aiplane.schema.defaults import apply_defaults
from aiplane.schema.structural import structural_field_errors
from aiplane.schema.validate import validate
from aiplane.sim.apiserver import errors
from aiplane.sim.apiserver.resources import ResourceType

# kube-apiserver's limits (apimachinery validation and the generic registry).
ANNOTATIONS_LIMIT = 256 * 1024
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")

LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
    "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)

# Kinds whose names are DNS labels (kube's per-kind name validation), and DNS-1035 labels.
_LABEL_NAMED = {("", "Namespace")}
_DNS1035_NAMED = {("", "Service")}


def default_pod_requests(spec: dict[str, Any]) -> None:
    """``SetDefaults_Pod``: a container resource with a limit and no request gets the limit as request.

    kube does this on the Pod only, never on pod templates (a Deployment's template keeps its bare
    limits), so the scheduler, QoS class and quota all see requests equal to limits.
    """
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or []:
            resources = container.get("resources") or {}
            limits = resources.get("limits")
            if not limits:
                continue
            requests = resources.setdefault("requests", {})
            for name, value in limits.items():
                requests.setdefault(name, value)


# Fields of a pod spec kube lets an update change (ValidatePodUpdate).
_POD_MUTABLE = ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds", "schedulingGates")


def check_type_meta(rt: ResourceType, obj: dict[str, Any]) -> None:
    api_version = obj.get("apiVersion")
    kind = obj.get("kind")
    if api_version is None and kind is None:
        obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        return
    if kind != rt.kind:
        raise errors.bad_request(
            f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})"
        )
    if api_version != rt.api_version:
        raise errors.bad_request(
            f"the API version in the data ({api_version}) does not match the expected API version ({rt.api_version})"
        )


def check_pod_update(old: dict[str, Any], new: dict[str, Any]) -> None:
    old_spec = json_copy(old.get("spec", {}))
    new_spec = json_copy(new.get("spec", {}))
    for spec in (old_spec, new_spec):
        for key in _POD_MUTABLE:
            spec.pop(key, None)
        for containers in ("containers", "initContainers"):
            for container in spec.get(containers, []) or []:
                container.pop("image", None)
    if not old.get("spec", {}).get("nodeName"):
        old_spec.pop("nodeName", None)
        new_spec.pop("nodeName", None)
    old_selector = old_spec.get("nodeSelector") or {}
    new_selector = new_spec.get("nodeSelector") or {}
    if old.get("spec", {}).get("schedulingGates") and all(
        new_selector.get(k) == v for k, v in old_selector.items()
    ):
        # kube 1.30+ (mutable scheduling directives): a gated pod's nodeSelector may gain entries.
        old_spec.pop("nodeSelector", None)
        new_spec.pop("nodeSelector", None)
    if old_spec != new_spec:
        name = old["metadata"]["name"]
        raise errors.invalid(
            "Pod",
            "",
            name,
            [
                FieldError(
                    "spec",
                    fe.FORBIDDEN,
                    None,
                    "pod updates may not change fields other than `spec.containers[*].image`,"
                    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
                    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
                    "(allow it to be set to 1 if it was previously negative)",
                )
            ],
        )


def validate_object(rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    meta = obj["metadata"]
    name = meta.get("name", "")
    errs = _validate_meta(rt, meta, creating=old is None)
    schema = rt.schema()
    if schema is not None:
        apply_defaults(obj, schema)
        errs += validate(obj, schema, old=old)
    if (rt.group, rt.kind) == ("apiextensions.k8s.io", "CustomResourceDefinition"):
        errs += _validate_crd(obj, old)
    errs += _pod_spec_errors(rt, obj)
    if errs:
        raise errors.invalid(rt.kind, rt.group, name, errs)


# Where each built-in kind keeps its pod spec (kube validates pod templates as it validates Pods).
_POD_SPECS = {
    ("", "Pod"): ("spec",),
    ("", "PodTemplate"): ("template", "spec"),
    ("", "ReplicationController"): ("spec", "template", "spec"),
    ("apps", "Deployment"): ("spec", "template", "spec"),
    ("apps", "ReplicaSet"): ("spec", "template", "spec"),
    ("apps", "StatefulSet"): ("spec", "template", "spec"),
    ("apps", "DaemonSet"): ("spec", "template", "spec"),
    ("batch", "Job"): ("spec", "template", "spec"),
    ("batch", "CronJob"): ("spec", "jobTemplate", "spec", "template", "spec"),
}


def _pod_spec_errors(rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
    """``ValidatePodSpec``'s rule that every container names an image (``containers[i].image: Required
    value``): kube-apiserver refuses a Deployment whose template has a container without one."""
    path = _POD_SPECS.get((rt.group, rt.kind))
    if path is None:
        return []
    spec: Any = obj
    for key in path:
        spec = spec.get(key) if isinstance(spec, dict) else None
    if not isinstance(spec, dict):
        return []
    out = []
    for key in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(key) or []):
            if isinstance(container, dict) and not container.get("image"):
                out.append(fe.required(f"{'.'.join(path)}.{key}[{i}].image", ""))
    return out


def _validate_meta(rt: ResourceType, meta: dict[str, Any], *, creating: bool) -> list[FieldError]:
    out: list[FieldError] = []
    name = str(meta.get("name", ""))
    key = (rt.group, rt.kind)
    if creating:
        out += [FieldError("metadata.name", fe.INVALID, name, msg) for msg in _name_errors(key, name)]
    # ValidateLabels and ValidateAnnotations: one error per problem, each naming the whole map.
    labels = meta.get("labels") or {}
    for label_key, value in labels.items():
        out += [
            FieldError("metadata.labels", fe.INVALID, label_key, msg)
            for msg in label_key_errors(str(label_key))
        ]
        out += [
            FieldError("metadata.labels", fe.INVALID, value, msg) for msg in label_value_errors(str(value))
        ]
    annotations = meta.get("annotations") or {}
    for ann_key in annotations:
        # "The rule is QualifiedName except that case doesn't matter": kube lowercases the key first.
        out += [
            FieldError("metadata.annotations", fe.INVALID, ann_key, msg)
            for msg in label_key_errors(str(ann_key).lower())
        ]
    size = sum(len(str(k)) + len(str(v)) for k, v in annotations.items())
    if size > ANNOTATIONS_LIMIT:
        out.append(
            FieldError(
                "metadata.annotations", fe.TOO_LONG, None, f"must have at most {ANNOTATIONS_LIMIT} bytes"
            )
        )
    controllers = [r for r in meta.get("ownerReferences") or [] if r.get("controller")]
    if len(controllers) > 1:
        out.append(
            FieldError(
                "metadata.ownerReferences",
                fe.INVALID,
                None,
                'Only one reference can have Controller set to true. Found "true" in references for '
                + " and ".join(f"{r.get('kind')}/{r.get('name')}" for r in controllers),
            )
        )
    for i, ref in enumerate(meta.get("ownerReferences") or []):
        for required in ("apiVersion", "kind", "name", "uid"):
            if not ref.get(required):
                out.append(
                    FieldError(
                        f"metadata.ownerReferences[{i}].{required}",
                        fe.INVALID,
                        ref.get(required, ""),
                        f"{required} must not be empty",
                    )
                )
    return out


def _validate_crd(crd: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    spec = crd.get("spec", {})
    names = spec.get("names", {})
    out: list[FieldError] = []
    expected = f"{names.get('plural', '')}.{spec.get('group', '')}"
    if crd["metadata"]["name"] != expected:
        out.append(
            FieldError(
                "metadata.name",
                fe.INVALID,
                crd["metadata"]["name"],
                'must be spec.names.plural+"."+spec.group',
            )
        )
    storage = [v for v in spec.get("versions", []) if v.get("storage")]
    if len(storage) != 1:
        out.append(
            FieldError(
                "spec.versions",
                fe.INVALID,
                None,
                "must have exactly one version marked as storage version",
            )
        )
    for i, version in enumerate(spec.get("versions", [])):
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        if schema is not None:
            out += structural_field_errors(schema, path=f"spec.versions[{i}].schema.openAPIV3Schema")
    if old is not None and old.get("spec", {}).get("scope") != spec.get("scope"):
        out.append(FieldError("spec.scope", fe.INVALID, spec.get("scope"), "field is immutable"))
    return out + _api_approval_errors(crd, old)


API_APPROVED: Final = "api-approved.kubernetes.io"
_APPROVAL_PR: Final = "see https://github.com/kubernetes/enhancements/pull/1111"


def _approval_state(annotations: dict[str, Any]) -> tuple[str, str]:
    """apiextensions' ``GetAPIApprovalState``: (state, reason) of the approval annotation."""
    value = str(annotations.get(API_APPROVED) or "")
    parsed = urlsplit(value)
    if not value:
        return "missing", f'protected groups must have approval annotation "{API_APPROVED}", {_APPROVAL_PR}'
    if value.startswith("unapproved"):
        return "bypassed", ""
    if parsed.scheme and parsed.netloc and " " not in value:
        return "approved", ""
    return "invalid", (
        f'protected groups must have approval annotation "{API_APPROVED}" with either a URL or a reason '
        f'starting with "unapproved", {_APPROVAL_PR}'
    )


def _api_approval_errors(crd: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    """``validateAPIApproval``: a CRD of a ``k8s.io`` or ``kubernetes.io`` group needs the annotation
    naming its API review (or a reason starting with "unapproved"), unless an update leaves its state."""
    group = str((crd.get("spec") or {}).get("group") or "")
    if not any(group == g or group.endswith("." + g) for g in ("k8s.io", "kubernetes.io")):
        return []
    annotations = crd["metadata"].get("annotations") or {}
    state, reason = _approval_state(annotations)
    if old is not None and _approval_state(old["metadata"].get("annotations") or {})[0] == state:
        return []
    path = f"metadata.annotations[{API_APPROVED}]"
    if state == "missing":
        return [FieldError(path, fe.REQUIRED, None, reason)]
    if state == "invalid":
        return [FieldError(path, fe.INVALID, annotations.get(API_APPROVED), reason)]
    return []


def _name_errors(kind: tuple[str, str], name: str) -> list[str]:
    """The kind's name validation: a DNS-1123 label for namespaces, a DNS-1035 label for services, a
    path segment for RBAC kinds (``system:discovery``), else ``NameIsDNSSubdomain``."""
    if kind[0] == "rbac.authorization.k8s.io":
        return _path_segment_errors(name)
    if kind in _LABEL_NAMED:
        regex, msg = _DNS1123_LABEL, LABEL_MSG
    elif kind in _DNS1035_NAMED:
        regex, msg = _DNS1035_LABEL, DNS1035_MSG
    else:
        return dns1123_subdomain_errors(name)
    errs = ["must be no more than 63 characters"] if len(name) > 63 else []
    return errs if regex.fullmatch(name) else [*errs, msg]


def _path_segment_errors(name: str) -> list[str]:
    """apimachinery's ``path.IsValidPathSegmentName`` (what RBAC objects' names must be)."""
    if name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{bad}'" for bad in ("/", "%") if bad in name]
