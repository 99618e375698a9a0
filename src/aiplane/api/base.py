"""Building blocks shared by every API group: the model base class and the Kubernetes built-in types.

The pydantic models are the single source of truth for our custom resources: the CRDs are generated
from them (:mod:`aiplane.api.crdgen`). Each model field carries what the CRD needs — description,
default, enum and limits — in pydantic's own vocabulary, and CRD-only markers (CEL rules, list types)
through ``json_schema_extra``.

Built-in Kubernetes types (PodSpec, Probe, LabelSelector, …) are plain ``dict`` values here: their
schemas come from the Kubernetes OpenAPI document (:mod:`aiplane.api.builtin`), and a model checks an
embedded value against that schema, so an unknown field inside a PodSpec is rejected just like an
unknown field of ours.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel

from aiplane.api import builtin

#: The marker our CRD generator replaces with the structural schema of a Kubernetes definition.
BUILTIN_MARKER = "x-aiplane-builtin"


class ApiModel(BaseModel):
    """Base of every spec/status type: camelCase on the wire, unknown fields rejected.

    Unknown fields are rejected because kube-apiserver prunes them silently: a typo like
    ``maxParalel`` would otherwise vanish and the user would never know why the limit is ignored.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        validate_assignment=False,
        use_attribute_docstrings=False,
    )

    def to_dict(self) -> dict[str, Any]:
        """The object as the API server would store it: JSON-compatible, absent fields omitted."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class ObjectMeta(BaseModel):
    """The subset of metadata users write; everything else the server sets is accepted as-is."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    name: str | None = None
    generateName: str | None = None
    namespace: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


@dataclass(frozen=True)
class PrinterColumn:
    name: str
    json_path: str
    type: str = "string"
    description: str | None = None
    priority: int = 0

    def to_crd(self) -> dict[str, Any]:
        col: dict[str, Any] = {"jsonPath": self.json_path, "name": self.name, "type": self.type}
        if self.description:
            col["description"] = self.description
        if self.priority:
            col["priority"] = self.priority
        return col


AGE = PrinterColumn("Age", ".metadata.creationTimestamp", "date")


@dataclass(frozen=True)
class Scale:
    spec_replicas_path: str = ".spec.replicas"
    status_replicas_path: str = ".status.replicas"
    label_selector_path: str | None = ".status.labelSelector"


@dataclass(frozen=True)
class CrdInfo:
    """How a kind is served: everything in the CRD that is not the schema."""

    group: str
    kind: str
    plural: str
    scope: Literal["Namespaced", "Cluster"]
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    printer_columns: tuple[PrinterColumn, ...] = ()
    scale: Scale | None = None
    version: str = "v1alpha1"
    description: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def name(self) -> str:
        return f"{self.plural}.{self.group}"


class Resource(ApiModel):
    """A top-level kind. Subclasses set ``crd``; ``spec``/``status`` are declared per kind."""

    crd: ClassVar[CrdInfo]

    apiVersion: str
    kind: str
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    @model_validator(mode="after")
    def _check_type_meta(self) -> Resource:
        if self.apiVersion != self.crd.api_version:
            raise ValueError(f"apiVersion must be {self.crd.api_version!r}, not {self.apiVersion!r}")
        if self.kind != self.crd.kind:
            raise ValueError(f"kind must be {self.crd.kind!r}, not {self.kind!r}")
        return self


# --- Kubernetes built-in types ---------------------------------------------------------------------


def _builtin_validator(definition: str) -> Any:
    def check(value: dict[str, Any]) -> dict[str, Any]:
        from aiplane.schema.validate import validate_builtin

        errors = validate_builtin(value, definition)
        if errors:
            raise ValueError("; ".join(e.render() for e in errors))
        return value

    return check


def builtin_type(definition: str, python_type: Any = dict[str, Any]) -> Any:
    """An annotated type whose schema is the Kubernetes definition ``definition``."""
    return Annotated[
        python_type,
        WithJsonSchema({BUILTIN_MARKER: definition}),
        AfterValidator(_builtin_validator(definition)),
    ]


_QUANTITY_RE = re.compile(builtin.QUANTITY_PATTERN)


def _check_quantity(value: int | str) -> int | str:
    if isinstance(value, str) and not _QUANTITY_RE.match(value):
        raise ValueError(f"{value!r} is not a valid quantity (e.g. 8, 500m, 64Gi)")
    return value


def _reject_bool(value: Any) -> Any:
    # YAML 'yes'/'true' would otherwise become an int through bool; the API server rejects it.
    if isinstance(value, bool):
        raise ValueError("must be an integer or a string")
    return value


Quantity = Annotated[
    int | str,
    BeforeValidator(_reject_bool),
    AfterValidator(_check_quantity),
    WithJsonSchema({BUILTIN_MARKER: builtin.QUANTITY}),
]
IntOrString = Annotated[
    int | str,
    BeforeValidator(_reject_bool),
    WithJsonSchema({BUILTIN_MARKER: builtin.INT_OR_STRING}),
]
Time = Annotated[str, WithJsonSchema({BUILTIN_MARKER: builtin.TIME})]
RawExtension = Annotated[dict[str, Any], WithJsonSchema({BUILTIN_MARKER: builtin.RAW_EXTENSION})]

PodSpec = builtin_type("io.k8s.api.core.v1.PodSpec")
Container = builtin_type("io.k8s.api.core.v1.Container")
EnvVar = builtin_type("io.k8s.api.core.v1.EnvVar")
Probe = builtin_type("io.k8s.api.core.v1.Probe")
LabelSelector = builtin_type("io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector")
ResourceClaim = builtin_type("io.k8s.api.core.v1.ResourceClaim")
HorizontalPodAutoscalerBehavior = builtin_type("io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerBehavior")
MetricSpec = builtin_type("io.k8s.api.autoscaling.v2.MetricSpec")

PersistentVolumeAccessMode = Literal["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"]

_CONDITION = "io.k8s.apimachinery.pkg.apis.meta.v1.Condition"


def conditions_field(description: str) -> Any:
    """A ``conditions`` list: metav1.Condition items, merged by ``type`` (a list-map, as upstream)."""
    return Field(
        default=None,
        description=description,
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
        },
    )


Condition = builtin_type(_CONDITION)
Conditions = list[Condition] | None


def rule(expression: str, message: str, *, field_path: str | None = None, reason: str | None = None) -> dict[str, Any]:
    """One ``x-kubernetes-validations`` entry (a CEL rule evaluated by the API server)."""
    entry: dict[str, Any] = {"rule": expression, "message": message}
    if field_path is not None:
        entry["fieldPath"] = field_path
    if reason is not None:
        entry["reason"] = reason
    return entry
